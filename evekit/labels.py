"""Expert labelling sheets for judge-corrected scores (`evekit.correction`).

`sample_sheet(run_dir, n, seed)` draws a uniformly random subset of a judged run's items and
writes a CSV for an expert: `id`, `group` (when the run has `group_by`), `question`,
`reference`, `context` (when the items have documents), the answer under test (`answer`; a
win-rate comparison: `answer_a`, `answer_b`), an empty `label` column (1 = PASS / 0 = FAIL;
pairwise A / B / tie, A = answer_a is better) and a free `note`. The judges' verdicts and
rationales are never in it (no anchoring). The columns are the judge-validation schema's, so a
filled sheet is also a validation label file.

The draw is recorded next to the sheet (`<sheet>.draw.json`: the run, a hash of the file drawn
from, n, the seed, the strata, the ids) and `read_sheet` re-draws it from the run to prove
the labelled items are that random sample. With `group_by`, the draw is stratified: each group
gets its share of n (the fractional parts by randomised rounding, so every item has the same
chance n/N of being drawn, as the correction assumes), then a uniform draw within each group.

Run folders: a task run (`samples.csv`, one row per answer; items whose generation failed are
left out, unparsed ones stay in: they are scored FAIL by rule, so they are part of the score),
or a win-rate comparison (`results.csv`, one item per question). `run_verdicts` gives a task
run's verdicts by the sheet's ids; `validation_counts` a judge validation's sensitivity and
specificity counts (its verdicts.csv), for the Rogan-Gladen correction without task labels.
"""
from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from evekit.errors import DataError, ParameterError
from evekit.judges.validation import _label
from evekit.paths import display_path
from evekit.tasks import GROUP_COLUMN

__all__ = ["DRAW_SUFFIX", "PASS_LABELS", "PAIR_LABELS", "run_items", "draw_ids", "sample_sheet", "draw_path",
           "read_sheet", "run_verdicts", "validation_counts"]

DRAW_SUFFIX = ".draw.json"
PASS_LABELS = "1 = PASS, 0 = FAIL"
PAIR_LABELS = "A = answer_a is better, B = answer_b is better, tie"
_SHOWN_ERRORS = 20  # a sheet with more bad rows lists the first ones and the count


def _read_csv(path: Path) -> pd.DataFrame:
    try:  # every cell as text: an answer "NA" or "None" stays what the model wrote
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    except FileNotFoundError:
        raise DataError(f"{display_path(path)}: file not found") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(f"{display_path(path)}: not a readable CSV ({type(exc).__name__}: {exc})") from None


def _context(df: pd.DataFrame) -> pd.Series | None:
    """An item's documents as the validation schema takes them: the text of `doc.Context`, or a
    JSON list of the non-empty `doc.Doc 1..n`; None when the run's items have none."""
    if "doc.Context" in df.columns:
        return df["doc.Context"]
    docs = sorted((c for c in df.columns if c.startswith("doc.Doc ")), key=lambda c: int(c.split()[-1]))
    if not docs:
        return None
    return df[docs].apply(lambda r: json.dumps([d for d in r if d.strip()], ensure_ascii=False), axis=1)


def _task_items(run_dir: Path) -> tuple[pd.DataFrame, str | None]:
    path = run_dir / "samples.csv"
    s = _read_csv(path)
    need = ["doc_id", "doc.Question", "target", "filtered_resps"]
    missing = [c for c in need if c not in s.columns]
    if missing:
        raise DataError(f"{display_path(path)}: missing column(s) {', '.join(map(repr, missing))}; "
                        f"the file has: {', '.join(map(repr, s.columns))}")
    if "judge_voting" not in s.columns and not any(c.startswith("judge_") for c in s.columns):
        raise DataError(f"{display_path(path)}: no judge verdicts (judge_* columns): only a judged run "
                        "can be corrected by expert labels")
    keys = [c for c in ("repeat", "permutation") if c in s.columns and s[c].nunique() > 1]
    ids = s["doc_id"].astype(str)
    for c in keys:  # one answer per (item, repeat, permutation): each is labelled on its own
        ids = ids + f"#{c[0]}" + s[c].astype(str)
    items = pd.DataFrame({"id": ids, "question": s["doc.Question"], "reference": s["target"]})
    if GROUP_COLUMN in s.columns:
        items["group"] = s[GROUP_COLUMN]
    ctx = _context(s)
    if ctx is not None:
        items["context"] = ctx
    items["answer"] = s["filtered_resps"]
    failed = s["failed"].str.strip().str.lower().isin(("true", "1")) if "failed" in s.columns else False
    items = items[~np.asarray(failed, dtype=bool)].reset_index(drop=True)
    group_by = None
    results = run_dir / "results.json"
    if results.exists():
        try:
            group_by = (json.loads(results.read_text()).get("params") or {}).get("group_by")
        except ValueError:
            raise DataError(f"{display_path(results)}: not valid JSON") from None
    if "group" in items.columns and not group_by:
        group_by = GROUP_COLUMN
    return items, group_by


def _pair_items(run_dir: Path) -> tuple[pd.DataFrame, str | None]:
    path = run_dir / "results.csv"
    r = _read_csv(path)
    need = ["qid", "question", "target", "answer_a", "answer_b"]
    missing = [c for c in need if c not in r.columns]
    if missing:
        raise DataError(f"{display_path(path)}: missing column(s) {', '.join(map(repr, missing))} "
                        "(expected a win-rate comparison's results.csv)")
    first = r.drop_duplicates("qid", keep="first")
    items = pd.DataFrame({"id": first["qid"].astype(str), "question": first["question"],
                          "reference": first["target"], "answer_a": first["answer_a"],
                          "answer_b": first["answer_b"]}).reset_index(drop=True)
    return items, None


def run_items(run_dir: str | Path) -> tuple[pd.DataFrame, str, str | None, Path]:
    """(items, kind, group_by, source file) of a judged run folder: one row per item that can be
    labelled (columns of the sheet but `label`), kind "pointwise" (a task run) or "pairwise"
    (a win-rate comparison). A folder that is neither is a DataError."""
    run_dir = Path(run_dir)
    if (run_dir / "samples.csv").exists():
        items, group_by = _task_items(run_dir)
        kind, source = "pointwise", run_dir / "samples.csv"
    elif (run_dir / "results.csv").exists() and (run_dir / "metrics.json").exists():
        items, group_by = _pair_items(run_dir)
        kind, source = "pairwise", run_dir / "results.csv"
    else:
        raise DataError(f"{display_path(run_dir)}: not a judged run folder (no samples.csv of a task run, "
                        "no results.csv + metrics.json of a win-rate comparison)")
    dup = items["id"][items["id"].duplicated()]
    if len(dup):
        raise DataError(f"{display_path(source)}: item id {dup.iloc[0]!r} occurs more than once; "
                        "a labelling sheet needs one row per item")
    return items, kind, group_by, source


def _shares(sizes: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Each stratum's number of draws: n * size / total, the fractional parts rounded up with
    probability equal to themselves (systematic sampling), so E[draws] / size = n / total."""
    exact = n * sizes / sizes.sum()
    whole = np.floor(exact).astype(int)
    frac = exact - whole
    extra = n - int(whole.sum())
    if extra:
        points = rng.random() + np.arange(extra)  # `extra` points one apart on the cumulated fractions
        edges = np.concatenate([[0.0], np.cumsum(frac)])
        hit = np.searchsorted(edges, points, side="right") - 1
        np.add.at(whole, np.clip(hit, 0, len(sizes) - 1), 1)
    return whole


def draw_ids(items: pd.DataFrame, n: int, seed: int, group_by: str | None = None) -> tuple[list[str], dict]:
    """The ids of a uniformly random draw of `n` items (stratified by `group` when `group_by`),
    in the items' order, and the strata {group: {"items", "drawn"}} ({} unstratified). A pure
    function of (items, n, seed): numpy's default_rng(seed)."""
    total = len(items)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 < n <= total:
        raise ParameterError(f"n={n!r}: draw between 1 and the {total} items of the run")
    rng = np.random.default_rng(seed)
    if not group_by or "group" not in items.columns:
        picked = np.sort(rng.choice(total, size=int(n), replace=False))
        return items["id"].iloc[picked].tolist(), {}
    groups = sorted(items["group"].unique())
    members = [np.flatnonzero(items["group"].to_numpy() == g) for g in groups]
    counts = _shares(np.array([len(m) for m in members], dtype=float), int(n), rng)
    picked = np.sort(np.concatenate([rng.choice(m, size=int(k), replace=False) for m, k in zip(members, counts)]))
    strata = {str(g): {"items": len(m), "drawn": int(k)} for g, m, k in zip(groups, members, counts)}
    return items["id"].iloc[picked].tolist(), strata


def draw_path(sheet: str | Path) -> Path:
    """Where a sheet's draw is recorded: `<sheet>.draw.json` beside it."""
    sheet = Path(sheet)
    return sheet.with_name(sheet.name + DRAW_SUFFIX)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sample_sheet(run_dir: str | Path, n: int, seed: int = 0, out: str | Path | None = None) -> Path:
    """Write the labelling sheet of `n` random items of the judged run in `run_dir` and its
    draw record (`draw_path`); returns the sheet's path (default `<run_dir>/labels.csv`)."""
    run_dir = Path(run_dir)
    items, kind, group_by, source = run_items(run_dir)
    ids, strata = draw_ids(items, n, seed, group_by)
    sheet = items.set_index("id").loc[ids].reset_index()
    sheet["label"] = ""
    sheet["note"] = ""
    out = Path(out) if out is not None else run_dir / "labels.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    sheet.to_csv(out, index=False)
    record = {
        "kind": "expert_labels_draw", "run_dir": display_path(run_dir), "run_kind": kind,
        "source": source.name, "source_sha256": _sha256(source), "items": len(items), "n": int(n),
        "seed": int(seed), "stratified_by": group_by, "strata": strata,
        "method": ("uniform without replacement, numpy.random.default_rng(seed)"
                   + (", per group (shares by randomised rounding)" if strata else "")),
        "numpy": np.__version__, "labels": PAIR_LABELS if kind == "pairwise" else PASS_LABELS,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "ids": ids,
    }
    draw_path(out).write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    return out


def _norm(text: str) -> str:
    return " ".join(str(text).split())


def _check_draw(record: dict, path: Path, items: pd.DataFrame, group_by: str | None, source: Path) -> set[str]:
    """The drawn ids, after re-drawing them from the run with the recorded n and seed."""
    try:
        n, seed, ids = int(record["n"]), int(record["seed"]), [str(i) for i in record["ids"]]
    except (KeyError, TypeError, ValueError):
        raise DataError(f"{display_path(path)}: not a draw record (needs n, seed, ids)") from None
    again, _ = draw_ids(items, n, seed, record.get("stratified_by") or group_by)
    if again != ids:
        changed = "" if record.get("source_sha256") == _sha256(source) else f" ({source.name} has changed since)"
        raise DataError(f"{display_path(path)}: its ids are not the draw of n={n}, seed={seed} from "
                        f"{display_path(source)}{changed}: the labelled items cannot be shown to be a random sample")
    return set(ids)


def read_sheet(path: str | Path, run_dir: str | Path, *, allow_blank: bool = False) -> pd.DataFrame:
    """A filled sheet, checked against its run: columns `id`, `label` (1/0, or "A"/"B"/"tie"),
    `score` (the label as a number: pairwise A 1, B 0, tie 0.5) and `line` (in the file).

    Errors (one DataError naming every bad line, up to 20): a missing `id` or `label` column, an
    empty id, an id not among the run's items, an id outside the recorded draw, a repeated id,
    a label outside the allowed values, a blank label (unless `allow_blank`: such rows are
    dropped), a question that differs from the run's (a sheet of another run). A row whose
    `answer` is not the run's answer (a re-run that answered differently) is left out with a
    note: its label was given to another answer. A draw record
    whose ids are not the re-drawn ones is an error too. `attrs`: "kind", "draw" (the record,
    or None), "notes" (e.g. no draw record, or fewer labels than items drawn).
    """
    path = Path(path)
    items, kind, group_by, source = run_items(run_dir)
    pairwise = kind == "pairwise"
    sheet = _read_csv(path)
    missing = [c for c in ("id", "label") if c not in sheet.columns]
    if missing:
        raise DataError(f"{display_path(path)}: missing column(s) {', '.join(map(repr, missing))}; "
                        f"the file has: {', '.join(map(repr, sheet.columns))}")
    notes: list[str] = []
    record = None
    drawn: set[str] | None = None
    rec_path = draw_path(path)
    if rec_path.exists():
        try:
            record = json.loads(rec_path.read_text())
        except ValueError:
            raise DataError(f"{display_path(rec_path)}: not valid JSON") from None
        drawn = _check_draw(record, rec_path, items, group_by, source)
    else:
        notes.append(f"no draw record ({rec_path.name}) beside the sheet: nothing shows that its items are a "
                     "uniformly random sample of the run, which the correction assumes")
    questions = dict(zip(items["id"], items["question"]))
    answers = dict(zip(items["id"], items["answer"])) if "answer" in items.columns else None
    changed: list[int] = []
    errors: list[str] = []
    seen: dict[str, int] = {}
    rows = []
    for i, row in sheet.iterrows():
        line = int(i) + 2  # the header is line 1
        ident = row["id"].strip()
        where = f"line {line}" + (f" (id {ident!r})" if ident else "")
        if not ident:
            errors.append(f"{where}: empty id")
            continue
        if ident not in questions:
            errors.append(f"{where}: no item with this id in {display_path(source)}")
            continue
        if drawn is not None and ident not in drawn:
            errors.append(f"{where}: not among the {len(drawn)} items drawn ({rec_path.name}); an item chosen "
                          "by hand would bias the corrected score")
            continue
        if ident in seen:
            errors.append(f"{where}: the same id as line {seen[ident]}")
            continue
        seen[ident] = line
        if "question" in sheet.columns and _norm(row["question"]) != _norm(questions[ident]):
            errors.append(f"{where}: the question differs from the run's (is the sheet from another run?)")
            continue
        if answers is not None and "answer" in sheet.columns and _norm(row["answer"]) != _norm(answers[ident]):
            changed.append(line)  # the label was given to another answer than this run's: not its label
            continue
        raw = row["label"].strip()
        if not raw:
            if not allow_blank:
                errors.append(f"{where}: blank label")
            continue
        if not pairwise and raw in ("1.0", "0.0"):  # a spreadsheet's way of writing 1 and 0
            raw = raw[0]
        try:
            label = _label(raw, pairwise, "label")
        except Exception as exc:  # RowError: the validation schema's own wording
            errors.append(f"{where}: {getattr(exc, 'message', exc)}")
            continue
        rows.append({"id": ident, "label": label, "line": line})
    if errors:
        shown = "; ".join(errors[:_SHOWN_ERRORS])
        more = f"; and {len(errors) - _SHOWN_ERRORS} more" if len(errors) > _SHOWN_ERRORS else ""
        raise DataError(f"{display_path(path)}: {len(errors)} unusable row(s): {shown}{more}")
    out = pd.DataFrame(rows, columns=["id", "label", "line"])
    scores = {"A": 1.0, "B": 0.0, "tie": 0.5}
    out.insert(2, "score", [scores[v] if pairwise else float(v) for v in out["label"]])
    if changed:
        notes.append(f"{len(changed)} labelled row(s) left out (line(s) {', '.join(map(str, changed[:10]))}): the "
                     "run's answer differs from the one the expert labelled (a re-run that answered differently)")
    if drawn is not None and len(out) < len(drawn):
        notes.append(f"{len(out)} of the {len(drawn)} items drawn are labelled: leaving items out keeps the "
                     "correction unbiased only if which ones does not depend on the items themselves")
    out.attrs.update(kind=kind, draw=record, notes=notes)
    return out


def run_verdicts(run_dir: str | Path, column: str = "judge_voting") -> pd.Series:
    """A task run's verdicts by item id (the ids of its sheet): `column` is `judge_voting` (the
    panel's vote) or `judge_<name>` (one judge); 1.0 / 0.0, NaN = no verdict. Items whose
    generation failed are left out, as in the sheet."""
    run_dir = Path(run_dir)
    items, kind, _, source = run_items(run_dir)
    if kind != "pointwise":
        raise DataError(f"{display_path(run_dir)}: a win-rate comparison; its verdicts per question come from "
                        "the win rate's judge outcomes")
    s = _read_csv(source)
    if column not in s.columns:
        meta = ("_reasoning", "_raw", "_error", "_method")
        have = [c for c in s.columns if c.startswith("judge_") and not c.endswith(meta)
                and c not in ("judge_agreement", "judge_n_votes", "judge_failed")]
        raise DataError(f"{display_path(source)}: no column {column!r}; verdict columns: {', '.join(have)}")
    failed = s["failed"].str.strip().str.lower().isin(("true", "1")) if "failed" in s.columns else False
    values = pd.to_numeric(s.loc[~np.asarray(failed, dtype=bool), column].replace("", np.nan), errors="coerce")
    return pd.Series(values.to_numpy(dtype=float), index=pd.Index(items["id"], name="id"), name=column)


def validation_counts(validation: str | Path, column: str = "judge_voting") -> dict[str, tuple[int, int]]:
    """A pointwise judge validation's counts for `evekit.correction.rogan_gladen`, read from the
    verdicts.csv beside its results.json (`validation`: that file or its folder): "sensitivity"
    = (gold-PASS items judged PASS, gold-PASS items with a verdict), "specificity" = (gold-FAIL
    items judged FAIL, gold-FAIL items with a verdict), for `column` (`judge_voting`, the vote,
    or `judge_<name>`)."""
    folder = Path(validation)
    folder = folder.parent if folder.suffix == ".json" else folder
    path = folder / "verdicts.csv"
    v = _read_csv(path)
    for need in ("label", column):
        if need not in v.columns:
            raise DataError(f"{display_path(path)}: no column {need!r} (a pointwise judge validation's "
                            f"verdicts.csv has label, judge_<name>, judge_voting)")
    gold = pd.to_numeric(v["label"], errors="coerce")
    if not gold.dropna().isin((0, 1)).all() or gold.isna().any():
        raise DataError(f"{display_path(path)}: labels are not all 1/0 (Rogan-Gladen needs a pointwise validation)")
    verdict = pd.to_numeric(v[column].replace("", np.nan), errors="coerce")
    used = verdict.notna()
    pos, neg = used & (gold == 1), used & (gold == 0)
    return {"sensitivity": (int((verdict[pos] == 1).sum()), int(pos.sum())),
            "specificity": (int((verdict[neg] == 0).sum()), int(neg.sum()))}
