"""Multiple-choice robustness: the options shuffled, the gold letters moved with them, and what a
model's answers under the shuffles say (robust accuracy, consistency, letter-position preference);
and the choices-only baseline (the question withheld). Plain data in, plain data out.

Orders form a seeded Latin rectangle: with k <= (number of options) orders, the option shown at
each position differs between every two orders, and so does the position of every option. A model
that always answers "A" is therefore right under at most one order (robust accuracy 0 with k >= 2)
and picks a different option each time (consistency 0); a model that always picks the right option
scores 1 and 1. By default the first order is the original one, so permutation 0 is the run
without permutations, and every other order moves every option.

The item fields are the multiple-choice tasks' (`labels`, `choices`, `gold`, as `tasks` prepares
them): labels stay at their positions, the texts move. `permuted_item` and `choices_only` return the
changed fields of an item (`dataclasses.replace(item, **changes)`).
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from evekit import stats
from evekit.errors import ParameterError

__all__ = [
    "CHOICES_ONLY_QUESTION",
    "option_orders",
    "permuted_item",
    "permuted_items",
    "chosen_options",
    "item_robustness",
    "robustness_metrics",
    "position_preference",
    "choices_only",
]

CHOICES_ONLY_QUESTION = "(The question is withheld. Choose the option most likely to be the correct answer.)"


def option_orders(n_options: int, k: int, seed: int | Sequence[int] = 0, *,
                  include_original: bool = True) -> list[list[int]]:
    """k orders of `n_options` options; order[p] is the original index of the option shown at
    position p. Seeded (`seed` may be a sequence, e.g. [run seed, doc_id], for one draw per item).

    The first min(k, n_options) orders form a Latin rectangle: no option is shown at the same
    position in two of them. Each is a random assignment of options to positions that avoids every
    (position, option) pair used before (`scipy.optimize.linear_sum_assignment` on random costs;
    after r orders each position has n - r options left, each option n - r positions, so one always
    exists). With `include_original` the first order is the original one. Orders beyond n_options
    are further seeded shuffles (they may repeat an earlier order).
    """
    from scipy.optimize import linear_sum_assignment

    if k < 1:
        raise ParameterError(f"permutations must be >= 1, got {k}")
    if n_options < 1:
        raise ParameterError("an item needs at least one option to permute")
    m = n_options
    rng = np.random.default_rng(seed)
    used = np.zeros((m, m), dtype=bool)  # used[position, option]
    orders: list[list[int]] = []
    for j in range(min(k, m)):
        if j == 0 and include_original:
            order = np.arange(m)
        else:
            cost = rng.random((m, m)) + np.where(used, m + 1.0, 0.0)  # a used pair costs more than any assignment
            order = linear_sum_assignment(cost)[1]
        used[np.arange(m), order] = True
        orders.append([int(i) for i in order])
    orders += [[int(i) for i in rng.permutation(m)] for _ in range(k - len(orders))]
    return orders


def _gold_indices(labels: Sequence[str], gold: str | Sequence[str]) -> set[int]:
    wanted = [gold] if isinstance(gold, str) else list(gold)
    index = {str(lab).upper(): i for i, lab in enumerate(labels)}
    missing = [g for g in wanted if str(g).upper() not in index]
    if missing:
        raise ParameterError(f"gold label(s) {', '.join(map(repr, missing))} not among the options {list(labels)}")
    return {index[str(g).upper()] for g in wanted}


def permuted_item(fields: Mapping[str, Any], order: Sequence[int], permutation: int = 0) -> dict[str, Any]:
    """The changes that show an item's options in `order`: {"target", "fields"}; the fields keep
    every other key and gain `order` and `permutation`. Gold letters follow their texts (in the
    order of the labels, as the tasks write them); the target is them joined by ", "."""
    labels, choices = list(fields["labels"]), list(fields["choices"])
    if sorted(order) != list(range(len(choices))) or len(labels) != len(choices):
        raise ParameterError(f"order {list(order)} is not a permutation of the {len(choices)} options")
    gold_idx = _gold_indices(labels, fields["gold"])
    gold = [labels[p] for p, i in enumerate(order) if i in gold_idx]
    new = {**fields, "choices": [choices[i] for i in order], "gold": gold, "order": list(order),
           "permutation": permutation}
    return {"target": ", ".join(gold), "fields": new}


def permuted_items(fields: Mapping[str, Any], k: int, seed: int | Sequence[int] = 0, *,
                   include_original: bool = True) -> list[dict[str, Any]]:
    """`permuted_item` for each of `option_orders(len(choices), k, seed)`; permutation j = order j."""
    orders = option_orders(len(fields["choices"]), k, seed, include_original=include_original)
    return [permuted_item(fields, order, j) for j, order in enumerate(orders)]


def chosen_options(answer: str | Sequence[str] | None, labels: Sequence[str], order: Sequence[int]) -> tuple[int, ...] | None:
    """The original indices of the options an answer picked (letters as shown under `order`; a
    string may hold several, "A, C"); None for an unparsed answer (or a letter not shown)."""
    if answer is None:
        return None
    letters = [a.strip() for a in answer.split(",")] if isinstance(answer, str) else list(answer)
    position = {str(lab).upper(): p for p, lab in enumerate(labels)}
    try:
        return tuple(sorted(order[position[str(a).upper()]] for a in letters if str(a).strip()))
    except KeyError:
        return None


def _rows_by_item(rows: Iterable[Mapping[str, Any]]) -> dict[Any, list[Mapping[str, Any]]]:
    by_item: dict[Any, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_item.setdefault(row["item"], []).append(row)
    return by_item


def item_robustness(rows: Iterable[Mapping[str, Any]], permutations: int | None = None) -> list[dict[str, Any]]:
    """Per item, from rows {"item", "permutation", "correct" (0/1), "chosen" (`chosen_options`),
    optional "failed"}: `robust_acc` 1 when right under every permutation; `consistency` 1 when the
    same option(s), by content, were chosen under every permutation (an unparsed answer breaks it:
    the model's failure); `n_permutations`. An item with a failed call (the infrastructure's) under
    some permutation, or fewer than `permutations` rows, gets None for both (excluded, not 0)."""
    out = []
    for item, group in _rows_by_item(rows).items():
        usable = [r for r in group if not r.get("failed")]
        complete = len(usable) == len(group) and (permutations is None or len(usable) >= permutations)
        if not complete or not usable:
            out.append({"item": item, "robust_acc": None, "consistency": None, "n_permutations": len(usable)})
            continue
        chosen = [r["chosen"] for r in usable]
        consistent = chosen[0] is not None and all(c == chosen[0] for c in chosen)
        out.append({"item": item, "robust_acc": float(all(float(r["correct"]) == 1.0 for r in usable)),
                    "consistency": float(consistent), "n_permutations": len(usable)})
    return out


def robustness_metrics(rows: Sequence[Mapping[str, Any]], permutations: int | None = None,
                       level: float = 0.95) -> dict[str, dict[str, Any]]:
    """{"robust_acc", "consistency", "acc_permutation_<j>" ...}: evekit metric dicts (Wilson over
    items; `n` = items counted). With `cluster_by`, put `item_robustness`'s per-item values through
    `repeats.repeat_interval(..., clusters=...)` instead."""
    per_item = item_robustness(rows, permutations)
    out: dict[str, dict[str, Any]] = {}
    for name in ("robust_acc", "consistency"):
        values = [r[name] for r in per_item if r[name] is not None]
        out[name] = stats.proportion_interval(values, level=level)
        out[name]["n_excluded"] = len(per_item) - len(values)
    by_perm: dict[int, list[float]] = {}
    for row in rows:
        if not row.get("failed"):
            by_perm.setdefault(int(row["permutation"]), []).append(float(row["correct"]))
    for j in sorted(by_perm):
        out[f"acc_permutation_{j}"] = stats.proportion_interval(by_perm[j], level=level)
    return out


def position_preference(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """How often the model answers each position against how often the gold is there, from rows
    {"labels" (as shown), "answer" (letters shown, or None when unparsed), "gold" (letters shown),
    optional "failed"}: {"table": [{"position", "label", "answers", "answer_share", "golds",
    "gold_share"}], "n_answers", "n_unparsed"}. Shares are over all letters answered (parsed
    answers only) and all gold letters; a position bias shows as answer_share far from gold_share."""
    answers: Counter[int] = Counter()
    golds: Counter[int] = Counter()
    names: dict[int, Counter[str]] = {}
    unparsed = n_answers = 0
    for row in rows:
        if row.get("failed"):
            continue
        labels = [str(lab).upper() for lab in row["labels"]]
        for p, lab in enumerate(labels):
            names.setdefault(p, Counter())[lab] += 1
        for g in ([row["gold"]] if isinstance(row["gold"], str) else row["gold"]):
            golds[labels.index(str(g).strip().upper())] += 1
        picked = row.get("answer")
        letters = [] if picked is None else ([a.strip() for a in picked.split(",")] if isinstance(picked, str)
                                             else list(picked))
        positions = [labels.index(str(a).upper()) for a in letters if str(a).upper() in labels]
        if not positions:
            unparsed += 1
            continue
        n_answers += 1
        answers.update(positions)
    total_a, total_g = sum(answers.values()), sum(golds.values())
    table = [{"position": p, "label": names[p].most_common(1)[0][0], "answers": answers[p],
              "answer_share": answers[p] / total_a if total_a else float("nan"), "golds": golds[p],
              "gold_share": golds[p] / total_g if total_g else float("nan")} for p in sorted(names)]
    return {"table": table, "n_answers": n_answers, "n_unparsed": unparsed}


def choices_only(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The changes for the choices-only baseline: {"question", "fields"}, the question replaced by
    `CHOICES_ONLY_QUESTION` (the options, labels and gold unchanged; fields gain
    `choices_only: True`). Few-shot examples should be shown the same way."""
    if "choices" not in fields or "labels" not in fields:
        raise ParameterError("choices_only needs a multiple-choice item (fields 'labels' and 'choices')")
    return {"question": CHOICES_ONLY_QUESTION, "fields": {**fields, "choices_only": True}}
