"""`<run>/index.html`: every report of a run with its headline number and failures.

What is listed comes from the run.json records the notebooks' save steps wrote (never from
guessing folder layouts), each kind saying how its runs read on the page (`RunKind.index_row`,
`RunKind.headline`). Everything a dataset, model or judge wrote is escaped: text, never markup.
"""
from __future__ import annotations

import html
import json
import os
from datetime import datetime, timezone
from pathlib import Path

import evekit
from evekit.cards import flags_text
from evekit.demo import DEMO_MODEL_NOTE, demo_judge_note, demo_judges, is_demo_model
from evekit.glossary import entry, glossary_html
from evekit.report import write_text_atomic
from evekit.runs.records import RunRecord, all_calls_failed, find_run_records, read_attempts, stale_reasons
from evekit.runs.registry import KINDS
from evekit.tracking import describe

__all__ = ["write_index"]


def _record_demo_judges(record: RunRecord) -> list[str]:
    """Demo-model judges behind a run's scores (from the parameters its results record)."""
    for name in ("metrics.json", "results.json"):
        try:
            data = json.loads((record.dir / name).read_text())
        except (OSError, ValueError):
            continue
        return demo_judges((data.get("params") or {}).get("judges") or [])
    return []


def _other_runs_list(run_dir: Path, batch_runs: "list[Path] | tuple[Path, ...]") -> str:
    """'Other runs of this batch' with a link to each one's index.html (relative, so a copied
    output folder keeps working)."""
    others = sorted({Path(r).resolve() for r in batch_runs} - {run_dir.resolve()})
    if not others:
        return ""
    items = "".join(
        f'<li><a href="{html.escape(Path(os.path.relpath(o / "index.html", run_dir.resolve())).as_posix())}">'
        f"{html.escape(o.name)}</a></li>" for o in others)
    return f"<h2>Other runs of this batch</h2>\n<ul>{items}</ul>"


METRIC_CELL = 2  # the headline metric's name in a task row
VALUE_CELL = 3  # the headline value's cell in a task row: where its trust flags go


UNPARSED_CELL, FAILED_CELL = 5, 6  # counts that link to the report's explorer, filtered on them
# Where a number of the index leads in its report: the metrics (an anchor every notebook's metrics
# heading carries) and the item explorer filtered on an outcome (`evekit.explorer`).
METRICS_ANCHOR = "#metrics"
EXPLORER_OUTCOME = {UNPARSED_CELL: "#explorer?outcome=unparsed", FAILED_CELL: "#explorer?outcome=failed"}


def _linked(text: str, href: str | None) -> str:
    """Escaped text, a link to `href` (already escaped) when there is one."""
    return f'<a href="{href}">{html.escape(text)}</a>' if href else html.escape(text)


def _cell(text: str, flags: tuple = (), href: str | None = None) -> str:
    """A table cell of escaped text (a link to `href` when given); flagged: the mark, with the
    reasons as its tooltip."""
    if not flags:
        return f"<td>{_linked(text, href)}</td>"
    why = flags_text(flags)
    kinds = " ".join(sorted({f.kind for f in flags}))
    return (f'<td class="flagged" data-flags="{html.escape(kinds)}">{_linked(text, href)} '
            f'<span class="flag" title="{html.escape(why)}">{html.escape(flags[0].mark)}</span></td>')


def _tracked(record: RunRecord) -> str:
    """Where the run was tracked (run.json's `tracking`): a link to the tracker run when it has a web
    address, else the tracker and run id with the whole line as the tooltip; "" when not tracked."""
    status = record.details.get("tracking")
    text = describe(status)
    if not text:
        return ""
    url = status.get("url")
    label = f"{status['backend']} run" if status.get("status") != "failed" else f"{status['backend']} failed"
    if isinstance(url, str) and url.startswith(("http://", "https://")):
        return f' · <a href="{html.escape(url)}" title="{html.escape(text)}">{html.escape(label)}</a>'
    return f' · <span class="tracked" title="{html.escape(text)}">{html.escape(label)}</span>'


def _status_mark(record: RunRecord, stale: dict[Path, str]) -> str:
    """The marks of a run whose number is not a current result: every call failed (no score), or
    stale (`runs.records.stale_reason`: a later attempt failed or wrote elsewhere, inputs changed)."""
    marks = []
    failed = all_calls_failed(record)
    if failed:
        marks.append(f'<strong class="allfailed" title="{html.escape(failed)}">ALL CALLS FAILED: '
                     f"{html.escape(failed)}</strong>")
    why = stale.get(record.dir)
    if why:
        marks.append(f'<span class="stale" title="{html.escape(why)}">\u23f3 {html.escape(why)}</span>')
    return " ".join(marks)


def _older_than_what_they_read(records: list[RunRecord], stale: dict[Path, str]) -> dict[Path, str]:
    """Runs of a kind that reads every result of its run (the summary: `RunKind.reads` is None) made
    before some result they read was written again: stale too."""
    out = {}
    for record in records:
        kind = KINDS.get(record.kind)
        if kind is None or kind.reads is not None or record.dir in stale:
            continue
        newer = sorted(r.dir.name for r in records if r.dir != record.dir and str(r.created) > str(record.created)
                       and KINDS.get(r.kind) is not None and KINDS[r.kind].reads is not None)
        if newer:
            out[record.dir] = (f"stale: from {record.created}; written again since: {', '.join(newer[:3])}"
                               + (f" and {len(newer) - 3} more" if len(newer) > 3 else ""))
    return out


def _marked_card(card: str, record: RunRecord, stale: dict[Path, str]) -> str:
    """A run's verdict in words, with why it is not current when it is not."""
    why = all_calls_failed(record) or stale.get(record.dir)
    return f"{card} [{why}]" if card and why else card


def write_index(run_dir: Path, batch_runs: "list[Path] | tuple[Path, ...]" = ()) -> Path:
    """`<run_dir>/index.html`; `failed/` holds the batch runner's reports of notebooks that failed.
    `batch_runs`: the run folders of the same `evekit run` (this one may be among them); the index
    links the indexes of the others."""
    run_dir = Path(run_dir)
    others = _other_runs_list(run_dir, batch_runs)
    models: set[str] = set()
    judges: set[str] = set()  # judges that are the demo model, behind any judged score of the run
    records, unreadable = find_run_records(run_dir)
    stale = stale_reasons(run_dir, records)
    stale.update(_older_than_what_they_read(records, stale))
    rows = [f"<tr><td colspan='8'>unreadable: {html.escape(str(p.relative_to(run_dir)))}</td></tr>"
            for p in unreadable]
    extra = []
    cards: list[str] = []  # each run's verdict in words, first on the page
    # Kinds with a results row first (tasks), then the others in batch order (judge validation,
    # win rates and rankings, the summary).
    known = [r for r in records if r.kind in KINDS]
    # The run's own name (its folder's is made safe: `r<b>` is in `r_b_`), when its records agree on one.
    names = {r.run_name for r in known if r.run_name and r.run_name != "None"}
    name = names.pop() if len(names) == 1 else run_dir.name
    for record in sorted(known, key=lambda r: (KINDS[r.kind].index_row is None, KINDS[r.kind].phase, str(r.dir))):
        kind = KINDS[record.kind]
        judges.update(_record_demo_judges(record))
        report = record.dir / "report.html"
        href = html.escape(Path(os.path.relpath(report, run_dir)).as_posix())
        if kind.index_row is not None:
            try:
                row = kind.index_row(record, None)
            except ValueError:  # half-written or foreign file: list it, do not fail the index
                rows.append(f"<tr><td colspan='8'>unreadable: {html.escape(str(record.dir.relative_to(run_dir)))}"
                            "</td></tr>")
                continue
            models.add(row.cells[1])
            link = (f'<a href="{href}">report</a> · <a href="{href}#explorer">items</a>' if report.exists()
                    else "no report") + _tracked(record)

            def link_of(i: int, text: str) -> str | None:
                if not report.exists():
                    return None
                if i == VALUE_CELL:
                    return href + METRICS_ANCHOR
                if i in EXPLORER_OUTCOME and text.split(" ")[0] not in ("0", ""):
                    return href + html.escape(EXPLORER_OUTCOME[i])
                return None

            cells = [_cell(c, row.flags if i == VALUE_CELL else (), link_of(i, c)) for i, c in enumerate(row.cells)]
            mark = _status_mark(record, stale)
            if mark:
                cells[VALUE_CELL] = cells[VALUE_CELL][:-len("</td>")] + f" {mark}</td>"
            term = entry(row.cells[METRIC_CELL])
            if term:  # the metric's name links to its definition
                cells[METRIC_CELL] = (f'<td><a href="#g-{html.escape(term)}">{html.escape(row.cells[METRIC_CELL])}'
                                      '</a></td>')
            rows.append("<tr>" + "".join(cells) + f"<td>{link}</td></tr>")
            card = _marked_card(kind.card(record), record, stale)
            if card:
                cards.append(f"<li>{html.escape(card)}</li>")
            continue
        label = kind.label(record)
        note = kind.headline(record)
        card = _marked_card(kind.card(record), record, stale)
        if card:
            cards.append(f"<li>{html.escape(card)}</li>")
        target = f'<a href="{href}">{html.escape(label)}</a>' if report.exists() else f"{html.escape(label)} (no report)"
        # A kind without a headline (the summary) has no number to link: no empty link.
        mark = _status_mark(record, stale)
        extra.append(f"<li>{target} {_linked(note, href + METRICS_ANCHOR if report.exists() and note else None)}"
                     f"{_tracked(record)}{' ' + mark if mark else ''}</li>")
    attempts = read_attempts(run_dir)
    for report in sorted(run_dir.glob("failed/*/report.html")):
        rel = report.relative_to(run_dir)
        latest = attempts.get(rel.parts[1]) or {}
        if latest.get("status") == "passed":  # a failure its parameter file has since run past
            extra.append(f'<li><a href="{html.escape(rel.as_posix())}">earlier failure: {html.escape(rel.parts[1])}</a>'
                         f" (run again and passed, {html.escape(str(latest.get('finished')))})</li>")
            continue
        extra.append(f'<li><a href="{html.escape(rel.as_posix())}">FAILED: {html.escape(rel.parts[1])}</a></li>')
    demo_note = f" {html.escape(DEMO_MODEL_NOTE)}" if any(is_demo_model(m) for m in models) else ""
    if judges:
        demo_note += f" {html.escape(demo_judge_note(sorted(judges)))}"
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>evekit run {html.escape(name)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:90em}}table{{border-collapse:collapse}}
td:nth-child(4){{white-space:nowrap}}
td,th{{border:1px solid #ccc;padding:.3em .6em;text-align:left}}th{{background:#eee}}
.flag{{color:#b35900;font-weight:bold;cursor:help}}.stale{{color:#8a6d00}}.allfailed{{color:#b00}}ul.cards li{{margin:.3em 0}}</style></head>
<body><h1>evekit run <code>{html.escape(name)}</code></h1>
{"<h2>In words</h2><ul class='cards'>" + "".join(cards) + "</ul>" if cards else ""}
<p>Headline metric per task with its 95% confidence interval; <em>n</em>: the items behind that metric
(of the run's items, when some were left out). <em>baseline</em>: the accuracy of always giving the most
frequent gold answer, where items have one gold letter or label. <em>unparsed</em>: answers the
model gave in an unusable form (scored wrong); <em>failed</em>: infrastructure failures (excluded from the
metric). <span class="flag">\u26a0</span>: a number not to read at face value (hover for why).{demo_note}</p>
<table><tr><th>task</th><th>model</th><th>metric</th><th>value [95% CI]</th><th>n</th><th>unparsed</th>
<th>failed</th><th>baseline: always the most frequent answer</th><th></th></tr>
{''.join(rows)}
</table>
<ul>{''.join(extra)}</ul>
{others}
<h2>Glossary</h2>
{glossary_html()}
<p><small>evekit {evekit.__version__}, written {datetime.now(timezone.utc).isoformat(timespec='seconds')}</small></p>
</body></html>
"""
    return write_text_atomic(run_dir / "index.html", page)
