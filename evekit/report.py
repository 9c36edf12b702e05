"""How a run's files and tables are written, for every notebook kind: JSON that is safe to write,
parameters without secrets, files written whole or not at all, and tables shown as text.

Everything a dataset, a model or a judge wrote is text on every page: tables are rendered with
their cells HTML-escaped (`FullText`, `shown`), never as markup.
"""
from __future__ import annotations

import math
import os
import re
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

    def styler(self) -> Any:
        # A fixed uuid: the HTML (and so nbval's comparison of the committed notebooks) is the same
        # on every run, instead of pandas' random element ids. escape="html": data is text.
        styler = (shown(self.data).style.set_uuid("evekit").hide(axis="index")
                  .format(lambda v: f"{v:.4g}" if isinstance(v, float) else str(v), escape="html")
                  .format_index(escape="html", axis=1)  # a column name can come from data too
                  .set_properties(**self.STYLE))
        if self.caption:
            import html

            styler = styler.set_caption(html.escape(self.caption))
        return styler

    def to_html(self) -> str:
        return self.styler().to_html()

    def _repr_html_(self) -> str:
        return self.to_html()

    def __repr__(self) -> str:  # plain text: every cell in full too
        return shown(self.data).to_string(index=False, max_colwidth=None)

    def __len__(self) -> int:
        return len(self.data)
