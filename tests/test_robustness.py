"""Multiple-choice robustness (evekit.robustness): shuffled options with the gold letters moved with
them, robust accuracy, consistency, the letter-position table and the choices-only baseline."""
from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from evekit import robustness as rb
from evekit import tasks
from evekit.data import Item
from evekit.errors import ParameterError

SINGLE = {"labels": ["A", "B", "C", "D"], "choices": ["red", "green", "blue", "cyan"], "gold": ["C"]}
MULTIPLE = {"labels": ["A", "B", "C", "D", "E"], "choices": ["v", "w", "x", "y", "z"], "gold": ["A", "D"]}


@pytest.mark.parametrize("m, k", [(2, 2), (4, 2), (4, 3), (4, 4), (5, 5), (7, 3), (10, 10)])
def test_orders_differ_at_every_position(m, k):
    orders = np.array(rb.option_orders(m, k, seed=[3, m, k]))
    assert orders.shape == (k, m)
    assert all(sorted(o) == list(range(m)) for o in orders)
    assert orders[0].tolist() == list(range(m))  # the original order first
    for a, b in itertools.combinations(range(k), 2):
        assert (orders[a] != orders[b]).all()  # no option twice at one position


def test_orders_are_seeded_and_per_item():
    assert rb.option_orders(5, 4, seed=[0, 17]) == rb.option_orders(5, 4, seed=[0, 17])
    assert rb.option_orders(5, 4, seed=[0, 17]) != rb.option_orders(5, 4, seed=[0, 18])
    free = rb.option_orders(5, 3, seed=1, include_original=False)
    assert len({tuple(o) for o in free}) == 3
    more = rb.option_orders(2, 5, seed=2)  # more orders than options: the first two still differ
    assert len(more) == 5 and more[0] != more[1]
    assert rb.option_orders(1, 3) == [[0], [0], [0]]
    with pytest.raises(ParameterError):
        rb.option_orders(4, 0)


@pytest.mark.parametrize("fields", [SINGLE, MULTIPLE])
def test_gold_letters_move_with_their_texts(fields):
    gold_texts = {fields["choices"][fields["labels"].index(g)] for g in fields["gold"]}
    for item in rb.permuted_items(fields, 4, seed=9):
        new = item["fields"]
        assert new["labels"] == fields["labels"]
        assert sorted(new["choices"]) == sorted(fields["choices"])
        assert {new["choices"][new["labels"].index(g)] for g in new["gold"]} == gold_texts
        assert new["gold"] == [lab for lab in new["labels"] if lab in new["gold"]]  # in label order
        assert item["target"] == ", ".join(new["gold"])
        assert [new["choices"][p] for p in range(len(new["order"]))] == [fields["choices"][i] for i in new["order"]]


def test_permuted_item_keeps_other_fields_and_checks_the_order():
    out = rb.permuted_item({**SINGLE, "docs": ["d1"]}, [3, 2, 1, 0], permutation=2)
    assert out["fields"]["docs"] == ["d1"] and out["fields"]["permutation"] == 2
    assert out["target"] == "B" and out["fields"]["choices"] == ["cyan", "blue", "green", "red"]
    with pytest.raises(ParameterError, match="not a permutation"):
        rb.permuted_item(SINGLE, [0, 0, 1, 2])
    with pytest.raises(ParameterError, match="not among the options"):
        rb.permuted_item({**SINGLE, "gold": ["F"]}, [0, 1, 2, 3])


def _rows(fields, k, answer, seed=0, item=0):
    """Rows of a model whose answer under each shown order is `answer(shown fields)` (letters)."""
    rows = []
    for perm in rb.permuted_items(fields, k, seed=[seed, item]):
        shown = perm["fields"]
        letters = answer(shown)
        rows.append({"item": item, "permutation": shown["permutation"],
                     "correct": float(letters is not None and sorted(letters) == sorted(shown["gold"])),
                     "chosen": rb.chosen_options(letters, shown["labels"], shown["order"]),
                     "labels": shown["labels"], "answer": letters, "gold": shown["gold"]})
    return rows


def _always_a(shown):
    return ["A"]


def _perfect(shown):
    return list(shown["gold"])


@pytest.mark.parametrize("fields", [SINGLE, MULTIPLE])
@pytest.mark.parametrize("k", [2, 3, 4])
def test_always_a_scores_zero_and_a_perfect_model_one(fields, k):
    rows = [r for i in range(20) for r in _rows(fields, k, _always_a, item=i)]
    m = rb.robustness_metrics(rows, permutations=k)
    assert m["robust_acc"]["value"] == 0.0 and m["consistency"]["value"] == 0.0 and m["robust_acc"]["n"] == 20
    rows = [r for i in range(20) for r in _rows(fields, k, _perfect, item=i)]
    m = rb.robustness_metrics(rows, permutations=k)
    assert m["robust_acc"]["value"] == 1.0 and m["consistency"]["value"] == 1.0
    assert all(m[f"acc_permutation_{j}"]["value"] == 1.0 for j in range(k))
    assert m["robust_acc"]["method"] == "wilson"


def test_consistency_is_about_content_not_letters():
    # always the text "red" (wrong; gold is "blue"): consistent, never right
    rows = _rows(SINGLE, 4, lambda shown: [shown["labels"][shown["choices"].index("red")]])
    (item,) = rb.item_robustness(rows)
    assert item["consistency"] == 1.0 and item["robust_acc"] == 0.0
    # right under the original order only: per-permutation accuracy shows it
    rows = _rows(SINGLE, 3, lambda shown: ["C"])
    m = rb.robustness_metrics(rows)
    assert m["acc_permutation_0"]["value"] == 1.0 and m["acc_permutation_1"]["value"] == 0.0


def test_unparsed_breaks_consistency_and_failures_are_excluded():
    rows = _rows(SINGLE, 3, _perfect)
    rows[1] = {**rows[1], "chosen": None, "correct": 0.0, "answer": None}
    (item,) = rb.item_robustness(rows)
    assert item["consistency"] == 0.0 and item["robust_acc"] == 0.0
    failed = _rows(SINGLE, 3, _perfect, item=1)
    failed[2] = {**failed[2], "failed": True}
    m = rb.robustness_metrics(rows + failed, permutations=3)
    assert m["robust_acc"]["n"] == 1 and m["robust_acc"]["n_excluded"] == 1
    short = rb.item_robustness(_rows(SINGLE, 2, _perfect), permutations=3)
    assert short[0]["robust_acc"] is None


def test_chosen_options_reads_letters_as_shown():
    assert rb.chosen_options("B, D", ["A", "B", "C", "D"], [2, 0, 3, 1]) == (0, 1)
    assert rb.chosen_options(["c"], ["A", "B", "C", "D"], [2, 0, 3, 1]) == (3,)
    assert rb.chosen_options(None, ["A", "B"], [0, 1]) is None
    assert rb.chosen_options("F", ["A", "B"], [0, 1]) is None


def test_position_preference_shows_a_letter_bias():
    rows = [r for i in range(30) for r in _rows(SINGLE, 4, _always_a, item=i)]
    rows.append({**rows[0], "answer": None})
    pref = rb.position_preference(rows)
    table = {row["label"]: row for row in pref["table"]}
    assert table["A"]["answer_share"] == 1.0 and table["B"]["answers"] == 0
    assert pref["n_answers"] == 120 and pref["n_unparsed"] == 1
    # the gold moves over all four positions: each holds it in a quarter of the orders
    assert [table[lab]["golds"] for lab in "ABCD"] == [30, 30, 31, 30]  # + the unparsed row's gold, C
    assert sum(row["gold_share"] for row in pref["table"]) == pytest.approx(1.0)


def test_choices_only_withholds_the_question():
    out = rb.choices_only(SINGLE)
    assert out["question"] == rb.CHOICES_ONLY_QUESTION
    assert out["fields"]["choices"] == SINGLE["choices"] and out["fields"]["choices_only"] is True
    with pytest.raises(ParameterError, match="multiple-choice"):
        rb.choices_only({"reference": "x"})


@pytest.mark.parametrize("task_name, fields, target", [("mcqa_single_answer", SINGLE, "C"),
                                                        ("mcqa_multiple_answer", MULTIPLE, "A, D")])
def test_the_tasks_score_a_permuted_item_by_its_moved_gold(task_name, fields, target):
    """A permuted item through the task's own render, parse and score: answering the letter where
    the gold text now stands is right, the original gold letter (now another text) is not."""
    task = tasks.get_task(task_name)
    item = Item(doc_id=0, question="Which colour?", target=target, fields=dict(fields))
    for perm in rb.permuted_items(fields, 3, seed=4)[1:]:
        shown = dataclasses.replace(item, **perm)
        rendered = task.render(shown)
        for lab, text in zip(shown.fields["labels"], shown.fields["choices"]):
            assert f"{lab}. {text}" in rendered
        right = task.score(task.parse(", ".join(shown.fields["gold"]), shown), shown)
        wrong = task.score(task.parse(target, shown), shown)
        assert right["acc"] == 1.0
        assert wrong["acc"] == float(shown.fields["gold"] == fields["gold"])  # two texts may swap into place
    blind = dataclasses.replace(item, **rb.choices_only(item.fields))
    assert "Which colour?" not in task.render(blind) and rb.CHOICES_ONLY_QUESTION in task.render(blind)
