"""Glossary links at a term's first use (`glossary.with_glossary`, applied to every report.html)."""
from __future__ import annotations

from bs4 import BeautifulSoup

from evekit.glossary import GLOSSARY_ID, with_glossary


def _soup(page: str) -> BeautifulSoup:
    return BeautifulSoup(page, "html.parser")


PAGE = """<!doctype html><html><head><title>acc report</title><style>.acc{color:red}</style></head>
<body><main><h1>run acc</h1>
<p class="acc" title="acc and IoU">The <code>acc</code> of this run, then acc again; &kappa; is no kappa.</p>
<script>var acc = 1; if (a < b) { judge_voting(); }</script>
<p><a href="#elsewhere">judge_voting</a> then judge_voting, llm_as_judge_smollm2-strict, doc.Question.</p>
<table><thead><tr><th>n</th><th>mcc</th></tr></thead><tbody><tr><td>f1</td><td>0.5</td></tr></tbody></table>
<pre>recall (printed output)</pre><p>recall</p>
</main></body></html>"""


def test_with_glossary_links_first_uses_and_appends_entries_with_their_ids():
    out = with_glossary(PAGE)
    soup = _soup(out)
    links = [(a.get_text(), a["href"]) for a in soup.select("a.glossary-term")]
    assert links == [("acc", "#g-acc"), ("kappa", "#g-kappa"), ("judge_voting", "#g-judge_voting"),
                     ("llm_as_judge_smollm2-strict", "#g-llm_as_judge"), ("doc.Question", "#g-doc.Question"),
                     ("n", "#g-n"), ("mcc", "#g-mcc"), ("recall", "#g-recall")]
    ids = {tag["id"] for tag in soup.select("[id]")}
    assert all(href[1:] in ids for _, href in links)  # every link lands on the page
    section = soup.select_one(f"#{GLOSSARY_ID}")
    assert section is not None and section.find_parent("main") is not None
    assert len(soup.select(f"#{GLOSSARY_ID} dt")) == len(links)


def test_with_glossary_leaves_scripts_styles_attributes_links_and_data_alone():
    out = with_glossary(PAGE)
    soup = _soup(out)
    assert soup.select_one("script").string == "var acc = 1; if (a < b) { judge_voting(); }"
    assert soup.select_one("style").string == ".acc{color:red}" and soup.title.string == "acc report"
    assert soup.select_one("p.acc")["title"] == "acc and IoU"
    assert soup.select_one('a[href="#elsewhere"]').get_text() == "judge_voting"  # not a link inside a link
    assert not soup.select("td a") and not soup.select("pre a") and not soup.select("h1 a")
    assert "&kappa; is no" in out  # an entity is not a word
    assert with_glossary(out) == out  # once only
    assert with_glossary("<p>nothing to define here</p>") == "<p>nothing to define here</p>"
