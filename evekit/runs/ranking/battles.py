"""From N models' answer files to battles: questions matched across the files, pairs chosen per
question, and the pairwise judge panel's decisions as battles.csv rows.

Reading a file is `evekit.runs.win_rate.matching.read_answers` (evekit samples.csv, EVE evalkit and
lm-eval CSVs) and the pairwise judges are an `evekit.judges.JudgePanel`, as in the win rate; what
is new here is matching more than two files and sampling pairs (`evekit.ranking.sample_pairs`).

Vocabulary of battles.csv: `model_a` is the model whose answer was shown first (position A),
`model_b` the one shown second; `winner` is a model's name, "tie", or empty with `error` when the
judge gave no usable verdict.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

from evekit.errors import DataError
from evekit.judges import JudgePanel, PairCase
from evekit.ranking import judge_call_count, sample_pairs
from evekit.runs.win_rate.matching import (ModelSpec, item_keys, normalize_ws, question_clusters, read_answers,
                                          require_clusters)

__all__ = ["BATTLE_COLUMNS", "Matched", "match_models", "plan_pairs", "call_plan", "judge_battles"]

BATTLE_COLUMNS = ["question_id", "model_a", "model_b", "judge", "winner", "rationale", "error", "order",
                  "judge_said", "method", "len_a", "len_b", "question"]


@dataclass
class Matched:
    """The models' answers side by side: one row per question, one answer column per model."""

    models: list[str]
    questions: pd.DataFrame   # question_id, question, target, context, key, occ
    answers: pd.DataFrame     # index question_id, one column per model: the answer or None (unusable)
    left_out: pd.DataFrame    # model, file, row, doc_id, question, reason
    read: pd.DataFrame        # model, file, rows, usable, failed_generation
    n_over_limit: int = 0
    notes: list[str] = field(default_factory=list)


def match_models(specs: Sequence[ModelSpec], *, limit: int | None = None, cluster_by: str | None = None) -> Matched:
    """Match the models' rows by item (`matching.item_keys`: the question, its documents, and where
    it repeats its reference answer and doc_id; never the row's position). A question is kept when at least two models have a usable answer
    (a failed generation is the infrastructure's, so that model sits this question out); `limit`
    keeps the first N kept questions in the first file's order. Everything left out is listed in
    `left_out` with the reason. `cluster_by`: `questions` gains each question's `cluster`
    (`matching.question_clusters`: from every file that has the column)."""
    frames, read, left = {}, [], []
    for s in specs:
        frames[s.name] = read_answers(s.file, cluster_by)
    try:
        item_keys(frames)
        clusters = question_clusters(frames, cluster_by) if cluster_by else None
    except ValueError as exc:
        raise DataError(str(exc)) from None
    for s in specs:
        df = frames[s.name]
        bad = df[df["failed"]]
        read.append({"model": s.name, "file": s.shown_file, "rows": len(df), "usable": int((~df["failed"]).sum()),
                     "failed_generation": len(bad)})
        left += [{"model": s.name, "file": s.shown_file, "row": int(r.row), "doc_id": r.doc_id, "question": r.question,
                  "reason": f"generation failed: {r.error}"} for r in bad.itertuples()]
    names = [s.name for s in specs]
    keys = pd.concat([f[["key", "occ"]] for f in frames.values()], ignore_index=True).drop_duplicates()
    # order: first file's rows first, then questions that only later files have
    order = {k: i for i, k in enumerate(zip(keys["key"], keys["occ"]))}
    answers = {}
    first_seen: dict[tuple[str, int], Any] = {}
    for name, df in frames.items():
        usable = df[~df["failed"]]
        answers[name] = dict(zip(zip(usable["key"], usable["occ"]), usable["answer"]))
        for r in df.itertuples():
            first_seen.setdefault((r.key, r.occ), r)
    table = pd.DataFrame({n: pd.Series(answers[n], dtype=object) for n in names}).reindex(list(order))
    n_usable = table.notna().sum(axis=1)
    for key in table.index[n_usable == 1]:
        only = table.columns[table.loc[[key]].notna().to_numpy()[0]][0]
        r = frames[only].set_index(["key", "occ"]).loc[key]
        left.append({"model": only, "file": next(s.shown_file for s in specs if s.name == only), "row": int(r["row"]),
                     "doc_id": r["doc_id"], "question": r["question"],
                     "reason": "no other model has a usable answer to this question"})
    table = table[n_usable >= 2]
    if table.empty:
        raise DataError("the models' files have no question in common (compared after whitespace "
                        f"normalisation): {', '.join(f'{s.name}: {s.file}' for s in specs)}")
    n_kept = len(table)
    if limit is not None:
        table = table.head(limit)
    qids = [f"q{i:04d}" for i in range(len(table))]
    firsts = [first_seen[k] for k in table.index]
    questions = pd.DataFrame({
        "question_id": qids, "question": [r.question for r in firsts], "target": [r.target for r in firsts],
        "context": [r.context for r in firsts], "key": [k[0] for k in table.index], "occ": [k[1] for k in table.index],
    })
    if clusters is not None:
        try:
            questions["cluster"] = require_clusters(clusters, list(table.index), str(cluster_by), frames)
        except ValueError as exc:
            raise DataError(str(exc)) from None
    answers_df = table.set_axis(qids, axis=0).rename_axis("question_id")
    answers_df = answers_df.astype(object).where(answers_df.notna(), None)
    notes = []
    targets = {}
    for name, df in frames.items():
        targets[name] = dict(zip(zip(df["key"], df["occ"]), df["target"].map(normalize_ws)))
    differ = sum(1 for k in table.index if len({t[k] for t in targets.values() if k in t}) > 1)
    if differ:
        notes.append(f"{differ} question(s) have different reference answers in different files; "
                     "the first file's is shown to the judges")
    return Matched(models=names, questions=questions, answers=answers_df,
                   left_out=pd.DataFrame(left, columns=["model", "file", "row", "doc_id", "question", "reason"]),
                   read=pd.DataFrame(read), n_over_limit=n_kept - len(table), notes=notes)


def plan_pairs(matched: Matched, *, max_pairs_per_question: int | None, seed: int,
               both_orders: bool) -> pd.DataFrame:
    """Which pair is judged on which question, and who is shown first: question_id, model_a
    (shown first), model_b, order (0; 1 = the same pair swapped). Questions that some model sits
    out are planned among the models that answered them."""
    avail = matched.answers.notna()
    groups = avail.apply(lambda r: tuple(c for c in matched.models if r[c]), axis=1)
    parts = []
    for models, qids in groups.groupby(groups).groups.items():
        plan = sample_pairs(list(models), list(qids), max_pairs_per_question, seed=seed, both_orders=both_orders)
        parts.append(plan)
    plan = pd.concat(parts, ignore_index=True)
    # sample_pairs writes a pair's swapped row right after it
    plan["order"] = plan.groupby(["question_id", plan[["model_a", "model_b"]].apply(
        lambda r: tuple(sorted(r)), axis=1)]).cumcount() if both_orders else 0
    rank = {q: i for i, q in enumerate(matched.answers.index)}
    return plan.sort_values("question_id", key=lambda c: c.map(rank), kind="stable").reset_index(drop=True)


def call_plan(matched: Matched, plan: pd.DataFrame, n_judges: int, *, both_orders: bool,
              max_pairs_per_question: int | None) -> dict[str, Any]:
    """The judge calls this ranking will make (identical answers are ties without a call) and how
    much wider the intervals get with `max_pairs_per_question` than with every pair."""
    est = judge_call_count(len(matched.questions), len(matched.models), n_judges, both_orders=both_orders,
                           max_pairs_per_question=max_pairs_per_question)
    ident = _identical(matched, plan)
    est.update(decisions=len(plan) * n_judges, identical_pairs=int(ident.sum()),
               judge_calls=int((~ident).sum()) * n_judges)
    return est


def _identical(matched: Matched, plan: pd.DataFrame) -> np.ndarray:
    ans = matched.answers
    a = [normalize_ws(ans.at[q, m]) for q, m in zip(plan["question_id"], plan["model_a"])]
    b = [normalize_ws(ans.at[q, m]) for q, m in zip(plan["question_id"], plan["model_b"])]
    return np.array([x == y for x, y in zip(a, b)], dtype=bool)


def judge_battles(matched: Matched, plan: pd.DataFrame, panel: JudgePanel) -> pd.DataFrame:
    """Ask every judge about every planned decision (one panel call, so all judges and all pairs run
    concurrently); returns battles.csv rows, one per judge decision. Identical answers (after
    whitespace normalisation) are a tie without a call; a reply that is not A, B or tie leaves
    `winner` empty and says why in `error`."""
    q = matched.questions.set_index("question_id")
    ans = matched.answers
    ident = _identical(matched, plan)
    cases = [PairCase(q.at[r.question_id, "question"], q.at[r.question_id, "target"], ans.at[r.question_id, r.model_a],
                      ans.at[r.question_id, r.model_b], q.at[r.question_id, "context"])
             for r, same in zip(plan.itertuples(), ident) if not same]
    verdicts = panel.judge(cases)
    len_a = [len(normalize_ws(ans.at[qid, m])) for qid, m in zip(plan["question_id"], plan["model_a"])]
    len_b = [len(normalize_ws(ans.at[qid, m])) for qid, m in zip(plan["question_id"], plan["model_b"])]
    rows = []
    for judge in panel.names:
        col = f"judge_{judge}"
        asked = iter(verdicts[[col, f"{col}_reasoning", f"{col}_method", f"{col}_error"]]
                     .itertuples(index=False, name=None))
        for i, (r, same) in enumerate(zip(plan.itertuples(), ident)):
            row = {"question_id": r.question_id, "model_a": r.model_a, "model_b": r.model_b, "judge": judge,
                   "order": r.order, "len_a": len_a[i], "len_b": len_b[i],
                   "question": q.at[r.question_id, "question"]}
            if same:
                row.update(winner="tie", judge_said="tie", method="identical", error=None,
                           rationale="identical answers (after whitespace normalisation): a tie without a judge call")
            else:
                said, rationale, method, error = next(asked)
                said = None if said is None or (isinstance(said, float) and np.isnan(said)) else said
                winner = {"A": r.model_a, "B": r.model_b, "tie": "tie"}.get(said)
                row.update(winner=winner, judge_said=said, method=method, rationale=rationale,
                           error=error if said is None else None)
                if said is None and not error:
                    row["error"] = "no usable verdict"
            rows.append(row)
    return pd.DataFrame(rows, columns=BATTLE_COLUMNS)
