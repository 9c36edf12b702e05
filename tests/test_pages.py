"""Every page a batch writes reads clean (issue 28): a real batch of every notebook kind
(tests/browser_batch.py: papermill, the notebooks' cells, report.html, the index, against the stub
server), its win rate and ranking entries without `name`, then each index.html and report.html read
with BeautifulSoup: no `NaN`, no pandas table with its 0..n index column, no absolute path into the
temporary folder the batch ran in, every glossary link landing on an id of its page, and each
configuration called by one name on the index, the summary, the win rate and the ranking.
The same checks in Chromium (rendered text) when Playwright and /usr/bin/chromium are there."""
from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

sys.path.insert(0, str(Path(__file__).resolve().parent))
from browser_batch import PAYLOADS, browser_required, build  # noqa: E402

from evekit.naming import configuration_name  # noqa: E402

CHROMIUM = os.environ.get("EVEKIT_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """The batch (entries unnamed) and its pages: {path relative to the run folder: (html, soup)}."""
    root = tmp_path_factory.mktemp("pages")
    # Run from the batch's own folder, as a user runs evekit from their project: paths on the pages
    # are then relative to it (`paths.display_path`), and any absolute one left is a leak.
    here = os.getcwd()
    os.chdir(root)
    try:
        b = build(root, named=False)
    finally:
        os.chdir(here)
    assert b.code == 0, f"the batch failed (exit {b.code}); see {b.run_dir}"
    files = sorted(p for p in b.run_dir.rglob("*.html") if p.name in ("index.html", "report.html"))
    out = {}
    for f in files:
        text = f.read_text(encoding="utf-8")
        out[f.relative_to(b.run_dir).as_posix()] = (text, BeautifulSoup(text, "html.parser"))
    return b, out


def _visible(soup: BeautifulSoup) -> str:
    """The text a reader sees (no script or style content)."""
    soup = BeautifulSoup(str(soup), "html.parser")
    for tag in soup(["script", "style", "head"]):
        tag.decompose()
    return soup.get_text(" ")


def test_the_batch_wrote_a_page_of_every_kind(pages):
    _, found = pages
    kinds = {"index.html", "summary/report.html", "judge_validation/fact_check/report.html",
             "ranking/open_ended/report.html"}
    assert kinds <= set(found), sorted(found)
    assert any(p.startswith("win_rate/") for p in found), sorted(found)
    tasks = [p for p in found if p.endswith("/report.html") and p.split("/")[0] not in
             ("summary", "judge_validation", "ranking", "win_rate", "failed")]
    assert len(tasks) == 3, tasks  # open_ended for both models, mcqa_single_answer


def test_no_page_shows_nan(pages):
    _, found = pages
    for name, (_, soup) in found.items():
        text = _visible(soup)
        assert not re.search(r"\bNaN\b|<NA>|\bnan\b", text), (name, re.findall(r".{40}(?:\bNaN\b|<NA>|\bnan\b).{40}", text)[:3])


def test_no_table_shows_pandas_0_to_n_index(pages):
    _, found = pages
    for name, (_, soup) in found.items():
        for table in soup.select("table"):
            body_heads = [th.get_text(strip=True) for th in table.select("tbody tr > th:first-child")]
            head = table.select_one("thead tr")
            corner = head.find(["th", "td"]).get_text(strip=True) if head and head.find(["th", "td"]) else None
            counting = bool(body_heads) and body_heads == [str(i) for i in range(len(body_heads))]
            assert not (counting and corner == ""), (name, str(table)[:300])
        assert not soup.select("table.dataframe"), (name, "a pandas table not drawn by report.table_html")


def test_no_page_names_the_temporary_folder(pages):
    b, found = pages
    roots = {str(b.root), str(b.root.resolve()), os.path.realpath(tempfile.gettempdir()) + os.sep,
             tempfile.gettempdir() + os.sep}
    for name, (text, soup) in found.items():
        visible = _visible(soup)
        for root in roots:
            assert root not in visible, (name, root, visible[max(0, visible.find(root) - 80): visible.find(root) + 80])


def test_every_glossary_link_lands_on_its_page(pages):
    _, found = pages
    linked = 0
    for name, (_, soup) in found.items():
        ids = {t["id"] for t in soup.select("[id]")}
        for a in soup.select('a[href^="#g-"]'):
            linked += 1
            assert a["href"][1:] in ids, (name, a["href"])
        if name.endswith("report.html"):
            assert soup.select("a.glossary-term"), (name, "no term linked to the glossary")
    assert linked > 0


def test_one_configuration_is_one_name_on_index_summary_win_rate_and_ranking(pages):
    _, found = pages
    run = PAYLOADS["run_name"]
    names = [configuration_name(PAYLOADS["model_name"], run), configuration_name(PAYLOADS["model_name (second model)"], run)]
    assert all(" \u00b7 " in n for n in names)
    win_rate = next(p for p in found if p.startswith("win_rate/"))
    for page in ("index.html", "summary/report.html", win_rate, "ranking/open_ended/report.html"):
        text = found[page][1].get_text()
        for n in names:
            assert n in text, (page, n)
    # The index's task rows name the model by it, cell for cell.
    cells = {td.get_text(strip=True) for td in found["index.html"][1].select("table tr td:nth-of-type(2)")}
    assert set(names) <= cells, cells


def test_pages_render_clean_in_chromium(pages):
    why = None
    if not Path(CHROMIUM).is_file():
        why = f"no Chromium at {CHROMIUM} (apt-get install chromium, or set EVEKIT_CHROMIUM)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            why = "playwright is not installed (it is in the dev extra)"
    if why is not None:
        if browser_required():  # make test installed both (CI): a missing browser is a failure
            pytest.fail(f"browser test required (EVEKIT_REQUIRE_BROWSER or CI is set) but cannot run: {why}")
        pytest.skip(f"{why}; the BeautifulSoup checks above still ran")
    from playwright.sync_api import sync_playwright

    b, found = pages
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            for name in found:
                page.goto((b.run_dir / name).as_uri(), wait_until="load")
                text = page.inner_text("body")
                assert not re.search(r"\bNaN\b", text), name
                assert str(b.root) not in text, name
                missing = page.eval_on_selector_all(
                    'a[href^="#g-"]', "as => as.map(a => a.getAttribute('href').slice(1))"
                                      ".filter(id => !document.getElementById(id))")
                assert not missing, (name, missing)
        finally:
            browser.close()
