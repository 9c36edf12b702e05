"""Verdict cards and trust flags (evekit.cards) and the glossary: sentences that never claim more
than the numbers, and flags on numbers that should not be read at face value."""
from __future__ import annotations

from evekit import cards
from evekit.glossary import GLOSSARY, define, glossary_html
from evekit.metrics import METRICS


def _results(trust=None, **kw):
    return {"task": "open_ended", "model": "m", "n": 56, "judges": ["a", "b"],
            **({"judge_trust": trust} if trust is not None else {}), **kw}


def test_judged_scores_without_validation_or_below_the_kappa_bar_are_flagged():
    assert [f.kind for f in cards.judge_flags(_results())] == ["unvalidated"]
    good = {"judges": [{"judge": "a", "validated_kappa": 0.7, "validated_accuracy": 0.9},
                       {"judge": "b", "validated_kappa": 0.5, "validated_accuracy": 0.8}], "majority_label_share": 0.6}
    assert cards.judge_flags(_results(good)) == []
    bad = {"judges": [{"judge": "a", "validated_kappa": -0.12, "validated_accuracy": 0.4},
                      {"judge": "b", "validated_kappa": 0.5, "validated_accuracy": 0.8}], "majority_label_share": 0.6}
    kinds = [f.kind for f in cards.judge_flags(_results(bad))]
    assert kinds == ["failed_validation", "below_majority"]
    assert "-0.12" in cards.judge_flags(_results(bad))[0].text
    assert cards.judge_flags(_results(bad), judge="b") == []           # b's own score is fine
    assert cards.judge_flags({"task": "mcqa_single_answer", "judges": []}) == []


def test_position_bias_is_flagged_only_when_its_interval_excludes_half():
    assert cards.position_bias_flag(0.55, 0.45, 0.65) is None
    flag = cards.position_bias_flag(0.95, 0.81, 0.99, n=40)
    assert flag.kind == "position_bias" and "shown first" in flag.text and "95%" in flag.text
    assert "second" in cards.position_bias_flag(0.1, 0.02, 0.3).text
    assert cards.degenerate_judge_flag("j", [1000, 1000, 1000]).kind == "degenerate_judge"
    assert cards.degenerate_judge_flag("j", [990, 1010]) is None


def test_a_comparison_card_claims_a_difference_only_below_alpha_after_holm():
    row = {"task": "open_ended", "metric": "judge_voting", "model_a": "5-shot", "model_b": "0-shot",
           "n_shared": 12, "difference": 0.04, "ci_low": -0.10, "ci_high": 0.18, "p_holm": 1.0}
    text = cards.comparison_card(row, mdd=0.31)
    assert text.startswith("On open_ended, 5-shot and 0-shot cannot be told apart")
    assert "the smallest difference this n can detect is 0.31" in text and "n = 12" in text
    strong = {**row, "difference": -0.3, "ci_low": -0.45, "ci_high": -0.15, "p_holm": 0.001}
    assert cards.comparison_card(strong).startswith("On open_ended, 0-shot is better than 5-shot")
    lines = cards.comparisons_card([strong, {**strong, "task": "refusal"}, {**row, "task": "x"}])
    assert lines == ["0-shot is better than 5-shot on 2 of 3 task(s) (Holm-adjusted); no difference shown on 1."]


def test_pairs_that_show_no_difference_read_as_one_sentence_not_one_each():
    row = {"task": "open_ended", "metric": "acc", "difference": 0.01, "p_holm": 0.9}
    tests = [{**row, "model_a": "base", "model_b": m} for m in ("x", "y", "z")] + [
        {**row, "task": "refusal", "model_a": "base", "model_b": "z"}]
    lines = cards.comparisons_card(tests)
    assert lines == ["3 pairs cannot be told apart on any task they share (Holm-adjusted, alpha 0.05): "
                     "base / x (1 task); base / y (1 task); base / z (2 tasks)."]
    strong = {**row, "model_a": "base", "model_b": "w", "difference": 0.3, "p_holm": 0.001}
    lines = cards.comparisons_card(tests + [strong])
    assert lines[0] == "base is better than w on 1 of 1 task(s) (Holm-adjusted); no difference shown on 0."
    assert lines[1].startswith("3 pairs cannot be told apart") and len(lines) == 2


def test_task_card_names_n_of_items_the_baseline_and_the_flags():
    m = {"value": 1.0, "ci_low": 0.76, "ci_high": 1.0, "n": 12}
    text = cards.task_card(_results(), "judge_voting", m)
    assert "judge_voting 1.00 [0.76, 1.00], n = 12 of 56" in text and "not validated" in text
    acc = {"value": 0.3, "ci_low": 0.2, "ci_high": 0.4, "n": 61}
    res = {"task": "mcqa_single_answer", "model": "m", "n": 61, "baselines": {"most_frequent": {"answer": "C", "value": 0.26}}}
    assert "does not beat it" in cards.task_card(res, "acc", acc)


def test_n_says_what_it_is_out_of_items_not_answers_and_the_set_limit_cut():
    res = {"task": "open_ended", "model": "m", "n": 12, "n_items": 12, "n_available": 56}
    assert cards.n_of(res, 12) == "12 of 56"
    assert cards.n_of(res, 10) == "10 of 12 (limit: 12 of 56)"
    # three repeats: 90 rows, 30 items; the metric's n is items
    assert cards.n_of({"n": 90, "n_items": 30}, 30) == "30"
    assert cards.n_of({"n": 12}, 12) == "12" and cards.n_of({"n": 12}, 11) == "11 of 12"
    m = {"value": 0.5, "ci_low": 0.2, "ci_high": 0.8, "n": 12}
    assert "n = 12 of 56 (higher is better)" in cards.task_card(res, "acc", m)


def test_ranks_print_ties_as_ties():
    rows = [{"model": "a", "rank": 1}, {"model": "b", "rank": 1}, {"model": "c", "rank": 3}]
    assert cards.ranks_text(rows) == "1= a, b; 3. c"


def test_the_glossary_defines_every_metric_evekit_reports():
    missing = [name for name in METRICS if define(name) is None]
    assert missing == []
    assert define("llm_as_judge_strict") == GLOSSARY["llm_as_judge"] and define("judge_voting_ppi") == GLOSSARY["ppi"]
    # soft_spearman's constant-side rule (Mu-SHROOM's scorer) is said where the metric is defined
    assert "1 when both sides are constant and 0 when only one is" in define("soft_spearman")
    page = glossary_html(["acc", "<script>"])
    assert 'id="g-acc"' in page and "<script>" not in page
