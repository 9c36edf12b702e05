"""What a page says in words: verdict cards and trust flags.

A *verdict card* is one or two sentences made from the numbers, at the top of a report or a
comparison ("On open_ended, 5-shot and 0-shot cannot be told apart (difference 0.04 [-0.10, 0.18],
n = 12; the smallest difference this n can detect is 0.31)"). A card never claims more than the
test behind it supports: a difference is called one only when its Holm-adjusted p-value is below
alpha, and a judged score whose judges failed validation says so in the same card.

A *trust flag* marks a number that should not be read at face value: a judged score whose judges
were not validated, or validated with kappa below `KAPPA_BAR`, or no better than always giving the
majority label; a win rate or ranking whose judges prefer one position beyond what their interval
allows; a judge that rates every model the same. Each flag has a mark for the cell, a short name
(also the CSV column value) and a sentence for the tooltip.

Plain data in (results.json dicts, summary rows), plain text out; pages escape it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from evekit.naming import configuration_name

__all__ = ["KAPPA_BAR", "Flag", "judge_flags", "score_flags", "position_bias_flag", "degenerate_judge_flag", "flags_text",
           "MARK", "n_of", "task_card", "comparison_card", "comparisons_card", "win_rate_card", "ranks_text", "fmt_ci"]

KAPPA_BAR = 0.4  # the validated kappa below which a judge's scores are flagged (as judges.validation warns)
MARK = "\u26a0"  # ⚠, beside a flagged number


@dataclass(frozen=True)
class Flag:
    """A reason not to read a number at face value: `kind` (short, for CSV columns), `text` (a sentence)."""

    kind: str
    text: str
    mark: str = MARK


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def fmt_ci(value: Any, lo: Any, hi: Any, digits: int = 2) -> str:
    """'0.55 [0.40, 0.70]'; '–' without a value; the value alone without an interval."""
    v, a, b = _num(value), _num(lo), _num(hi)
    if v is None:
        return "–"
    if a is None or b is None:
        return f"{v:.{digits}f}"
    return f"{v:.{digits}f} [{a:.{digits}f}, {b:.{digits}f}]"


# -- trust flags -----------------------------------------------------------------------------
def judge_flags(results: Mapping[str, Any], judge: str | None = None) -> list[Flag]:
    """The flags of a task result's judged score: of one judge's (`judge`), or of the panel's vote
    (None: flagged when any judge behind it is). Empty for a task without judges."""
    judges = list(results.get("judges") or [])
    if not judges:
        return []
    names = [judge] if judge else judges
    trust = (results.get("judge_trust") or {}).get("judges")
    if not trust:
        return [Flag("unvalidated", "the judges behind this score were not validated against expert labels "
                                    "(run the judge-validation notebook and pass its results.json as judge_validation)")]
    rows = {r.get("judge"): r for r in trust}
    flags = []
    low = [(n, _num(rows.get(n, {}).get("validated_kappa"))) for n in names]
    missing = [n for n, k in low if n not in rows]
    if missing:
        flags.append(Flag("unvalidated", f"judge(s) {', '.join(missing)} not in the validation"))
    bad = [(n, k) for n, k in low if n in rows and (k is None or k < KAPPA_BAR)]
    if bad:
        said = ", ".join(f"{n} {'undefined' if k is None else f'{k:.2f}'}" for n, k in bad)
        flags.append(Flag("failed_validation", f"judges failed validation: kappa against expert labels {said} "
                                                f"(< {KAPPA_BAR}): this score is not to be trusted"))
    share = _num((results.get("judge_trust") or {}).get("majority_label_share"))
    worse = [n for n in names if n in rows and share is not None
             and (_num(rows[n].get("validated_accuracy")) or 0.0) <= share]
    if worse:
        flags.append(Flag("below_majority", f"judge(s) {', '.join(worse)} no more accurate than always giving the "
                                            f"majority label ({share:.0%})"))
    return flags


def score_flags(results: Mapping[str, Any], metric: str) -> list[Flag]:
    """The trust flags of one score of a task result: `judge_flags` for a judged score, none for
    one corrected by expert labels (its record carries `n_labels`: the labels measure and remove the
    judges' error on this task, so their validation no longer decides whether the number holds)."""
    if not metric.startswith(("judge_voting", "llm_as_judge")):
        return []
    record = (results.get("metrics") or {}).get(metric) or {}
    if isinstance(record, Mapping) and record.get("n_labels"):
        return []
    return judge_flags(results)


def position_bias_flag(bias: Any, lo: Any, hi: Any, n: Any = None, *, carried: str = "the win rates") -> Flag | None:
    """A flag when the judges' preference for the answer shown first (share of decisive verdicts)
    is beyond chance: its interval excludes 0.5 (`carried`: what the bias is in, for the sentence)."""
    b, a, c = _num(bias), _num(lo), _num(hi)
    if b is None or a is None or c is None or a <= 0.5 <= c:
        return None
    side = "first" if a > 0.5 else "second"
    count = f" of {int(n)} decisive verdicts" if _num(n) else ""
    return Flag("position_bias", f"the judges prefer the answer shown {side}: {b:.0%} [{a:.0%}, {c:.0%}]{count} "
                                 f"went to the answer shown first (0.5 = no bias); {carried} carry that bias")


def degenerate_judge_flag(judge: str, ratings: Iterable[Any]) -> Flag | None:
    """A flag for a judge whose ratings are all the same (it tells the models apart not at all)."""
    values = [v for v in (_num(r) for r in ratings) if v is not None]
    if len(values) > 1 and max(values) - min(values) < 1e-6:
        return Flag("degenerate_judge", f"judge {judge} rates every model {values[0]:.0f}: it tells them apart "
                                        "not at all (every decision a tie, or none usable)")
    return None


def flags_text(flags: Sequence[Flag]) -> str:
    """The flags as one sentence each, joined (for a tooltip or a note)."""
    return " ".join(f"{f.mark} {f.text[0].upper()}{f.text[1:]}." for f in flags)


def n_of(results: Mapping[str, Any], n: Any, *, items: int | None = None) -> str:
    """The n behind a number and what it is out of: '12', '10 of 12' (items failed or abstained),
    '12 of 56' (`limit` ran the first 12 of the set's 56), '10 of 12 (limit: 12 of 56)'. The items
    are `n_items` (an item answered k times under repeats counts once), else the rows."""
    total = items or results.get("n_items") or results.get("n")
    available = _num(results.get("n_available"))
    text = f"{n}" if not total or n == total else f"{n} of {total}"
    if available and total and available > total:
        text += f" of {int(available)}" if n == total else f" (limit: {total} of {int(available)})"
    return text


# -- verdict cards -----------------------------------------------------------------------------
def task_card(results: Mapping[str, Any], metric: str, m: Mapping[str, Any] | None, *,
              label: str | None = None, better: str = "higher", items: int | None = None) -> str:
    """The card of one task result: what was measured, the headline with its interval and `n of N`,
    the baseline when there is one, and the trust flags."""
    who = label or configuration_name(str(results.get("model")), (results.get("params") or {}).get("run_name"))
    task = results.get("task")
    if not m or _num(m.get("value")) is None:
        return f"{task} · {who}: no {metric} value ({int(results.get('n_failed') or 0)} items failed; see the failures)."
    of = "n = " + n_of(results, m.get("n"), items=items)
    parts = [f"{task} · {who}: {metric} {fmt_ci(m.get('value'), m.get('ci_low'), m.get('ci_high'))}, {of} "
             f"({better} is better)."]
    base = (results.get("baselines") or {}).get("most_frequent")
    if base and _num(base.get("value")) is not None:
        lo = _num(m.get("ci_low"))
        beaten = lo is not None and lo > float(base["value"])
        parts.append(f"Always answering \"{base.get('answer')}\" scores {float(base['value']):.2f}: "
                     + ("the model beats it." if beaten else "the model does not beat it."))
    flags = score_flags(results, metric)
    if flags:
        parts.append(flags_text(flags))
    return " ".join(parts)


def comparison_card(row: Mapping[str, Any], *, mdd: Any = None, alpha: float = 0.05) -> str:
    """One paired comparison (a row of the summary's paired tests) in a sentence."""
    task, metric = row.get("task"), row.get("metric")
    a, b = row.get("model_a"), row.get("model_b")
    n = row.get("n_shared")
    d, lo, hi = _num(row.get("difference")), _num(row.get("ci_low")), _num(row.get("ci_high"))
    p = _num(row.get("p_holm"))
    if row.get("note") and d is None:
        return f"On {task}, {a} and {b} cannot be compared: {row['note']}."
    diff = f"difference {d:+.2f}" + (f" [{lo:+.2f}, {hi:+.2f}]" if lo is not None and hi is not None else "")
    if p is not None and p < alpha and d:
        winner, loser = (a, b) if d > 0 else (b, a)
        return (f"On {task}, {winner} is better than {loser} on {metric} ({diff}, n = {n}; "
                f"Holm-adjusted p = {p:.2g}).")
    detect = _num(mdd)
    can = (f"; the smallest difference this n can detect is {detect:.2f}" if detect is not None
           else "; this n is too small to detect any difference")
    return f"On {task}, {a} and {b} cannot be told apart on {metric} ({diff}, n = {n}{can})."


def comparisons_card(tests: Sequence[Mapping[str, Any]], *, alpha: float = 0.05) -> list[str]:
    """Per pair of models across tasks: 'A is better than B on 3 of 6 tasks (Holm-adjusted); ...'."""
    pairs: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in tests:
        key = tuple(sorted((str(row.get("model_a")), str(row.get("model_b")))))
        pairs.setdefault(key, []).append(row)  # type: ignore[arg-type]
    lines, apart = [], []
    for (x, y), rows in pairs.items():
        wins = {x: 0, y: 0}
        for r in rows:
            d, p = _num(r.get("difference")), _num(r.get("p_holm"))
            if d and p is not None and p < alpha:
                winner = r["model_a"] if d > 0 else r["model_b"]
                wins[str(winner)] += 1
        tied = len(rows) - wins[x] - wins[y]
        if not wins[x] and not wins[y]:
            apart.append((x, y, len(rows)))
            continue
        said = [f"{w} is better than {o} on {wins[w]} of {len(rows)} task(s)" for w, o in ((x, y), (y, x)) if wins[w]]
        lines.append("; ".join(said) + f" (Holm-adjusted); no difference shown on {tied}.")
    if len(apart) == 1:
        x, y, k = apart[0]
        lines.append(f"{x} and {y} cannot be told apart on any of {k} task(s) (Holm-adjusted, alpha {alpha}).")
    elif apart:
        # Many pairs that show no difference read as one sentence, not one each (a wall of repeats).
        listed = "; ".join(f"{x} / {y} ({k} task{'s' if k != 1 else ''})" for x, y, k in apart)
        lines.append(f"{len(apart)} pairs cannot be told apart on any task they share (Holm-adjusted, "
                     f"alpha {alpha}): {listed}.")
    return lines


def win_rate_card(name_a: str, name_b: str, majority: Mapping[str, Any], *, alpha: float = 0.05,
                  bias: Flag | None = None) -> str:
    """A win rate's conclusion: the majority vote's sign test, in words, with the position-bias flag."""
    n = int(_num(majority.get("n")) or 0)
    if not n:
        return f"{name_a} vs {name_b}: no question received a usable verdict."
    p = _num(majority.get("sign_test_p"))
    wins_a, wins_b = int(_num(majority.get("wins_a")) or 0), int(_num(majority.get("wins_b")) or 0)
    ties = int(_num(majority.get("ties")) or 0)
    head = f"{name_a} wins {wins_a}, {name_b} wins {wins_b}, {ties} ties of {n} questions (the judges' majority)"
    if p is not None and p < alpha:
        better = name_a if wins_a > wins_b else name_b
        text = f"{better} is better: {head}; sign test p = {p:.2g}."
    else:
        text = f"{name_a} and {name_b} cannot be told apart: {head}" + (f"; sign test p = {p:.2g}." if p is not None
                                                                          else "; no decisive verdict.")
    return text + (f" {flags_text([bias])}" if bias else "")


def ranks_text(rows: Sequence[Mapping[str, Any]]) -> str:
    """Ranks as a reader reads them: models sharing a rank are listed together, '1= a, b; 3. c'."""
    by_rank: dict[int, list[str]] = {}
    for r in rows:
        by_rank.setdefault(int(r["rank"]), []).append(str(r["model"]))
    parts = []
    for rank in sorted(by_rank):
        models = by_rank[rank]
        parts.append(f"{rank}{'=' if len(models) > 1 else '.'} {', '.join(models)}")
    return "; ".join(parts)
