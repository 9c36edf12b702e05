"""Full-page PNG screenshots of evekit's HTML pages (index.html, report.html), as a reader sees them.

    python scripts/screenshot_pages.py outputs/demo/index.html outputs/demo/summary/report.html --out shots/
    python scripts/screenshot_pages.py outputs/demo --out shots/      # every index.html and report.html under it

Headless Chromium driven by Playwright (`pip install playwright`; the browser is the system's,
`/usr/bin/chromium` or $EVEKIT_CHROMIUM: Playwright downloads none). Each page is opened from disk,
given time to render its explorers, and saved as `<out>/<path relative to the common folder,
'/' as '__'>.png`. Exit code 2 when Playwright or the browser is missing (said on stderr).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

CHROMIUM = os.environ.get("EVEKIT_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
PAGES = ("index.html", "report.html")


def missing() -> str | None:
    """Why screenshots cannot be taken here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright; it is in evekit's dev extra)"
    if not Path(CHROMIUM).is_file():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium, or set EVEKIT_CHROMIUM)"
    return None


def pages_of(paths: list[Path]) -> list[Path]:
    """The HTML files named, and every index.html / report.html under the folders named."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(f for f in p.rglob("*.html") if f.name in PAGES)
        elif p.suffix.lower() in (".html", ".htm"):
            out.append(p)
        else:
            raise SystemExit(f"not an HTML file or folder: {p}")
    return list(dict.fromkeys(f.resolve() for f in out))


def shot_name(page: Path, root: Path) -> str:
    """'summary__report.png' for <root>/summary/report.html."""
    rel = page.relative_to(root) if page.is_relative_to(root) else Path(page.name)
    return "__".join(rel.with_suffix("").parts) + ".png"


def screenshot(pages: list[Path], out: Path, *, width: int = 1280, timeout_ms: int = 15000) -> list[Path]:
    """Each page as a full-page PNG in `out` (the file names: `shot_name`); returns the PNGs."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    root = Path(os.path.commonpath([str(p.parent) for p in pages])) if pages else Path.cwd()
    written = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": 900})
            for f in pages:
                page.goto(f.as_uri(), wait_until="load", timeout=timeout_ms)
                try:  # the item explorers render from their JSON after load
                    page.wait_for_function("""() => Array.from(document.querySelectorAll('div.evekit-explorer'))
                        .every(n => n.getAttribute('data-ready') || n.getAttribute('data-error'))""", timeout=timeout_ms)
                except Exception:  # a page without a ready explorer is shot as it is
                    pass
                target = out / shot_name(f, root)
                page.screenshot(path=str(target), full_page=True)
                written.append(target)
                print(f"{target}  <- {f}")
        finally:
            browser.close()
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", type=Path, help="HTML files, or folders to take every index.html and report.html of")
    ap.add_argument("--out", type=Path, default=Path("screenshots"), help="folder for the PNGs (default: screenshots/)")
    ap.add_argument("--width", type=int, default=1280, help="viewport width in pixels (the height is the page's)")
    args = ap.parse_args(argv)
    why = missing()
    if why:
        print(f"screenshot_pages: {why}", file=sys.stderr)
        return 2
    pages = pages_of(args.paths)
    if not pages:
        print("screenshot_pages: no index.html or report.html found", file=sys.stderr)
        return 1
    screenshot(pages, args.out, width=args.width)
    return 0


if __name__ == "__main__":
    sys.exit(main())
