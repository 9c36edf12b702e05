"""Trust flags read off the pages a user reads: the index (mark and tooltip), the leaderboard CSV
(`trust` column) and the summary's wide table, for each flag (judges below the kappa bar,
unvalidated judges, position bias); and the verdict cards that open each report."""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from evekit.batch.index import write_index
from evekit.runs.records import read_run_record, write_run_record
from evekit.runs.registry import KINDS
from evekit.runs.summary import board as lb


def _task_result(run_dir: Path, model: str, trust: dict | None) -> Path:
    d = run_dir / model / "open_ended"
    d.mkdir(parents=True)
    res = {"task": "open_ended", "model": model, "n": 14, "n_failed": 0, "n_unparsed": 0,
           "judges": ["strict", "sampled"], "params": {"num_fewshot": 0},
           "metrics": {"judge_voting": {"value": 1.0, "ci_low": 0.76, "ci_high": 1.0, "n": 12}}}
    if trust is not None:
        res["judge_trust"] = trust
    (d / "results.json").write_text(json.dumps(res))
    pd.DataFrame({"doc_id": range(12), "judge_voting": [1] * 12}).to_csv(d / "samples.csv", index=False)
    write_run_record(d, kind=KINDS["task"], notebook="open_ended", run_name=run_dir.name,
                     files=["results.json", "samples.csv"], model=model, task="open_ended")
    return d


FAILED = {"validation": "v.json", "majority_label_share": 0.55,
          "judges": [{"judge": "strict", "validated_kappa": -0.12, "validated_accuracy": 0.45},
                     {"judge": "sampled", "validated_kappa": 0.1, "validated_accuracy": 0.5}]}
GOOD = {"validation": "v.json", "majority_label_share": 0.55,
        "judges": [{"judge": "strict", "validated_kappa": 0.8, "validated_accuracy": 0.9},
                   {"judge": "sampled", "validated_kappa": 0.7, "validated_accuracy": 0.88}]}


class _Cells(HTMLParser):
    """Each <td>'s text and attributes, and the title of any flag mark inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[dict] = []
        self._in = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "td":
            self.cells.append({"attrs": a, "text": "", "title": None})
            self._in = True
        elif tag == "span" and self._in and a.get("class") == "flag":
            self.cells[-1]["title"] = a.get("title")

    def handle_endtag(self, tag):
        if tag == "td":
            self._in = False

    def handle_data(self, data):
        if self._in:
            self.cells[-1]["text"] += data


def _flagged_cells(page: str) -> list[dict]:
    p = _Cells()
    p.feed(page)
    return [c for c in p.cells if c["attrs"].get("class") == "flagged"]


@pytest.mark.parametrize("trust, kind", [(FAILED, "failed_validation"), (None, "unvalidated")])
def test_a_flagged_judge_score_is_marked_on_the_index_the_leaderboard_csv_and_the_summary(tmp_path, trust, kind):
    run = tmp_path / "demo"
    _task_result(run, "flagged-model", trust)
    _task_result(run, "trusted-model", GOOD)

    cells = _flagged_cells(write_index(run).read_text())
    assert len(cells) == 1 and kind in cells[0]["attrs"]["data-flags"].split()
    assert cells[0]["text"].startswith("1.000 [0.76, 1.00]")
    assert "validat" in cells[0]["title"]

    entries = lb.collect(tmp_path, ["demo"])
    board = lb.leaderboard(entries)
    lb.save_summary(run / "summary", board, lb.paired_tests(entries), lb.usage_totals(entries), None)
    csv = pd.read_csv(run / "summary" / "leaderboard.csv", keep_default_na=False).set_index("model")
    assert kind in csv.loc["flagged-model · demo", "trust"].split(", ")
    assert csv.loc["trusted-model · demo", "trust"] == ""
    wide = lb.leaderboard_wide(board)
    assert "\u26a0" in wide.loc["flagged-model · demo", "open_ended"]
    assert "\u26a0" not in wide.loc["trusted-model · demo", "open_ended"]
    # the summary's verdict card (first on its report and in the index) counts the flagged scores
    card = KINDS["summary"].card(read_run_record(run / "summary" / "run.json"))
    assert "cannot be told apart on any of 1 task(s)" in card
    assert "1 of 2 headline scores carry a trust flag (" in card and kind in card
    assert "1 of 2 headline scores carry a trust flag" in write_index(run).read_text()


def test_a_score_corrected_by_expert_labels_carries_no_validation_flag(tmp_path):
    # The labels measure and remove the judges' error on this task: an unvalidated panel no longer
    # decides whether the corrected headline holds, while the same run's raw score stays flagged.
    run = tmp_path / "demo"
    d = _task_result(run, "labelled-model", None)
    res = json.loads((d / "results.json").read_text())
    res["metrics"]["judge_voting_ppi"] = {"value": 0.0, "ci_low": 0.0, "ci_high": 0.32, "n": 12, "n_labels": 8,
                                          "raw": "judge_voting"}
    (d / "results.json").write_text(json.dumps(res))
    _task_result(run, "unlabelled-model", None)
    cells = _flagged_cells(write_index(run).read_text())
    assert [c["text"][:5] for c in cells] == ["1.000"]          # only the unlabelled model's raw score
    csv_dir = run / "summary"
    entries = lb.collect(tmp_path, ["demo"])
    board = lb.leaderboard(entries)
    lb.save_summary(csv_dir, board, lb.paired_tests(entries), lb.usage_totals(entries), None)
    csv = pd.read_csv(csv_dir / "leaderboard.csv", keep_default_na=False).set_index("model")
    assert csv.loc["labelled-model · demo", "metric"] == "judge_voting_ppi"
    assert csv.loc["labelled-model · demo", "trust"] == ""
    assert csv.loc["unlabelled-model · demo", "trust"] == "unvalidated"
    from evekit.cards import judge_flags, score_flags

    assert score_flags(res, "judge_voting_ppi") == [] and score_flags(res, "judge_voting") == judge_flags(res)


def test_the_index_says_each_run_in_words_and_links_the_metric_to_the_glossary(tmp_path):
    run = tmp_path / "demo"
    _task_result(run, "flagged-model", FAILED)
    page = write_index(run).read_text()
    assert "In words" in page and "judge_voting 1.00 [0.76, 1.00], n = 12 of 14 (higher is better)" in page
    assert "Judges failed validation: kappa against expert labels strict -0.12, sampled 0.10" in page
    assert 'href="#g-judge_voting"' in page and 'id="g-judge_voting"' in page


def _win_rate_folder(tmp_path: Path, bias: float, lo: float, hi: float) -> Path:
    d = tmp_path / "demo" / "win_rate" / "a_vs_b"
    d.mkdir(parents=True)
    pd.DataFrame([{"judge": "majority", "kind": "majority", "model_a": "a", "model_b": "b", "n": 20, "wins_a": 9,
                   "wins_b": 8, "ties": 3, "sign_test_p": 1.0, "position_bias": bias, "position_bias_ci_low": lo,
                   "position_bias_ci_high": hi, "position_votes": 34}]).to_csv(d / "summary.csv", index=False)
    write_run_record(d, kind=KINDS["win_rate"], notebook="win_rate", run_name="demo", files=["summary.csv"],
                     model_a="a", model_b="b")
    return d


def test_a_win_rate_with_position_bias_beyond_chance_is_warned_in_its_card(tmp_path):
    d = _win_rate_folder(tmp_path, 0.91, 0.80, 0.97)
    card = KINDS["win_rate"].card(read_run_record(d / "run.json"))
    assert card.startswith("a and b cannot be told apart: a wins 9, b wins 8, 3 ties of 20 questions")
    assert "prefer the answer shown first: 91% [80%, 97%]" in card
    page = write_index(tmp_path / "demo").read_text()
    assert "prefer the answer shown first" in page


def test_no_position_warning_when_the_interval_holds_one_half(tmp_path):
    d = _win_rate_folder(tmp_path, 0.55, 0.40, 0.70)
    assert "prefer" not in KINDS["win_rate"].card(read_run_record(d / "run.json"))


def test_a_ranking_card_prints_ties_as_ties_and_marks_a_degenerate_judge(tmp_path):
    d = tmp_path / "demo" / "ranking" / "open_ended"
    d.mkdir(parents=True)
    rows = [("pooled", "m1", 1, 1040, 1010, 1070), ("pooled", "m2", 1, 1000, 970, 1030),
            ("pooled", "m3", 3, 960, 940, 980), ("j1", "m1", 1, 1000, 1000, 1000), ("j1", "m2", 1, 1000, 1000, 1000),
            ("j1", "m3", 1, 1000, 1000, 1000)]
    pd.DataFrame(rows, columns=["judge", "model", "rank", "rating", "ci_low", "ci_high"]).to_csv(d / "ratings.csv",
                                                                                               index=False)
    write_run_record(d, kind=KINDS["ranking"], notebook="ranking", run_name="demo", files=["ratings.csv"])
    card = KINDS["ranking"].card(read_run_record(d / "run.json"))
    assert "1= m1, m2; 3. m3" in card
    assert "Judge j1 rates every model 1000" in card
    assert "prefer" not in card  # no battles.csv: no position check


@pytest.mark.parametrize("first_share, warned", [(0.9, True), (0.5, False)])
def test_a_ranking_whose_judges_prefer_the_first_answer_is_warned_in_its_card_and_the_index(tmp_path, first_share,
                                                                                             warned):
    d = tmp_path / "demo" / "ranking" / "open_ended"
    d.mkdir(parents=True)
    pd.DataFrame([("pooled", m, 1, 1000, 950, 1050) for m in ("m1", "m2")],
                 columns=["judge", "model", "rank", "rating", "ci_low", "ci_high"]).to_csv(d / "ratings.csv",
                                                                                          index=False)
    n_first = int(first_share * 40)
    battles = [{"question_id": f"q{i:02d}", "model_a": "m1" if i % 2 else "m2", "model_b": "m2" if i % 2 else "m1",
                "judge": "j1", "judge_said": "A" if i < n_first else "B", "method": "json_schema"} for i in range(40)]
    battles.append({**battles[0], "judge_said": "tie"})  # a tie is not decisive
    pd.DataFrame(battles).to_csv(d / "battles.csv", index=False)
    write_run_record(d, kind=KINDS["ranking"], notebook="ranking", run_name="demo",
                     files=["ratings.csv", "battles.csv"])
    card = KINDS["ranking"].card(read_run_record(d / "run.json"))
    assert ("The judges prefer the answer shown first: 90%" in card) is warned
    assert ("of 40 decisive verdicts" in card) is warned and ("the ratings carry that bias" in card) is warned
    assert ("prefer the answer shown first" in write_index(tmp_path / "demo").read_text()) is warned


def test_a_task_report_opens_with_its_verdict_card_and_flags(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    from evekit.batch import render_html

    d = _task_result(tmp_path / "demo", "flagged-model", FAILED)
    nb = new_notebook(cells=[new_markdown_cell("# open_ended\n\nThe settings come first in the notebook."),
                             new_code_cell("x = 1")])
    nbformat.write(nb, d / "executed.ipynb")
    render_html(d / "executed.ipynb", d / "report.html", record_dir=d)
    page = (d / "report.html").read_text()
    card = page.index('class="evekit-card"')
    assert card < page.index("The settings come first")
    # The card's text, its terms linked to the glossary (report.html's first use of each).
    said = re.sub(r"<[^>]+>", "", page[card:page.index("</p>", card)])
    assert "judge_voting 1.00 [0.76, 1.00], n = 12 of 14 (higher is better)" in said
    assert 'href="#g-judge_voting"' in page[card:page.index("</p>", card)]
    assert "Judges failed validation" in said
