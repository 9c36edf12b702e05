"""Screenshot of evekit's item explorer as JupyterLab shows it (the stored output of `run.explorer()`).

Needs JupyterLab (evekit's `lab` extra: `pip install -e '.[lab]'`, or a separate venv with
`pip install 'jupyterlab>=4.2'`), Playwright for Python and the system Chromium (/usr/bin/chromium
or $EVEKIT_CHROMIUM; Playwright downloads no browser). JupyterLab runs the scripts of trusted
outputs only, so trust a copy of the notebook and serve it first:

    mkdir -p /tmp/labnb && cp notebooks/open_ended.ipynb /tmp/labnb/
    jupyter trust /tmp/labnb/open_ended.ipynb
    jupyter lab --no-browser --port 8899 --ServerApp.token='' --ServerApp.password='' \
        --ServerApp.root_dir=/tmp/labnb > /tmp/lab.log 2>&1 &
    python scripts/screenshot_jupyterlab.py            # -> docs/img/explorer_jupyterlab.png

The script opens the notebook, scrolls to the explorer's output, waits for its table to have rows,
opens one item (a click on its row) and saves the viewport. Exit code 1 when the explorer did not
start (the fallback text stays; the PNG is saved anyway, and the browser console is printed).
"""
from __future__ import annotations

import argparse
import os
import sys

CHROMIUM = os.environ.get("EVEKIT_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8899/lab/tree/open_ended.ipynb")
    ap.add_argument("--out", default="docs/img/explorer_jupyterlab.png")
    ap.add_argument("--row", type=int, default=0, help="which row of the explorer to open (0: the first)")
    ap.add_argument("--timeout", type=int, default=60000, help="ms to wait for the notebook and the explorer")
    a = ap.parse_args()
    from playwright.sync_api import TimeoutError as PWTimeout, sync_playwright

    console: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
        page.goto(a.url, wait_until="domcontentloaded", timeout=a.timeout)
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=a.timeout)
        box = page.locator(".jp-OutputArea-output div.evekit-explorer").first
        box.wait_for(state="attached", timeout=a.timeout)
        box.scroll_into_view_if_needed()
        ok = True
        try:
            box.locator("tr.ee-row").first.wait_for(state="visible", timeout=a.timeout)
            row = box.locator("tr.ee-row").nth(a.row)
            row.click()
            box.locator("tr.ee-detail").first.wait_for(state="visible", timeout=5000)
            # the explorer's controls and metrics at the top of the view, the opened item below them
            box.evaluate("n => n.scrollIntoView({block: 'start'})")
        except PWTimeout:
            ok = False
            print("the explorer did not start; its output shows:", box.inner_text()[:300], file=sys.stderr)
        try:  # JupyterLab's "get notified about Jupyter news?" toast would cover the item
            page.locator(".Toastify").get_by_role("button", name="No", exact=True).click(timeout=3000)
        except PWTimeout:
            pass
        page.wait_for_timeout(500)
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        page.screenshot(path=a.out)
        print("rows:", box.get_attribute("data-total"), "shown:", box.get_attribute("data-shown"),
              "ready:", box.get_attribute("data-ready"), "->", a.out)
        browser.close()
    if not ok:
        print("\n".join(console), file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
