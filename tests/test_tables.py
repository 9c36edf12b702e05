"""Clean tables: `report.table_html`, the one HTML form of a table on every page (escaped, no 0..n
index, a dash with its reason for a missing value), and every DataFrame a notebook shows drawn by it."""
from __future__ import annotations

import numpy as np
import pandas as pd
from bs4 import BeautifulSoup

from evekit.report import MISSING, MISSING_REASONS, FullText, shown, table_html


def _soup(page: str) -> BeautifulSoup:
    return BeautifulSoup(page, "html.parser")


def test_table_html_escapes_every_label_and_cell():
    df = pd.DataFrame({"<b>col</b>": ["<script>alert(1)</script>", "a & b"]}, index=pd.Index(["<i>x</i>", "y"], name="<u>k</u>"))
    page = table_html(df)
    assert "<script>" not in page and "<b>" not in page and "<i>" not in page and "<u>" not in page
    soup = _soup(page)
    assert [th.get_text() for th in soup.select("thead th")] == ["<u>k</u>", "<b>col</b>"]
    assert [td.get_text() for td in soup.select("tbody td")] == ["<script>alert(1)</script>", "a & b"]
    assert [th.get_text() for th in soup.select("tbody th")] == ["<i>x</i>", "y"]


def test_table_html_hides_an_unnamed_integer_index_and_keeps_a_meaningful_one():
    plain = _soup(table_html(pd.DataFrame({"v": [1, 2, 3]})))
    assert [th.get_text() for th in plain.select("th")] == ["v"] and not plain.select("tbody th")
    shuffled = _soup(table_html(pd.DataFrame({"v": [1, 2]}, index=[7, 3])))  # unnamed integers: still pandas' rows
    assert not shuffled.select("tbody th")
    named = _soup(table_html(pd.DataFrame({"v": [1, 2]}, index=pd.Index([7, 3], name="doc_id"))))
    assert [th.get_text() for th in named.select("tbody th")] == ["7", "3"]
    labels = _soup(table_html(pd.DataFrame({"count": [12, 0]}, index=["items", "failed"])))
    assert [th.get_text() for th in labels.select("tbody th")] == ["items", "failed"]


def test_table_html_shows_missing_values_as_a_dash_with_the_reason():
    df = pd.DataFrame({"value": [0.5, np.nan], "n": pd.array([3, None], dtype="Int64"), "note": [None, "x"]})
    soup = _soup(table_html(df, missing={"value": "undefined: no item answered"}))
    cells = soup.select("tbody td")
    assert "NaN" not in soup.get_text() and "<NA>" not in soup.get_text() and "None" not in soup.get_text()
    assert [c.get_text() for c in cells] == ["0.5", "3", MISSING, MISSING, MISSING, "x"]
    assert cells[3]["title"] == "undefined: no item answered" and "title" not in cells[4].attrs
    # The reason can travel with the table (what a runner's step returns to a notebook cell).
    table = shown(df)
    table.attrs[MISSING_REASONS] = "does not apply"
    assert all(td["title"] == "does not apply" for td in _soup(table_html(table)).select("td.missing"))


def test_table_html_gives_a_column_one_number_format():
    soup = _soup(table_html(pd.DataFrame({"value": [0.5, 0.583333333, 1.0], "rating": [1000.0, 1012.0, 990.0]})))
    assert [td.get_text() for td in soup.select("tbody td")] == ["0.5000", "1000", "0.5833", "1012", "1.0000", "990"]


def test_table_html_says_how_many_rows_it_left_out():
    soup = _soup(table_html(pd.DataFrame({"x": range(100)}), max_rows=5))
    assert len(soup.select("tbody tr")) == 6 and "95 more rows (of 100)" in soup.get_text()


def test_full_text_tables_are_table_html_wrapped_and_whole():
    long = "word " * 400
    page = FullText(pd.DataFrame({"answer": [long, None]}), caption="<b>cap</b>").to_html()
    soup = _soup(page)
    assert soup.select_one("td").get_text() == long and soup.select_one("caption").get_text() == "<b>cap</b>"
    assert "pre-wrap" in page and soup.select("td")[1].get_text() == MISSING


def test_a_notebook_shows_every_dataframe_through_table_html():
    from IPython.core.interactiveshell import InteractiveShell

    from evekit.report import use_table_html

    shell = InteractiveShell.instance()
    try:
        assert use_table_html()
        data, _ = shell.display_formatter.format(pd.DataFrame({"v": [1.0, np.nan]}))
        assert 'class="evekit-table"' in data["text/html"] and 'class="dataframe"' not in data["text/html"]
        assert "NaN" not in data["text/html"] and "NaN" in data["text/plain"]  # plain text stays pandas'
    finally:
        InteractiveShell.clear_instance()
