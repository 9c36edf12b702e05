"""The reports in a real browser (issue 29): Debian's Chromium driven by Playwright opens a batch's
index.html from disk, follows every link it can reach (report pages, anchors, the explorer's
filtered views), and fails on a broken link, a missing anchor, a console error, a failed request, a
missing image or any request that leaves file:// (report.html loads nothing from the network). It
opens one unit in each report kind's explorer and checks it against the kind's own file
(samples.csv, results.csv, battles.csv, verdicts.csv), applies outcome filters and checks the count
against one computed from those files, and feeds script and markup payloads through the whole run
(dataset, replies, judge rationales, model and run names): no dialog opens, `window.__pwned` stays
unset, no `javascript:` link exists, and every payload is shown as text.

Artefacts (screenshots, the pages and links visited, where each payload ended up): the folder
$EVEKIT_TEST_ARTIFACTS, default test-artifacts/browser/ (git-ignored).
The batch itself is tests/browser_batch.py."""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import sys
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest

from evekit.paths import REPO_ROOT

sys.path.insert(0, str(Path(__file__).resolve().parent))
from browser_batch import PAYLOADS, browser_required  # noqa: E402

CHROMIUM = os.environ.get("EVEKIT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(os.environ.get("EVEKIT_TEST_ARTIFACTS", REPO_ROOT / "test-artifacts" / "browser"))

def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (it is in the dev extra: pip install -e '.[dev]')"
    if not Path(CHROMIUM).is_file():
        return (f"no Chromium at {CHROMIUM} (apt-get install chromium, as `make test` does as root; "
                "or set EVEKIT_CHROMIUM)")
    return None


if (_why := _missing()) is not None:
    if browser_required():  # make test installed both (CI): a missing browser is a failure, not a skip
        pytest.fail(f"browser test required (EVEKIT_REQUIRE_BROWSER or CI is set) but cannot run: {_why}",
                    pytrace=False)
    pytest.skip(_why, allow_module_level=True)


def launch(p):  # -> playwright Browser
    """Headless Debian Chromium (Playwright downloads no browser here)."""
    return p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


# -- what the crawl saw -----------------------------------------------------------------------
@dataclass
class Site:
    run_dir: Path
    pages: dict[str, dict] = field(default_factory=dict)       # document path (relative) -> what it holds
    links: list[dict] = field(default_factory=list)            # every link: page, href, target, ok, why
    console: list[str] = field(default_factory=list)           # console errors and page errors
    failed: list[str] = field(default_factory=list)            # failed requests
    offsite: list[str] = field(default_factory=list)           # requests that are not file:// or data:
    dialogs: list[str] = field(default_factory=list)           # alert/confirm/prompt that opened
    pwned: list[str] = field(default_factory=list)             # pages where window.__pwned was set
    js_links: list[str] = field(default_factory=list)          # a[href^=javascript:] found in a DOM
    texts: dict[str, str] = field(default_factory=dict)        # page -> visible text, every row opened
    context: object = None
    seconds: float = 0.0

    def rel(self, url: str) -> str:
        path = Path(urllib.parse.unquote(urllib.parse.urlsplit(url).path))
        try:
            return path.relative_to(self.run_dir).as_posix()
        except ValueError:
            return str(path)


def _wait_explorers(page) -> None:
    """Every explorer on the page has read its data and rendered (or said why not)."""
    page.wait_for_function("""() => Array.from(document.querySelectorAll('div.evekit-explorer'))
        .every(n => n.getAttribute('data-ready') || n.getAttribute('data-error'))""", timeout=15000)
    errors = page.eval_on_selector_all("div.evekit-explorer[data-error]", "ns => ns.map(n => n.getAttribute('data-error'))")
    assert not errors, f"{page.url}: explorer failed: {errors}"


def _open_explorers(site: Site, doc: str | Path, view: str = ""):
    """A watched new page on a report of the batch (`view`: an address after it), its explorers rendered."""
    page = site.context.new_page()
    _watch(site, page)
    page.goto((site.run_dir / doc).as_uri() + view)
    _wait_explorers(page)
    return page


def _watch(site: Site, page) -> None:
    page.on("console", lambda m: site.console.append(f"{site.rel(page.url)}: console.{m.type}: {m.text}")
            if m.type in ("error", "assert") else None)
    page.on("pageerror", lambda e: site.console.append(f"{site.rel(page.url)}: uncaught: {e}"))
    page.on("requestfailed", lambda r: site.failed.append(f"{site.rel(page.url)}: {r.url} ({r.failure})"))
    page.on("request", lambda r: None if r.url.startswith(("file://", "data:", "blob:", "about:"))
            else site.offsite.append(f"{site.rel(page.url)}: {r.url}"))

    def dialog(d):
        site.dialogs.append(f"{site.rel(page.url)}: {d.type}: {d.message}")
        d.dismiss()
    page.on("dialog", dialog)


# An anchor is found as the browser finds it (the fragment, then its decoded form); an explorer's
# view (`#explorer?outcome=..`) by the explorer's id before the "?".
_ANCHOR_JS = """(frag) => {
    const ids = [frag, frag.split('?')[0]];
    return ids.some(id => {
        let dec = id; try { dec = decodeURIComponent(id); } catch (e) {}
        return !!(document.getElementById(id) || document.getElementById(dec)
                  || document.getElementsByName(id).length || document.getElementsByName(dec).length);
    });
}"""


def _check_page(site: Site, page, doc: str) -> None:
    """The state every page must be in: images loaded, nothing run, no javascript: link."""
    broken = page.eval_on_selector_all(
        "img", "imgs => imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => (i.src || '').slice(0, 80))")
    assert not broken, f"{doc}: images that did not load: {broken}"
    if page.evaluate("typeof window.__pwned") != "undefined":
        site.pwned.append(f"{doc}: window.__pwned = {page.evaluate('String(window.__pwned)')}")
    site.js_links += [f"{doc}: {h}" for h in page.eval_on_selector_all(
        "a[href], area[href], iframe[src], form[action]",
        "els => els.map(e => e.getAttribute('href') || e.getAttribute('src') || e.getAttribute('action'))"
        ".filter(h => /^\\s*javascript:/i.test(h))")]


def _open_everything(page) -> None:
    """Open every explorer row (all pages of it) and every <details>, so all text is visible."""
    page.evaluate("""() => {
        document.querySelectorAll('div.evekit-explorer').forEach(n => {
            const sel = n.querySelector('select.ee-outcome');
            if (sel) { sel.value = ''; sel.dispatchEvent(new Event('change')); }
        });
    }""")
    for ex in page.query_selector_all("div.evekit-explorer"):
        while True:
            for row in ex.query_selector_all("tr.ee-row:not(.ee-open)"):
                row.click()
            nxt = ex.query_selector("button.ee-next")
            if nxt is None or nxt.is_disabled():
                break
            nxt.click()
    page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")


@pytest.fixture(scope="module")
def batch_run(tmp_path_factory):
    from browser_batch import build

    t0 = time.monotonic()
    b = build(tmp_path_factory.mktemp("browser") / "batch")
    b.seconds = time.monotonic() - t0
    assert b.code == 0, "a notebook of the batch failed (see the log above)"
    return b


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()


@pytest.fixture(scope="module")
def site(batch_run, browser):
    """Crawl from index.html: every document reachable, every link on it checked, each page
    screenshot; then every row of every explorer opened for the payload checks."""
    shutil.rmtree(ARTIFACTS / "screenshots", ignore_errors=True)  # only what this test writes there
    for name in ("visited.txt", "payloads.md"):
        (ARTIFACTS / name).unlink(missing_ok=True)
    (ARTIFACTS / "screenshots").mkdir(parents=True)
    run_dir = batch_run.run_dir.resolve()
    s = Site(run_dir=run_dir)
    t0 = time.monotonic()
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    s.context = context
    page = context.new_page()
    _watch(s, page)
    queue = [run_dir / "index.html"]
    wanted: dict[Path, set[str]] = {}       # document -> fragments other pages link to
    seen: set[Path] = set()
    while queue:
        doc = queue.pop(0)
        if doc in seen:
            continue
        seen.add(doc)
        rel = s.rel(doc.as_uri())
        page.goto(doc.as_uri())
        page.wait_for_load_state("load")
        _wait_explorers(page)
        _check_page(s, page, rel)
        shot = ARTIFACTS / "screenshots" / (rel.replace("/", "__").replace(".html", "") + ".png")
        page.screenshot(path=str(shot), full_page=True)
        hrefs = page.eval_on_selector_all("a[href]", "as => as.map(a => [a.getAttribute('href'), a.textContent])")
        s.pages[rel] = {"title": page.title(), "links": len(hrefs), "screenshot": shot.name,
                        "explorer": page.eval_on_selector_all(
                            "div.evekit-explorer", "ns => ns.map(n => Number(n.getAttribute('data-total')))")}
        for href, label in hrefs:
            split = urllib.parse.urlsplit(href)
            link = {"page": rel, "href": href, "text": " ".join((label or "").split())[:60]}
            s.links.append(link)
            if split.scheme in ("http", "https", "mailto"):
                link.update(ok=False, why="leaves the disk (no network in a report)")
                continue
            if split.scheme or split.netloc:
                link.update(ok=False, why=f"unexpected scheme {split.scheme!r}")
                continue
            target = (doc.parent / urllib.parse.unquote(split.path)).resolve() if split.path else doc
            link["target"] = s.rel(target.as_uri()) + (f"#{split.fragment}" if split.fragment else "")
            if not target.is_file():
                link.update(ok=False, why="no such file")
                continue
            link["ok"] = True
            if target.suffix == ".html" and target != doc:
                queue.append(target)
            if split.fragment:
                if target == doc:
                    if not page.evaluate(_ANCHOR_JS, split.fragment):
                        link.update(ok=False, why="no element with that id")
                else:
                    wanted.setdefault(target, set()).add(split.fragment)
            link["_label"] = label
    # Fragments pointing into other documents: the element exists; an explorer view applies its filter.
    for link in s.links:
        if not link.get("ok") or "#" not in link.get("target", "") or link["href"].startswith("#"):
            continue
        doc_rel, frag = link["target"].split("#", 1)
        page.goto((run_dir / doc_rel).as_uri() + "#" + frag)
        page.wait_for_load_state("load")
        _wait_explorers(page)
        if not page.evaluate(_ANCHOR_JS, frag):
            link.update(ok=False, why="no element with that id")
            continue
        if frag.startswith("explorer?"):
            shown = page.get_attribute("div.evekit-explorer#explorer", "data-shown")
            link["shown"] = int(shown)
            label = (link.get("_label") or "").strip()
            if label.isdigit() and int(label) != int(shown):
                link.update(ok=False, why=f"the link says {label}, the explorer shows {shown}")
    # Same-page explorer links (a metric's failing items): they filter to the count they name.
    for doc_rel in list(s.pages):
        if not s.pages[doc_rel]["explorer"]:
            continue
        page.goto((run_dir / doc_rel).as_uri())
        _wait_explorers(page)
        for a in page.query_selector_all("a.ee-fail-link"):
            n = int(a.text_content().split()[0])
            a.click()
            page.wait_for_function(f"() => document.querySelector('#explorer').getAttribute('data-shown') == '{n}'",
                                   timeout=5000)
        page.goto((run_dir / doc_rel).as_uri())
        _wait_explorers(page)
        _open_everything(page)
        _check_page(s, page, doc_rel + " (every row open)")
        s.texts[doc_rel] = page.evaluate("() => document.body.innerText")
    for doc_rel in s.pages:
        if doc_rel not in s.texts:
            page.goto((run_dir / doc_rel).as_uri())
            _wait_explorers(page)
            s.texts[doc_rel] = page.evaluate("() => document.body.innerText")
    page.close()
    s.seconds = time.monotonic() - t0
    _write_visited(s, batch_run)
    yield s
    context.close()


def _write_visited(s: Site, batch_run) -> None:
    lines = [f"batch: {batch_run.seconds:.0f} s to run, crawl: {s.seconds:.0f} s (load average "
             f"{os.getloadavg()[0]:.1f}); index: {s.run_dir / 'index.html'}", "",
             f"pages visited ({len(s.pages)}):"]
    for rel, p in s.pages.items():
        ex = f", explorer of {p['explorer'][0]} units" if p["explorer"] else ""
        lines.append(f"  {rel}  [{p['links']} links{ex}; {p['screenshot']}]  {p['title']}")
    lines += ["", f"links followed ({len(s.links)}):"]
    for link in s.links:
        extra = f" -> explorer shows {link['shown']}" if "shown" in link else ""
        state = "ok" if link.get("ok") else f"BROKEN ({link.get('why')})"
        lines.append(f"  {link['page']}: {link['href']} '{link['text']}' -> {link.get('target', '-')}: {state}{extra}")
    (ARTIFACTS / "visited.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


# -- the tests ------------------------------------------------------------------------------
def test_the_crawl_reaches_every_report_and_no_link_is_broken(site, batch_run):
    reports = {p.relative_to(site.run_dir.resolve()).as_posix()
               for p in site.run_dir.resolve().rglob("report.html")}
    assert len(reports) == 7  # validation, 3 task runs, win rate, ranking, summary (none failed)
    assert reports <= set(site.pages), f"reports no link reaches: {reports - set(site.pages)}"
    broken = [f"{l['page']}: {l['href']} ({l['why']})" for l in site.links if not l.get("ok")]
    assert not broken, broken
    empty = [f"{l['page']}: {l['href']}" for l in site.links if not l["text"]]
    assert not empty, f"links with no text to click: {empty}"
    assert len(site.links) > 50
    assert (ARTIFACTS / "visited.txt").is_file()
    assert all((ARTIFACTS / "screenshots" / p["screenshot"]).stat().st_size > 10_000 for p in site.pages.values())


def test_no_console_error_no_failed_request_and_nothing_from_the_network(site):
    assert not site.console, site.console
    assert not site.failed, site.failed
    assert not site.offsite, site.offsite  # report.html pulls no require.js, MathJax or widget scripts


def test_the_index_counts_lead_to_the_explorer_showing_as_many(site, batch_run):
    explorer_links = [l for l in site.links if l["page"] == "index.html" and "#explorer?" in l["href"]]
    assert {urllib.parse.urlsplit(l["href"]).fragment for l in explorer_links} == \
        {"explorer?outcome=unparsed", "explorer?outcome=failed"}
    for link in explorer_links:
        doc = site.run_dir / link["target"].split("#")[0]
        s = pd.read_csv(doc.parent / "samples.csv")
        outcome = link["href"].split("outcome=")[1]
        assert link["shown"] == int(s[outcome].sum()) == int(link["text"]), link


def _open_unit(site: Site, doc_rel: str, unit_id: str):
    page = _open_explorers(site, doc_rel)
    row = page.locator(f"div.evekit-explorer tr.ee-row[data-id={json.dumps(unit_id)}]")
    row.click()
    story = page.locator("tr.ee-detail").first
    story.wait_for()
    sections = {}
    for sec in story.locator("[data-section]").all():
        title = sec.get_attribute("data-section")
        if sec.locator("table.ee-kv").count():
            sections[title] = {r.locator("td").nth(0).inner_text(): r.locator("td").nth(1).text_content()
                               for r in sec.locator("table.ee-kv tr").all()}
        else:
            sections[title] = "\n".join(p.text_content() for p in sec.locator("pre").all())
    shot = ARTIFACTS / "screenshots" / ("opened__" + doc_rel.replace("/", "__").replace(".html", "") + ".png")
    story.scroll_into_view_if_needed()
    page.screenshot(path=str(shot), full_page=False)
    return page, sections


def _task_docs(site: Site, task: str) -> list[str]:
    return sorted(d for d in site.pages if d.endswith(f"/{task}/report.html") and not d.startswith(("ranking/",
                                                                                                   "win_rate/")))


def test_a_task_item_opens_into_what_samples_csv_holds(site):
    for doc in _task_docs(site, "open_ended") + _task_docs(site, "mcqa_single_answer"):
        s = pd.read_csv(site.run_dir / Path(doc).parent / "samples.csv", dtype={"doc_id": str})
        r = s.iloc[0]
        page, sec = _open_unit(site, doc, str(r["doc_id"]))
        assert sec["Question"] == r["doc.Question"]
        assert sec["Gold answer"] == str(r["target"])
        assert sec["Raw reply"] == r["response"]
        if "doc.Choices" in s:
            assert sec["Choices"] == r["doc.Choices"].replace(" | ", "\n")
        for j in ("j1", "j2"):
            if f"judge_{j}" in s:
                assert sec[f"Judge {j}"]["rationale"] == r[f"judge_{j}_reasoning"]
                assert sec[f"Judge {j}"]["verdict"] == ("PASS" if r[f"judge_{j}"] == 1 else "FAIL")
        page.close()


def test_a_win_rate_decision_opens_into_both_answers_and_the_rationale(site):
    (doc,) = [d for d in site.pages if d.startswith("win_rate/")]
    results = pd.read_csv(site.run_dir / Path(doc).parent / "results.csv")
    r = results[results["method"] != "identical"].iloc[0]
    page, sec = _open_unit(site, doc, f"{r['comparison']}/{r['qid']}/{r['order']}/{r['judge']}")
    assert sec["Question"] == r["question"]
    assert sec[f"Answer of {r['model_a']} (model_a)"] == r["answer_a"]
    assert sec[f"Answer of {r['model_b']} (model_b)"] == r["answer_b"]
    assert sec[f"Judge {r['judge']}"]["rationale"] == r["rationale"]
    assert sec[f"Judge {r['judge']}"]["winner"] == r["winner"]
    page.close()


def test_a_ranking_battle_opens_into_both_answers_and_the_rationale(site, batch_run):
    battles = pd.read_csv(site.run_dir / "ranking" / "open_ended" / "battles.csv")
    r = battles[battles["method"] != "identical"].iloc[0]
    page, sec = _open_unit(site, "ranking/open_ended/report.html",
                           f"{r['question_id']}/{r['order']}/{r['model_a']}/{r['model_b']}/{r['judge']}")
    assert sec["Question"] == r["question"]
    assert sec[f"Judge {r['judge']}"]["rationale"] == r["rationale"]
    assert sec[f"Judge {r['judge']}"]["winner"] == r["winner"]
    import yaml

    files = {m["name"]: m["file"] for m in yaml.safe_load((batch_run.root / "params" / "ranking.yaml").read_text())["models"]}
    for side, model in (("A (shown first)", r["model_a"]), ("B (shown second)", r["model_b"])):
        answers = set(pd.read_csv(files[model])["filtered_resps"])
        assert sec[f"Answer {side}: {model}"] in answers
    page.close()


def test_a_validated_answer_opens_into_the_label_and_each_judges_reasoning(site):
    verdicts = pd.read_csv(site.run_dir / "judge_validation" / "fact_check" / "verdicts.csv")
    r = verdicts.iloc[0]
    page, sec = _open_unit(site, "judge_validation/fact_check/report.html", str(r["row"]))
    assert sec["Question"] == r["question"]
    assert sec["Answer judged"] == r["answer"]
    assert sec["Expert label and the panel"]["label"] == str(r["label"])
    assert sec["Judge j1"]["rationale"] == r["judge_j1_reasoning"]
    page.close()


def _task_counts(s: pd.DataFrame, headline: str) -> dict[str, int]:
    """Outcomes counted from samples.csv's own columns (not through evekit.explorer)."""
    failed, unparsed = s["failed"].astype(bool), s["unparsed"].astype(bool)
    score = s[headline]
    return {"failed": int(failed.sum()), "unparsed": int(unparsed.sum()),
            "correct": int((~failed & ~unparsed & (score == 1)).sum()),
            "wrong": int((~failed & (unparsed | (score == 0))).sum())}


@pytest.mark.parametrize("task, headline", [("open_ended", "judge_voting"), ("mcqa_single_answer", "acc")])
def test_an_outcome_filter_shows_as_many_items_as_samples_csv_counts(site, task, headline):
    for doc in _task_docs(site, task):
        s = pd.read_csv(site.run_dir / Path(doc).parent / "samples.csv")
        expect = _task_counts(s, headline)
        page = _open_explorers(site, doc)
        ex = page.locator("div.evekit-explorer#explorer")
        offered = [o.get_attribute("value") for o in ex.locator("select.ee-outcome option").all()]
        for outcome, n in expect.items():
            if n == 0:
                assert outcome not in offered  # only outcomes that occur are offered
                continue
            ex.locator("select.ee-outcome").select_option(outcome)
            assert ex.get_attribute("data-shown") == str(n), (doc, outcome)
            assert ex.locator("tr.ee-row").count() == n
            assert ex.locator(".ee-count").inner_text().startswith(f"{n} of {len(s)} ")
        if task == "open_ended":
            assert expect["failed"] == 1 and expect["correct"] + expect["wrong"] == len(s) - 1
        page.close()


def _row_ids(ex) -> list[str]:
    return [r.get_attribute("data-id") for r in ex.locator("tr.ee-row").all()]


def _sorted_ids(s: pd.DataFrame, column: str, *, desc: bool) -> list[str]:
    """The explorer's documented order, computed from samples.csv: by the value, a missing one last
    in either direction, ties in the file's order (a stable sort)."""
    values = pd.to_numeric(s[column], errors="coerce")
    order = sorted(range(len(s)), key=lambda i: (pd.isna(values[i]), 0.0 if pd.isna(values[i])
                                                 else (-values[i] if desc else values[i]), i))
    return [str(s["doc_id"][i]) for i in order]


def test_a_numeric_column_heading_sorts_the_rows_both_ways(site):
    """Clicking the score's heading sorts the rows by it (ascending, then descending on the second
    click), the same for doc_id; the order expected is computed from samples.csv. open_ended's runs
    have both verdicts and a failed item (no score: last either way); mcqa's items all score 0."""
    task, headline, distinct = "open_ended", "judge_voting", 0
    for doc in _task_docs(site, task):
        s = pd.read_csv(site.run_dir / Path(doc).parent / "samples.csv", dtype={"doc_id": str})
        assert len(s) <= 25  # one page: the whole order is on screen
        page = _open_explorers(site, doc)
        ex = page.locator("div.evekit-explorer#explorer")
        assert _row_ids(ex) == list(s["doc_id"])  # unsorted: the file's order
        score = ex.locator("th[data-col='score']")
        assert score.inner_text() == headline
        distinct = max(distinct, pd.to_numeric(s[headline], errors="coerce").nunique())
        for desc, state in ((False, "ascending"), (True, "descending")):
            score.click()
            assert score.get_attribute("aria-sort") == state
            assert _row_ids(ex) == _sorted_ids(s, headline, desc=desc), (doc, state)
        ids = ex.locator("th[data-col='doc_id']")
        ids.click()
        ids.click()  # descending: the file's doc_ids (0..n-1) reversed
        assert ids.get_attribute("aria-sort") == "descending" and score.get_attribute("aria-sort") == "none"
        assert _row_ids(ex) == sorted(s["doc_id"], key=int, reverse=True)
        page.close()
    assert distinct >= 2, f"every {task} item has the same {headline}: the sort proves little"
    assert not site.console


def test_the_group_filter_shows_as_many_items_as_samples_csv_has_in_the_group(site):
    """mcqa_single_answer runs with group_by (tests/browser_batch.py): the explorer offers each group
    of samples.csv's `group` column and shows that group's rows, from its control and its address."""
    (doc,) = _task_docs(site, "mcqa_single_answer")
    s = pd.read_csv(site.run_dir / Path(doc).parent / "samples.csv", dtype={"doc_id": str})
    counts = s["group"].value_counts()
    assert len(counts) >= 2 and counts.min() < len(s)  # a filter that can hide rows
    page = _open_explorers(site, doc)
    ex = page.locator("div.evekit-explorer#explorer")
    offered = [o.get_attribute("value") for o in ex.locator("select.ee-group option").all()]
    assert offered == ["", *sorted(counts.index)]
    for group, n in counts.items():
        ex.locator("select.ee-group").select_option(group)
        assert ex.get_attribute("data-shown") == str(n), group
        assert _row_ids(ex) == list(s.loc[s["group"] == group, "doc_id"])
        assert ex.locator(".ee-count").inner_text().startswith(f"{n} of {len(s)} ")
        assert _shown_at(site, doc, "#explorer?group=" + urllib.parse.quote(group)) == n
    page.close()
    assert not site.console


def test_no_payload_ran_and_each_is_shown_as_text(site):
    assert not site.dialogs, site.dialogs
    assert not site.pwned, site.pwned
    assert not site.js_links, site.js_links
    shown = "\n".join(site.texts.values())
    for name, p in PAYLOADS.items():
        assert p in shown, f"payload {name!r} is not shown as text on any page"
    # Markdown in a rationale or a question is not formatted: its asterisks are on the page.
    assert "**bold rationale**" in shown and "**bold question**" in shown


def test_no_payload_is_markup_in_any_file_and_where_each_ended(site, batch_run):
    """Raw payloads (with their `<`) are in no HTML file; the table of where each one ended up,
    escaped, goes to the artefacts (payloads.md)."""
    files = sorted(batch_run.run_dir.resolve().rglob("*.html"))
    rows = ["| payload | where it was put | files holding it escaped (how) |", "|---|---|---|"]
    for name, p in PAYLOADS.items():
        forms = {"HTML-escaped text": {html.escape(p, quote=False), html.escape(p)},
                 "explorer data (JSON, \\u003c escapes)": {
                     json.dumps(p, ensure_ascii=False)[1:-1].replace("<", "\\u003c").replace(">", "\\u003e")
                     .replace("&", "\\u0026")}}
        found: dict[str, list[str]] = {}
        for f in files:
            text = f.read_text(encoding="utf-8")
            rel = f.relative_to(batch_run.run_dir.resolve()).as_posix()
            if "<" in p:
                assert p not in text, f"{name} is markup in {rel}"
            for md in ("<strong>bold</strong>", "<strong>bold question</strong>", "<strong>bold rationale</strong>"):
                assert md not in text, f"{md} in {rel}"  # Markdown in a name, a question or a rationale, rendered
            assert not re.search(r"<(a|iframe|area|form)\s[^>]*(href|src|action)\s*=\s*[\"']?\s*javascript:", text, re.I), rel
            for how, variants in forms.items():
                if any(v in text for v in variants):
                    found.setdefault(rel, []).append(how)
        assert found, f"{name} is in no page"
        where = "; ".join(f"`{rel}` ({', '.join(h)})" for rel, h in found.items())
        rows.append(f"| `{p.replace('|', '&#124;')}` | {name} | {where} |")
    (ARTIFACTS / "payloads.md").write_text("\n".join(rows) + "\n", encoding="utf-8")


def _shown_at(site: Site, doc_rel: str, view: str) -> int:
    page = _open_explorers(site, doc_rel, view)
    shown = int(page.get_attribute("div.evekit-explorer#explorer", "data-shown"))
    assert page.locator("div.evekit-explorer#explorer tr.ee-row").count() == shown
    page.close()
    return shown


def test_an_address_opens_the_battles_decisions_and_answers_filtered_as_their_files_count(site):
    """`#explorer?outcome=..&group=..` in each kind's report shows as many rows as its file counts."""
    battles = pd.read_csv(site.run_dir / "ranking" / "open_ended" / "battles.csv")
    (doc,) = [d for d in site.pages if d.startswith("win_rate/")]
    results = pd.read_csv(site.run_dir / Path(doc).parent / "results.csv")
    verdicts = pd.read_csv(site.run_dir / "judge_validation" / "fact_check" / "verdicts.csv")
    cases = [
        ("ranking/open_ended/report.html", "outcome=tie", battles["winner"] == "tie"),
        ("ranking/open_ended/report.html", "outcome=" + urllib.parse.quote("B wins (shown second)"),
         battles["winner"] == battles["model_b"]),
        (doc, "outcome=tie&group=j2", (results["winner"] == "tie") & (results["judge"] == "j2")),
        (doc, "outcome=" + urllib.parse.quote(f"{results['model_b'][0]} wins"),
         results["winner_model"] == "model_b"),
        ("judge_validation/fact_check/report.html", "outcome=correct",
         verdicts["judge_voting"].notna() & (verdicts["judge_voting"] == verdicts["label"])),
    ]
    for doc_rel, view, expected in cases:
        assert int(expected.sum()) > 0, (doc_rel, view)  # the batch has such units (a count of 0 proves little)
        assert _shown_at(site, doc_rel, "#explorer?" + view) == int(expected.sum()), (doc_rel, view)
    assert not site.console and not site.dialogs


def test_the_summary_and_the_index_find_the_run_under_its_unsafe_name(site):
    """The run is named `r<script>…` and lives in a folder of its safe name: the summary still finds
    its three task results and its ranking, and the index is titled with the run's own name."""
    summary = site.texts["summary/report.html"]
    assert "3 results from runs" in summary and "No ranking in these runs" not in summary
    for model in (PAYLOADS["model_name"], PAYLOADS["model_name (second model)"]):
        assert model in summary
    assert site.pages["index.html"]["title"] == f"evekit run {PAYLOADS['run_name']}"
    assert site.pages["summary/report.html"]["title"].startswith(PAYLOADS["run_name"])


def test_a_compressed_explorer_opens_from_disk_with_the_same_rows(browser, tmp_path, monkeypatch):
    """Above INLINE_LIMIT the data is gzip+base64 (DecompressionStream in the browser): the page
    opened from disk shows every row, the texts intact, paging and search working."""
    from evekit import explorer as E

    n = 60
    samples = pd.DataFrame({"doc_id": range(n), "doc.Question": [f"Q{i} {PAYLOADS['question <script>']}" for i in range(n)],
                            "target": "786 km", "filtered_resps": [f"answer {i}" for i in range(n)],
                            "response": [f"answer {i} {PAYLOADS['gold </textarea>']}" for i in range(n)],
                            "unparsed": False, "failed": [i % 10 == 0 for i in range(n)],
                            "acc": [float(i % 3 == 0) for i in range(n)]})
    monkeypatch.setattr(E, "INLINE_LIMIT", 1000)
    ex = E.task_explorer(samples, headline="acc", metrics={"acc": {"value": 0.3}})
    assert ex.payload()[0] == "gzip+base64"
    page_file = ex.save(tmp_path / "explorer.html", title=PAYLOADS["run_name"])
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (errors.append(d.message), d.dismiss()))
    page.goto(page_file.as_uri())
    page.wait_for_selector("div.evekit-explorer[data-ready]")
    node = page.locator("div.evekit-explorer")
    assert node.get_attribute("data-total") == str(n) and node.locator("tr.ee-row").count() == 25  # one page
    node.locator("button.ee-next").click()
    node.locator("button.ee-next").click()
    assert node.get_attribute("data-page") == "3" and node.locator("tr.ee-row").count() == n - 50
    node.locator("input.ee-search").fill("q17 ")
    assert node.get_attribute("data-shown") == "1"
    node.locator("tr.ee-row").click()
    assert page.locator("[data-section='Raw reply'] pre").text_content() == samples.loc[17, "response"]
    assert page.title() == PAYLOADS["run_name"] and not errors
    assert page.evaluate("typeof window.__pwned") == "undefined"
    page.close()
