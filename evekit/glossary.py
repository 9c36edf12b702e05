"""The words a user meets on evekit's pages, each in one line: what it measures and which way is
better. The index carries the whole glossary; reports link a term's first use to it."""
from __future__ import annotations

import html
import re
from typing import Iterable

__all__ = ["entry", "GLOSSARY", "define", "glossary_html", "with_glossary", "GLOSSARY_ID"]

# term -> definition (a sentence; "higher is better" or "lower is better" where it applies)
GLOSSARY: dict[str, str] = {
    "acc": "accuracy: the share of items answered exactly right (0 to 1; higher is better).",
    "IoU": "for several correct letters: the overlap of the chosen and the correct set, |both| / |either| "
           "(0 to 1; higher is better; an unparsed answer scores 0).",
    "mcc": "Matthews correlation of answered and gold labels, -1 to 1: 0 is chance, 1 perfect (higher is better).",
    "macro_f1": "the mean over labels of each label's F1 (0 to 1; higher is better).",
    "precision": "of the items called hallucinated, the share that are (0 to 1; higher is better).",
    "recall": "of the hallucinated items, the share found (0 to 1; higher is better).",
    "f1": "the harmonic mean of precision and recall (0 to 1; higher is better).",
    "llm_as_judge": "the share of answers an LLM judge passed (0 to 1; higher is better; only as good as the judge).",
    "judge_voting": "the share of answers the judges' majority passed; a tie fails (0 to 1; higher is better).",
    "llm_as_judge_avg": "the judges' pass rates averaged (0 to 1; higher is better).",
    "judge_agreement": "the share of items on which every judge gave the same verdict (0 to 1).",
    "fleiss_kappa": "agreement between judges beyond chance, -1 to 1 (0: chance).",
    "kappa": "Cohen's kappa: agreement with the expert labels beyond chance, -1 to 1; below 0.4 a judge's "
             "scores are flagged.",
    "sensitivity": "of the answers experts passed, the share the judge passed.",
    "specificity": "of the answers experts failed, the share the judge failed.",
    "win_rate": "the share of decisions a model won outright (0 to 1; higher is better).",
    "alpaca_win_rate": "wins plus half the ties, over decisions (0 to 1; 0.5 is a draw).",
    "position_bias": "the share of decisive verdicts that went to the answer shown first (0.5: no bias).",
    "rating": "Bradley–Terry rating on the Elo scale: 400 points more is ten times the odds of winning.",
    "rank": "1 + the number of models whose interval lies entirely above; models that cannot be separated "
            "share a rank.",
    "bleu": "n-gram overlap with the reference (0 to 100; higher is better; for reference only).",
    "rougeL": "longest-common-subsequence overlap with the reference (0 to 1; higher is better; for reference only).",
    "cosine": "cosine similarity of the answer's and the reference's sentence embeddings (-1 to 1; higher is better).",
    "token_f1": "word overlap of answer and reference as F1 (extractive QA; 0 to 1; higher is better).",
    "exact_match": "the share of answers equal to the reference after normalisation (0 to 1; higher is better).",
    "micro_f1": "entity-level F1 over all tagged spans (0 to 1; higher is better).",
    "acc_logprobs": "accuracy of the most probable first answer token (0 to 1; higher is better).",
    "brier": "mean squared error of the first token's probabilities (0 to 2; lower is better).",
    "ece": "expected calibration error: how far stated confidence is from accuracy (0 to 1; lower is better).",
    "hard_iou": "character overlap of predicted and gold hallucinated spans per item, averaged "
                "(0 to 1; higher is better; 1 when both are empty).",
    "soft_spearman": "rank correlation of predicted and gold per-character hallucination probabilities, per item, "
                     "averaged (-1 to 1; higher is better). An item where a side is constant (no span marked, "
                     "or the whole answer marked alike) has no rank correlation and counts, as in Mu-SHROOM's "
                     "scorer, 1 when both sides are constant and 0 when only one is.",
    "span_precision": "of the characters marked hallucinated, the share that are (0 to 1; higher is better).",
    "span_recall": "of the hallucinated characters, the share marked (0 to 1; higher is better).",
    "span_f1": "harmonic mean of span precision and recall (0 to 1; higher is better).",
    "robust_acc": "the share of items answered right under every order of the options (0 to 1; higher is better).",
    "consistency": "the share of items where the same option was chosen under every order of the options.",
    "ppi": "judge-corrected (prediction-powered): the judged score corrected by expert labels of a random subset, "
           "with an interval that includes the judge's errors.",
    "n": "the items behind the number (failed items and abstentions left out).",
    "unparsed": "answers the model gave in an unusable form: scored wrong and counted.",
    "failed": "calls that failed after their retries (the infrastructure's fault): left out of the metric, counted.",
    "truncated": "answers cut off at max_tokens.",
    "abstained": "a judge gave no usable verdict on the item: left out of that judge's score, counted.",
    "baseline": "what a constant answer scores (always the most frequent gold answer), for comparison.",
    "mdd": "minimum detectable difference: the smallest difference a paired test of this n finds with 80% power.",
    "doc.Question": "the question as the dataset gives it (EVE's column name).",
    "filtered_resps": "the model's answer as scored (EVE's column name).",
    "CI": "95% confidence interval: the range of values the data are consistent with.",
}


def entry(term: str) -> str | None:
    """The glossary entry that defines `term`: itself, or its family's for a per-judge or corrected
    name (`llm_as_judge_<judge>`, `..._ppi`); None when the glossary does not define it."""
    if term in GLOSSARY:
        return term
    if term.endswith("_ppi"):
        return "ppi"
    if term.startswith("llm_as_judge_"):
        return "llm_as_judge"
    return None


def define(term: str) -> str | None:
    """The term's definition (its family's for a per-judge or corrected name)."""
    if term.startswith("acc_permutation_"):
        return "accuracy with the options in one fixed shuffled order (0 to 1; higher is better)."
    key = entry(term)
    return GLOSSARY[key] if key else None


def glossary_html(terms: Iterable[str] | None = None) -> str:
    """The glossary (or the terms given) as an HTML definition list, each term anchored `#g-<term>`."""
    chosen = list(GLOSSARY) if terms is None else [t for t in dict.fromkeys(terms) if define(t)]
    items = "".join(f'<dt id="g-{html.escape(t)}"><code>{html.escape(t)}</code></dt><dd>{html.escape(define(t) or "")}</dd>'
                    for t in chosen)
    return f'<dl class="glossary">{items}</dl>'


# -- a page's terms linked to their entries ---------------------------------------------------------
GLOSSARY_ID = "evekit-glossary"  # the section with_glossary appends (its presence: done already)
# Elements whose text is left alone: code and styles, existing links, the document's head and title
# (names a user chose), printed
# output (prompts and answers a model or dataset wrote), data cells, form fields and graphics.
_SKIP = {"script", "style", "a", "head", "title", "h1", "pre", "td", "textarea", "button", "select", "option",
         "svg", "math", "noscript", "template", "dl"}
_RAW = ("script", "style", "textarea", "title")
_ROW_TAGS = {"tr", "th", "thead", "tbody", "table"}  # their content is not HTML: skipped whole
_TOKENS = re.compile(r"<!--.*?-->|<!\[CDATA\[.*?\]\]>|" + "|".join(
    rf"<{t}\b(?:[^>\"']|\"[^\"]*\"|'[^']*')*>.*?</{t}\s*>" for t in _RAW)
    + r"|</?[A-Za-z][^>\"']*(?:(?:\"[^\"]*\"|'[^']*')[^>\"']*)*>|<!?[^>]*>", re.S | re.I)
_TAG = re.compile(r"<(/?)([A-Za-z][\w:-]*)")
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# A word as the glossary spells terms: letters, digits and underscores, joined by '.' or '-' inside
# ("doc.Question", "llm_as_judge_smollm2-strict"); not inside an entity (&kappa;) or a longer word.
_WORD = re.compile(r"(?<![\w&#.-])[A-Za-z][\w]*(?:[.-][A-Za-z0-9]\w*)*(?![\w])")


def _linked_text(text: str, seen: dict[str, None]) -> str:
    """`text` (HTML text, entities escaped) with the first use of each term not in `seen` linked."""
    def link(m: re.Match) -> str:
        term = entry(m.group(0))
        if term is None or term in seen:
            return m.group(0)
        seen[term] = None
        return (f'<a class="glossary-term" href="#g-{html.escape(term)}" title="{html.escape(define(term) or "")}">'
                f"{m.group(0)}</a>")
    return _WORD.sub(link, text)


def with_glossary(page: str) -> str:
    """`page` (a whole HTML document or a fragment) with the first use of each glossary term in its
    text and table headers linked to `#g-<term>`, and those terms' glossary appended at its foot
    (before `</body>`), each entry with its id. Text inside <script>, <style>, attributes, existing
    links, printed output (<pre>) and data cells (<td>) is left as it is. A page without a term is
    returned unchanged; a page already done (it has the section) too."""
    if f'id="{GLOSSARY_ID}"' in page:
        return page
    body = re.search(r"<body\b[^>]*>", page, re.I)
    start = body.end() if body else 0
    # The section goes last inside the page's <main> (nbconvert's lab template), else before </body>.
    ends = [m.start() for m in re.finditer(r"</main\s*>", page, re.I)] or \
        [m.start() for m in re.finditer(r"</body\s*>", page, re.I)]
    end = ends[-1] if ends and ends[-1] >= start else len(page)
    seen: dict[str, None] = {}
    out, pos, skipping = [page[:start]], start, 0
    open_skip: list[str] = []
    for m in _TOKENS.finditer(page, start, end):
        text = page[pos:m.start()]
        out.append(text if skipping else _linked_text(text, seen))
        token = m.group(0)
        out.append(token)
        pos = m.end()
        tag = _TAG.match(token)
        if not tag or token.startswith(("<!", "<?")):
            continue
        closing, name = tag.group(1) == "/", tag.group(2).lower()
        if name in _ROW_TAGS:  # a data cell ends with its row even when its </td> is left out
            open_skip = [t for t in open_skip if t != "td"]
        if name in _RAW or name not in _SKIP or name in _VOID or token.endswith("/>"):
            skipping = len(open_skip)
            continue
        if not closing:
            open_skip.append(name)
        elif name in open_skip:  # close it (and anything left open inside it)
            del open_skip[len(open_skip) - 1 - open_skip[::-1].index(name):]
        skipping = len(open_skip)
    tail = page[pos:end]
    out.append(tail if skipping else _linked_text(tail, seen))
    if not seen:
        return page
    terms = [t for t in GLOSSARY if t in seen]
    section = (f'<section id="{GLOSSARY_ID}" class="glossary jp-RenderedHTMLCommon"><h2>Glossary</h2>'
               f"<p>The terms this page uses, each linked from its first use.</p>{glossary_html(terms)}</section>")
    return "".join(out) + section + page[end:]
