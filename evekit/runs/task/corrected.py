"""Judge-corrected scores of a judged task run (`expert_labels`, `judge_validation`).

With a filled labelling sheet (`evekit label sample`, then an expert's labels), each judged score
gets its prediction-powered (PPI++) estimate: `<metric>_ppi` beside `<metric>` (the panel's vote
`judge_voting`, or the one judge's `llm_as_judge`, and `llm_as_judge_<judge>` per judge), with the
labels-only estimate, the width ratio and the labels that would halve the interval
(`evekit.correction.ppi_mean`); and the judges' agreement with the labels on this task's own items.
With only a judge validation (no sheet), the Rogan–Gladen correction from its sensitivity and
specificity: `<metric>_rg`, which assumes the judge errs here as it did there, and says so.

The sheet is checked against the run's own samples (`evekit.labels.read_sheet`): the samples are
written to a scratch folder as save() writes them, so a sheet drawn from an earlier run of the same
answers (a cached re-run) is proven to be that run's random draw.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

import pandas as pd

from evekit import correction, labels
from evekit.atomic import write_csv_atomic, write_text_atomic
from evekit.errors import DataError
from evekit.paths import display_path

__all__ = ["verdict_metrics", "expert_corrections", "validation_corrections", "labels_plan", "with_validated",
           "PPI_SUFFIX", "RG_SUFFIX", "VALIDATED_COLUMNS"]

PPI_SUFFIX = "_ppi"
RG_SUFFIX = "_rg"


def verdict_metrics(judge_names: Sequence[str]) -> dict[str, str]:
    """{judged metric: its samples column}: the vote and each judge (several judges), or the one judge."""
    names = list(judge_names)
    if len(names) == 1:
        return {"llm_as_judge": f"judge_{names[0]}"}
    return {"judge_voting": "judge_voting", **{f"llm_as_judge_{n}": f"judge_{n}" for n in names}}


def _scratch_run(samples: pd.DataFrame, group_by: str | None, folder: Path) -> Path:
    write_csv_atomic(samples, folder / "samples.csv", index=False)
    write_text_atomic(folder / "results.json", json.dumps({"params": {"group_by": group_by}}))
    return folder


def expert_corrections(samples: pd.DataFrame, sheet: str | Path, judge_names: Sequence[str], *,
                       group_by: str | None = None, level: float = 0.95) -> dict[str, Any]:
    """{"metrics": {<metric>_ppi: ...}, "agreement": per-judge table vs the labels (records),
    "n_labels", "notes"} for a task run's `samples` and a filled sheet; a bad sheet is a DataError
    naming the file and its lines (`labels.read_sheet`)."""
    from evekit.judges.validation import pointwise_table

    with tempfile.TemporaryDirectory(prefix="evekit-labels-") as tmp:
        folder = _scratch_run(samples, group_by, Path(tmp))
        try:
            sheet_rows = labels.read_sheet(sheet, folder)
        except DataError as exc:
            raise DataError(f"expert_labels: {exc}".replace(display_path(folder), "this run")) from None
        by_id = sheet_rows.set_index("id")["score"]
        out: dict[str, Any] = {}
        verdicts_by_metric = {metric: labels.run_verdicts(folder, column)
                              for metric, column in verdict_metrics(judge_names).items()}
    for metric, verdicts in verdicts_by_metric.items():
        res = correction.corrected_score(verdicts, by_id, level=level)
        out[metric + PPI_SUFFIX] = {**res, "raw": metric, "labels": display_path(Path(sheet)),
                                    "n_labels": int(len(by_id))}
    # The judges' agreement with the labels on the labelled items (the validation table's shape).
    names = list(judge_names)
    per_judge = {n: verdicts_by_metric["llm_as_judge" if len(names) == 1 else f"llm_as_judge_{n}"] for n in names}
    judged = pd.DataFrame({f"judge_{n}": v.reindex(by_id.index).to_numpy(float) for n, v in per_judge.items()})
    vote = verdicts_by_metric.get("judge_voting", per_judge[names[0]])
    judged["judge_voting"] = vote.reindex(by_id.index).to_numpy(float)
    items = [SimpleNamespace(label=float(v)) for v in by_id]
    agreement = pointwise_table(items, judged, names)
    return {"metrics": out, "agreement": agreement.to_dict("records"), "n_labels": int(len(by_id)),
            "notes": list(sheet_rows.attrs.get("notes", []))}


# What the judge validation measured, shown beside the agreement on this task's labelled items.
VALIDATED_COLUMNS = {"accuracy": ["validated_accuracy", "validated_accuracy_ci_low", "validated_accuracy_ci_high"],
                     "kappa": ["validated_kappa", "validated_kappa_ci_low", "validated_kappa_ci_high"]}


def with_validated(agreement: pd.DataFrame, validation: str | Path, *, kind: str | None = None) -> pd.DataFrame:
    """The judges' agreement with this task's expert labels (one row per judge and the vote, indexed
    by judge) with the judge validation's figures for the same judge beside each rate:
    validated_accuracy and validated_kappa (with their intervals) after accuracy and kappa, and
    validated_n (`judges.validation.judge_trust`; NaN for a judge the validation did not measure)."""
    from evekit.judges.validation import judge_trust

    trust = judge_trust(validation, list(agreement.index), kind=kind).set_index("judge")
    out = agreement.copy()
    columns = list(out.columns)
    for rate, cols in VALIDATED_COLUMNS.items():
        for c in cols:
            out[c] = trust[c].reindex(out.index)
        last = f"{rate}_ci_high" if f"{rate}_ci_high" in columns else rate
        at = columns.index(last) + 1 if last in columns else len(columns)
        columns[at:at] = cols
    out["validated_n"] = trust["validated_n"].reindex(out.index)
    return out[columns + ["validated_n"]]


def validation_corrections(samples: pd.DataFrame, validation: str | Path, judge_names: Sequence[str], *,
                           level: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """{"metrics": {<metric>_rg: ...}, "notes"}: each judged score corrected by the validated
    sensitivity and specificity of the same judge (or vote) in the judge validation's verdicts.csv;
    a judge the validation did not measure gets a note, not a number."""
    used = samples[~samples["failed"].astype(bool)] if "failed" in samples else samples
    out: dict[str, Any] = {}
    notes = []
    for metric, column in verdict_metrics(judge_names).items():
        try:
            counts = labels.validation_counts(validation, "judge_voting" if column == "judge_voting" else column)
        except DataError as exc:
            notes.append(f"{metric}: no Rogan–Gladen correction ({exc})")
            continue
        try:
            res = correction.rogan_gladen(pd.to_numeric(used[column], errors="coerce"), level=level, seed=seed,
                                          sensitivity=counts["sensitivity"], specificity=counts["specificity"])
        except ValueError as exc:  # e.g. a validation in which this judge gave no verdict: (0, 0)
            notes.append(f"{metric}: no Rogan–Gladen correction: the validation's counts cannot give one ({exc})")
            continue
        out[metric + RG_SUFFIX] = {**res, "raw": metric, "validation": display_path(Path(validation))}
    return {"metrics": out, "notes": notes}


def labels_plan(half_width: float, n_items: int, judge_names: Sequence[str], *, validation: str | Path | None = None,
                pilot: str | Path | None = None, pilot_run: str | Path | None = None) -> dict[str, Any]:
    """How many expert labels the corrected headline needs for an interval of +-`half_width` over
    `n_items` judged items (`correction.labels_needed`), from the judges' rate of disagreement with
    expert labels: a pilot sheet of this run (`pilot`, checked against the run folder `pilot_run`)
    when there is one, else the judge validation's verdicts.csv; its Wilson upper bound, to be safe.
    {"labels", "labels_only", "disagreement", "source"} or {"note"} when neither is there."""
    column = "judge_voting" if len(judge_names) > 1 else f"judge_{judge_names[0]}"
    disagreement = source = None
    if pilot is not None and pilot_run is not None and (Path(pilot_run) / "samples.csv").is_file():
        rows = labels.read_sheet(pilot, pilot_run)
        verdicts = labels.run_verdicts(pilot_run, column).reindex(rows["id"])
        d = correction.disagreement_rate(rows["score"].to_numpy(float), verdicts.to_numpy(float))
        disagreement, source = d, f"the pilot sheet {display_path(Path(pilot))} ({d['n']} labels)"
    elif validation is not None:
        counts = labels.validation_counts(validation, column)
        (k_se, n_se), (k_sp, n_sp) = counts["sensitivity"], counts["specificity"]
        wrong = (n_se - k_se) + (n_sp - k_sp)
        from evekit.stats import proportion_interval

        disagreement = proportion_interval([1.0] * wrong + [0.0] * (n_se + n_sp - wrong))
        source = f"the judge validation {display_path(Path(validation))} ({n_se + n_sp} labels)"
    if disagreement is None or disagreement.get("n", 0) == 0:
        return {"note": "expert_labels_target: no judge_validation and no pilot sheet of this run to read the "
                        "judges' disagreement from"}
    upper = float(disagreement["ci_high"])
    need = correction.labels_needed(half_width, min(upper, 1.0), n_items=n_items)
    return {"labels": need["value"], "labels_only": need["labels_only"], "disagreement": upper, "source": source,
            "half_width": half_width, "items": n_items}
