"""report.html: an executed notebook rendered without code, with a header naming the run."""
from __future__ import annotations

import html
import json
import re
import threading
from pathlib import Path
from typing import Any

from evekit.atomic import write_text_atomic
from evekit.batch.paramfiles import notebook_name
from evekit.glossary import with_glossary
from evekit.paths import display_path
from evekit.report import markdown_text
from evekit.tracking import describe

# report.html loads nothing from the network: nbconvert's lab template, less the blocks that pull
# require.js, MathJax, Mermaid and the Jupyter widgets' renderer from CDNs (the reports use none of
# them: their tables, figures and the item explorer are inline HTML, PNG and vanilla JS; a widget,
# such as a progress bar, shows its text form). Everything else of the template stays.
OFFLINE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""

# A reproduce line in a notebook's markdown: `papermill notebooks/x.ipynb out.ipynb -f params/...yaml`.
_REPRODUCE = re.compile(r"(papermill\s+\S*?(?P<nb>[\w.-]+)\.ipynb\s+\S+\s+-f\s+)(?P<file>[^\s`'\"<>]+)")


def report_identity(executed_notebook: Path, *, params_file: Path | None = None,
                    record_dir: Path | None = None) -> dict[str, Any]:
    """What a report is: run name, notebook, kind, its subject (the model, "a vs b", the judges:
    `RunKind.subject`), few-shot count (when it has one) and the parameter file it ran with, from
    the run.json record and results.json of `record_dir`, then the parameters papermill stored in
    the executed notebook."""
    import nbformat

    from evekit.runs.records import RUN_RECORD, RunRecord
    from evekit.runs.registry import KINDS

    nb = nbformat.read(executed_notebook, as_version=4)
    params = dict(nb.metadata.get("papermill", {}).get("parameters") or {})
    record: dict[str, Any] = {}
    results: dict[str, Any] = {}
    if record_dir is not None:
        for name, target in ((RUN_RECORD, record), ("results.json", results)):
            try:
                target.update(json.loads((Path(record_dir) / name).read_text()))
            except (OSError, ValueError):
                pass
    res_params = results.get("params") or {}
    notebook = record.get("notebook") or (notebook_name(params_file) if params_file else executed_notebook.stem)
    fewshot = res_params.get("num_fewshot", params.get("num_fewshot"))
    kind = KINDS.get(str(record.get("kind")))
    subject = results.get("model") or params.get("model_name")
    if kind is not None and record_dir is not None:
        rec = RunRecord(dir=Path(record_dir), kind=kind.name, notebook=str(notebook), run_name=str(record.get("run_name")),
                        files=tuple(record.get("files") or ()), created=str(record.get("created")),
                        details={k: v for k, v in record.items() if k not in ("kind", "notebook", "run_name",
                                                                               "files", "created")})
        subject = kind.subject(rec, params) or subject
    card = ""
    if kind is not None and record_dir is not None:
        card = kind.card(rec)
    return {"run_name": record.get("run_name") or params.get("run_name"), "notebook": notebook, "card": card,
            "tracking": record.get("tracking"),
            "kind": record.get("kind"), "model": subject,
            "num_fewshot": fewshot if isinstance(fewshot, int) else None,
            "params_file": display_path(params_file) if params_file is not None else None}


def _code(value: Any) -> str:
    """`value` in a code span of Markdown, shown as text whatever it holds (a backtick included)."""
    return f"<code>{markdown_text(value)}</code>"


def report_title(identity: dict[str, Any]) -> str:
    """'demo-5shot · open_ended · smollm2-135m-instruct · 5-shot'."""
    parts = [identity.get("run_name"), identity.get("notebook"), identity.get("model")]
    if identity.get("num_fewshot") is not None:
        parts.append(f"{identity['num_fewshot']}-shot")
    return " · ".join(str(p) for p in parts if p)


def render_html(executed_notebook: Path, html_path: Path, *, params_file: Path | None = None,
                record_dir: Path | None = None) -> None:
    """The executed notebook as HTML without code cells (what readers of the report need).

    A header names the run, notebook, model and few-shot count, and how to reproduce it with the
    parameter file it really ran with; reproduce lines in the notebook's own text are corrected
    to that file (the notebook's text names its default parameter file). The first use of each
    glossary term is linked to its entry, which the page's foot lists (`glossary.with_glossary`).
    """
    import nbformat
    from nbformat.v4 import new_markdown_cell

    nb = nbformat.read(executed_notebook, as_version=4)
    identity = report_identity(executed_notebook, params_file=params_file, record_dir=record_dir)
    title = report_title(identity) or html_path.parent.name
    # Names (run, model, file) are the user's or a dataset's: text, never Markdown or HTML.
    lines = [f"# {markdown_text(title)}", ""]
    facts = [f"run {_code(identity['run_name'])}" if identity.get("run_name") else None,
             f"notebook {_code(identity['notebook'])}",
             f"model {_code(identity['model'])}" if identity.get("model") else None,
             f"{identity['num_fewshot']}-shot" if identity.get("num_fewshot") is not None else None]
    lines.append(" · ".join(f for f in facts if f))
    if identity.get("card"):  # the verdict in words, before anything else the report shows
        lines += ["", f'<p class="evekit-card"><strong>{html.escape(identity["card"])}</strong></p>']
    tracked = describe(identity.get("tracking"))
    if tracked:  # where the run was logged (evekit.tracking): a link when the tracker has a web address
        url = (identity.get("tracking") or {}).get("url")
        text = html.escape(tracked)
        if isinstance(url, str) and url.startswith(("http://", "https://")):
            text = text.replace(html.escape(url), f'<a href="{html.escape(url)}">{html.escape(url)}</a>')
        lines += ["", f'<p class="evekit-tracking">{text}</p>']
    if identity.get("params_file"):
        real = identity["params_file"]
        command = f"papermill notebooks/{identity['notebook']}.ipynb out.ipynb -f {real}"
        lines += ["", f"Reproduce: {_code(command)}"
                      + (" (with `evekit serve` running and `EVEKIT_SERVER_URL` exported, or "
                         f"{_code('evekit run --serve ' + real)})" if "demo" in Path(real).parts else "")]
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = _REPRODUCE.sub(
                    lambda m: m.group(1) + real if m.group("nb") == identity["notebook"] else m.group(0), cell.source)
    nb.cells.insert(0, new_markdown_cell("\n".join(lines)))
    body, _ = report_exporter().from_notebook_node(nb, resources={"metadata": {"name": title}})
    body = with_glossary(body)  # each term's first use linked to its entry at the page's foot
    html_path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(html_path, body)


# One exporter per thread (the batch renders from its job threads): its compiled templates are
# reused, where a new exporter compiles the lab template's ten files again (about 0.1-0.3 s a report).
_EXPORTERS = threading.local()


def report_exporter() -> Any:
    """nbconvert's HTMLExporter as report.html uses it: no code cells, no prompts, the lab template
    without its CDN scripts (`OFFLINE_TEMPLATE`). The same object for every call in one thread."""
    exporter = getattr(_EXPORTERS, "exporter", None)
    if exporter is None:
        from nbconvert import HTMLExporter

        exporter = _EXPORTERS.exporter = HTMLExporter(
            exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True,
            template_name="lab", raw_template=OFFLINE_TEMPLATE)
    return exporter


def warm_html_exporter() -> threading.Thread:
    """Import nbconvert and render one empty notebook in a background thread: the first report
    costs about 2.5 s of imports and template loading, which this moves off the first notebook's
    way (the thread runs while the first kernels start)."""
    def warm() -> None:
        from nbformat.v4 import new_notebook

        report_exporter().from_notebook_node(new_notebook())

    thread = threading.Thread(target=warm, name="evekit-warm-html", daemon=True)
    thread.start()
    return thread

