"""How a run's files and tables are written, for every notebook kind: JSON that is safe to write,
parameters without secrets, files written whole or not at all, and tables shown as text.

Everything a dataset, a model or a judge wrote is text on every page: tables are rendered with
their cells HTML-escaped (`table_html`, the one HTML form of a table; `FullText`, `shown`), never as
markup. In a notebook every DataFrame is shown through `table_html` once a runner is built
(`use_table_html`): no pandas 0..n index column, no `NaN`.
"""
from __future__ import annotations

import html
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from evekit.atomic import write_text_atomic  # noqa: F401 - its home is evekit.atomic; kept here for callers

# How the tables a user reads show a value that does not apply or is missing (never None / NaN).
MISSING = "\u2013"
# Parameter names that could carry a secret if a user put one there by mistake.
SECRET_HINTS = ("api_key", "token", "secret", "password")


def json_safe(value: Any) -> Any:
    """JSON-safe copy: NaN/inf become None, numpy scalars become Python numbers."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def public_params(params: dict[str, Any]) -> dict[str, Any]:
    """Parameters as recorded in results: only names of key variables, never values."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if any(h in key.lower() for h in SECRET_HINTS) and not key.endswith("_env"):
            continue
        if key == "judges" and isinstance(value, list):
            value = [{k: v for k, v in dict(j).items() if k != "api_key"} for j in value]
        out[key] = value
    return json_safe(out)


def format_metric(m: dict[str, Any] | None) -> str:
    """'0.550 [0.40, 0.70]': value with its 95% interval, '–' when there is none."""
    if not m or m.get("value") is None:
        return "–"
    lo, hi = m.get("ci_low"), m.get("ci_high")
    ci = f" [{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else ""
    return f"{m['value']:.3f}{ci}"




# Markdown's punctuation that could format text, make a link or open math (`$`), backslash-escaped.
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+\-.!|~$])")


def markdown_text(value: Any) -> str:
    """`value` as Markdown that shows it as text: no emphasis, link, heading, math or HTML comes out
    of it (nbconvert renders Markdown with raw HTML allowed). For names a user or a dataset chose
    (run, model, file) inside a notebook's or report's Markdown."""
    s = _MARKDOWN_PUNCTUATION.sub(r"\\\1", str(value))
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def shown(table: pd.DataFrame) -> pd.DataFrame:
    """`table` as a user reads it: every missing value (None, NaN, pd.NA) spelled `MISSING`."""
    return table.astype(object).where(table.notna(), MISSING)


class FullText:
    """A table whose text is shown in full, wrapped, never cut with "..." (in the notebook and in the
    HTML report made from it), every cell escaped (text, never markup); missing values spelled
    `MISSING`. `data` is the DataFrame."""

    STYLE = {"white-space": "pre-wrap", "word-break": "break-word", "text-align": "left",
             "vertical-align": "top", "max-width": "40em"}

    def __init__(self, table: pd.DataFrame, caption: str | None = None) -> None:
        self.data = table
        self.caption = caption

    def to_html(self) -> str:
        return table_html(self.data, caption=self.caption, index=False, cell_style=self.STYLE)

    def _repr_html_(self) -> str:
        return self.to_html()

    def __repr__(self) -> str:  # plain text: every cell in full too
        return shown(self.data).to_string(index=False, max_colwidth=None)

    def __len__(self) -> int:
        return len(self.data)


# -- tables as HTML ------------------------------------------------------------------------------
# Where a table says why its empty cells are empty: `table.attrs[MISSING_REASONS]`, a sentence for
# every column or {column: sentence} (pandas keeps `attrs` through most operations).
MISSING_REASONS = "evekit_missing"
TABLE_CLASS = "evekit-table"


def _is_missing(value: Any) -> bool:
    if value is None or (isinstance(value, str) and value == MISSING):
        return True
    if isinstance(value, (list, tuple, dict, set)) or hasattr(value, "__len__") and not isinstance(value, str):
        return False
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _plain_index(index: pd.Index) -> bool:
    """An index that says nothing (pandas' 0..n, or any unnamed integer labels): not shown."""
    if any(name is not None for name in index.names):
        return False
    levels = index.levels if isinstance(index, pd.MultiIndex) else [index]
    return all(pd.api.types.is_integer_dtype(level) for level in levels)


def _label(value: Any) -> str:
    """A column or index label as text: a tuple's parts joined (a MultiIndex), '' for None."""
    if isinstance(value, tuple):
        return " \u00b7 ".join(_label(v) for v in value if _label(v))
    return "" if value is None or _is_missing(value) else str(value)


def _decimals(values: pd.Series, digits: int) -> int | None:
    """The decimals a column's floats are shown with: as many as its most precise value needs, at
    most `digits`, so a column reads 0.5000 / 0.5833 (one format per column); None: no floats."""
    floats = [float(v) for v in values if isinstance(v, float) and math.isfinite(v)]
    if not floats:
        return None
    need = 0
    for v in floats:
        text = f"{round(v, digits):.{digits}f}".rstrip("0")
        need = max(need, len(text.split(".")[1]) if "." in text else 0)
    return need


def _text(value: Any, decimals: int | None) -> str:
    if hasattr(value, "item") and not isinstance(value, (str, bytes)) and getattr(value, "ndim", 0) == 0:
        value = value.item()  # numpy scalars as Python's
    if isinstance(value, float) and decimals is not None and math.isfinite(value):
        return f"{value:.{decimals}f}"
    return str(value)


def table_html(table: pd.DataFrame, *, caption: str | None = None, missing: str | Mapping[str, str] | None = None,
               index: bool | None = None, max_rows: int | None = None, digits: int = 4,
               cell_style: Mapping[str, str] | None = None) -> str:
    """`table` as an HTML table for a report: every label and cell escaped (text, never markup); a
    missing value (None, NaN, NA, `MISSING`) shown as `MISSING` with the reason as its tooltip when
    one is known (`missing`: one sentence, or {column: sentence}; default `table.attrs[MISSING_REASONS]`);
    the index shown as row headers unless it says nothing (`index` None: hidden when unnamed and
    integer, pandas' 0..n); floats with one number of decimals per column (at most `digits`);
    at most `max_rows` rows, with a last row saying how many were left out."""
    if missing is None:
        missing = table.attrs.get(MISSING_REASONS)
    show_index = (not _plain_index(table.index)) if index is None else index
    # Cell styles as one rule for the table's class (not repeated on every cell).
    style = "".join(f"{k}:{v};" for k, v in (cell_style or {}).items())
    klass = f"{TABLE_CLASS} {TABLE_CLASS}-styled" if style else TABLE_CLASS
    rule = f"<style>table.{TABLE_CLASS}-styled td{{{html.escape(style)}}}</style>" if style else ""
    td = "<td"
    columns = [_label(c) for c in table.columns]
    decimals = [_decimals(table.iloc[:, i], digits) for i in range(table.shape[1])]
    rows = table if max_rows is None or len(table) <= max_rows else table.head(max_rows)

    def reason(column: Any) -> str | None:
        if isinstance(missing, str):
            return missing
        if isinstance(missing, Mapping):
            return missing.get(column) or missing.get(_label(column))
        return None

    head = []
    if show_index:
        names = [_label(n) for n in table.index.names]
        if not any(names) and table.columns.name is not None:
            names[-1] = _label(table.columns.name)  # pandas' corner: the columns' name
        head += [f'<th scope="col">{html.escape(n)}</th>' for n in names]
    head += [f'<th scope="col">{html.escape(c)}</th>' for c in columns]
    body = []
    for key, values in zip(rows.index, rows.itertuples(index=False, name=None)):
        cells = []
        if show_index:
            keys = key if isinstance(key, tuple) else (key,)
            cells += [f'<th scope="row">{html.escape(MISSING if _is_missing(k) else _label(k))}</th>' for k in keys]
        for i, value in enumerate(values):
            if _is_missing(value):
                why = reason(table.columns[i])
                title = f' title="{html.escape(why)}"' if why else ""
                cells.append(f'{td} class="missing"{title}>{MISSING}</td>')
            else:
                cells.append(f"{td}>{html.escape(_text(value, decimals[i]))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    if len(rows) < len(table):
        width = len(head)
        body.append(f'<tr class="more"><td colspan="{width}">\u2026 {len(table) - len(rows)} more rows '
                    f"(of {len(table)}) not shown</td></tr>")
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return (f'{rule}<table class="{klass}">{cap}<thead><tr>{"".join(head)}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def use_table_html() -> bool:
    """In a running IPython kernel (a notebook): show every pandas DataFrame through `table_html`
    (escaped, no 0..n index, no NaN), so a report's tables are clean whichever step printed them.
    False, doing nothing, outside IPython. Plain text (what nbval and a terminal read) stays pandas'."""
    import sys

    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    if shell is None or not hasattr(shell, "display_formatter"):
        return False
    shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame, _shown_frame)
    return True


def _shown_frame(table: pd.DataFrame) -> str:
    return table_html(table, max_rows=pd.get_option("display.max_rows"))
