"""Judge-corrected win rates (`expert_labels` on the win-rate notebook): per comparison, the panel's
alpaca win rate of model A (a tie half a win) corrected by an expert's A / B / tie labels of a random
draw of its questions (`evekit label sample <comparison folder>`), by prediction-powered inference
(`evekit.correction.ppi_win_rate`), beside the labels alone and the judges' agreement with them.

The sheet is checked against the comparison's own results (written to a scratch folder as save()
writes them), so a sheet drawn from an earlier run of the same decisions is proven to be its draw.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from evekit import correction, labels
from evekit.atomic import write_csv_atomic, write_text_atomic
from evekit.errors import DataError, ParameterError
from evekit.judges import get_kind
from evekit.paths import display_path, resolve_path
from evekit.runs.win_rate.matching import Comparison

__all__ = ["sheet_of", "corrected_win_rate", "judges_against_labels", "METRIC", "JUDGE_COLUMNS"]

METRIC = "alpaca_win_rate_a_ppi"


def sheet_of(expert_labels: str | Mapping[str, str] | None, comp: Comparison, n_comparisons: int) -> Path | None:
    """The sheet that labels `comp`: one file when the run has one comparison, else the entry of
    `{comparison label: file}` (`<model_a>_vs_<model_b>`, as its folder is named)."""
    if expert_labels is None:
        return None
    if isinstance(expert_labels, str):
        if n_comparisons > 1:
            raise ParameterError("parameter expert_labels: this run has several comparisons; give one sheet per "
                                 "comparison as {<model_a>_vs_<model_b>: file}")
        return resolve_path(expert_labels)
    path = expert_labels.get(comp.label)
    return resolve_path(path) if path else None


def _majority(comp: Comparison) -> pd.Series:
    """The panel's verdict per question as model A's score (A 1, B 0, tie 0.5; NaN: no verdict)."""
    reduce = get_kind("pairwise").reduce
    out = comp.outcomes
    votes = out.apply(lambda v: reduce(list(v)), axis=1) if len(out) else pd.Series(dtype=object)
    return pd.Series(correction.pair_scores(votes.to_numpy(object)), index=out.index.astype(str))


# A pairwise label or verdict about models (A = model_a) in the judge-validation tables' letters.
_LETTER = {"a": "A", "b": "B", "tie": "tie", 1.0: "A", 0.0: "B", 0.5: "tie"}
JUDGE_COLUMNS = ["judge", "n", "accuracy", "accuracy_ci_low", "accuracy_ci_high", "kappa", "kappa_ci_low",
                 "kappa_ci_high", "abstained"]


def judges_against_labels(comp: Comparison, labels_by_id: pd.Series, *, seed: int = 0) -> pd.DataFrame:
    """Each judge and the panel's vote against the expert's labels on the labelled questions: n
    (questions with a verdict), accuracy (Wilson) and Cohen's kappa over A / B / tie (bootstrap),
    with their intervals, abstained; the task's corrected table's shape (`judges.validation.pairwise_table`).
    A judge's verdict per question is its verdict over both orders (an order-dependent one is a tie)."""
    from types import SimpleNamespace

    from evekit.judges.validation import pairwise_table

    ids = labels_by_id.index.astype(str)
    out = comp.outcomes.copy()
    out.index = out.index.astype(str)
    out = out.reindex(ids)
    judged = pd.DataFrame({f"judge_{j}": [None if v is None else _LETTER[v] for v in out[j]] for j in comp.judges})
    vote = _majority(comp).reindex(ids)
    judged["judge_voting"] = [None if np.isnan(v) else _LETTER[float(v)] for v in vote.to_numpy(float)]
    items = [SimpleNamespace(label=_LETTER[float(v)], case=None) for v in labels_by_id.to_numpy(float)]
    table = pairwise_table(items, judged, list(comp.judges), both_orders=False, seed=seed)
    return table[JUDGE_COLUMNS]


def corrected_win_rate(comp: Comparison, sheet: str | Path, *, seed: int = 0) -> dict[str, Any]:
    """{"metric": the PPI++ win rate of A with its interval (labels-only, width ratio, ...), "agreement":
    the panel's agreement with the labels (share of labelled questions where the vote is the label,
    Wilson), "judges": each judge's and the vote's accuracy and kappa against the labels with their
    intervals (`judges_against_labels`, records), "notes"}; a bad sheet is a DataError naming its lines."""
    with tempfile.TemporaryDirectory(prefix="evekit-labels-") as tmp:
        folder = Path(tmp)
        write_csv_atomic(comp.results, folder / "results.csv", index=False)
        write_text_atomic(folder / "metrics.json", json.dumps({"model_a": comp.name_a, "model_b": comp.name_b}))
        try:
            rows = labels.read_sheet(sheet, folder)
        except DataError as exc:
            raise DataError(f"expert_labels ({comp.label}): {exc}".replace(display_path(folder), "this comparison")) from None
    by_id = rows.set_index("id")["score"]
    verdicts = _majority(comp)
    metric = correction.corrected_score(verdicts.to_dict(), by_id.to_dict(), pairwise=True)
    labelled = verdicts.reindex(by_id.index).to_numpy(float)
    decided = ~np.isnan(labelled)
    from evekit.stats import proportion_interval

    agreement = proportion_interval((labelled[decided] == by_id.to_numpy(float)[decided]).astype(float))
    return {"metric": {**metric, "raw": "alpaca_win_rate_a", "labels": display_path(Path(sheet)),
                       "n_labels": int(len(by_id))},
            "agreement": {**agreement, "what": "the panel's vote equals the expert's label"},
            "judges": judges_against_labels(comp, by_id, seed=seed).to_dict("records"),
            "notes": list(rows.attrs.get("notes", []))}
