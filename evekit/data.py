"""Loading EVE datasets (hub id or local file) into validated `Item`s.

A hub id goes through `datasets.load_dataset`. A local JSONL/Parquet/CSV file gives exactly the
rows `datasets.load_dataset(<format>, data_files=...)` gives, read the way datasets' own builders
read it (pyarrow's JSON reader, pandas' CSV reader, pyarrow's Parquet reader) without importing
`datasets` (0.7 s per notebook); a file datasets treats specially, or cannot read, goes through
datasets itself, errors included (`_read_local`). Rows are checked before anything is evaluated:
a row that cannot be used raises `DataError` naming the file, the row (0-based) and the column,
and a file is never half-loaded.
"""
from __future__ import annotations

import ast
import codecs
import contextlib
import io
import json
import math
import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence
from unittest import mock
from urllib.parse import urlparse

from evekit.errors import DataError, RowError
from evekit.parsing import normalize_text
from evekit.paths import REPO_ROOT

__all__ = [
    "DataError",
    "RowError",
    "Item",
    "Row",
    "Schema",
    "REPO_ROOT",
    "LOCAL_FORMATS",
    "resolve_local",
    "load_rows",
    "items_from_rows",
    "load_items",
    "parse_list",
    "apply_column_mapping",
    "TOPIC_COLUMN",
    "TOPIC_FIELD",
]

LOCAL_FORMATS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}
MAX_ERRORS_SHOWN = 5
# EVE's optional topic column (matched case-insensitively, as every column): carried by an item as
# `fields["topic"]`, so samples.csv can show it as EVE's `doc.Topic`. Never required.
TOPIC_COLUMN = "Topic"
TOPIC_FIELD = "topic"


class Schema(Protocol):
    """What the loader needs to know of a task (an `evekit.tasks.Task` is one): the loader
    imports no task, so the data layer stays below the task catalogue."""

    name: str
    hub_id: str
    columns: tuple[str, ...]
    column_roles: Mapping[str, str]
    column_mapping: Mapping[str, Any]
    prepare: Callable[["Row"], tuple[str, str, dict[str, Any]]]


@dataclass
class Item:
    """One evaluation item in a task-independent shape.

    `doc_id` is the row's 0-based index in the source (stable under `limit`), `target` the
    gold answer as a string (what samples.csv shows), `fields` the task-specific parts
    (choices, gold labels, context documents, spans ...), `source` the file or hub id.
    """

    doc_id: int
    question: str
    target: str
    fields: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    row: int = 0


class Row:
    """Case-insensitive access to one raw row, raising `RowError` for unusable values."""

    def __init__(self, data: Mapping[str, Any]):
        self.data = data
        self._keys = {str(k).strip().lower(): k for k in data}

    def has(self, column: str) -> bool:
        return column.lower() in self._keys

    def raw(self, column: str) -> Any:
        key = self._keys.get(column.lower())
        return None if key is None else self.data[key]

    def text(self, column: str, *, required: bool = True, strip: bool = True) -> str:
        """A string value; None/NaN/empty is an error when `required`, else ''.

        `strip=False` keeps surrounding whitespace (character offsets point into the text).
        """
        value = self.raw(column)
        if _is_missing(value):
            if required:
                raise RowError(column, "value is missing (null)")
            return ""
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise RowError(column, f"expected text, got {type(value).__name__} {_short(value)}")
        text = str(value)
        if required and not text.strip():
            raise RowError(column, "value is empty")
        return text.strip() if strip else text

    def listing(self, column: str) -> list[Any]:
        """A list value; CSV strings holding JSON or Python literals are parsed."""
        value = self.raw(column)
        if _is_missing(value):
            raise RowError(column, "value is missing (null)")
        return parse_list(value, column)

    def struct(self, column: str) -> Any:
        """A list or mapping value (e.g. Choices as {label, text}); strings are parsed."""
        value = self.raw(column)
        if _is_missing(value):
            raise RowError(column, "value is missing (null)")
        if isinstance(value, str):
            return _parse_literal(value, column)
        return value

    def flag(self, column: str) -> bool:
        """A boolean value; also true/false/yes/no/1/0 as text (CSV)."""
        value = self.raw(column)
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)) and not _is_missing(value) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in {"true", "false", "yes", "no", "1", "0"}:
            return value.strip().lower() in {"true", "yes", "1"}
        if _is_missing(value):
            raise RowError(column, "value is missing (null)")
        raise RowError(column, f"expected true/false, got {_short(value)}")


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _short(value: Any, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."


def _parse_literal(text: str, column: str) -> Any:
    for parse in (json.loads, ast.literal_eval):
        try:
            return parse(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    raise RowError(column, f"cannot parse {_short(text)} as a list (expected JSON or a Python literal)")


def parse_list(value: Any, column: str) -> list[Any]:
    """`value` as a list. Strings (CSV cells) are parsed as JSON, then as a Python literal."""
    if isinstance(value, str):
        value = _parse_literal(value, column)
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):
        value = value.tolist()  # numpy arrays from parquet/pandas
    if not isinstance(value, (list, tuple)):
        raise RowError(column, f"expected a list, got {type(value).__name__} {_short(value)}")
    return list(value)


# ---------------------------------------------------------------------------------------------
# Finding and reading the source


def resolve_local(dataset: str | os.PathLike[str]) -> Path | None:
    """The local file `dataset` names, or None when it looks like a hub id.

    A relative path is tried as given (the current directory), then relative to the
    repository root, so `data/open_ended.jsonl` works from a notebook in notebooks/. A name
    with a data-file suffix that exists nowhere is an error rather than a hub lookup.
    """
    path = Path(dataset).expanduser()
    candidates = [path] if path.is_absolute() else [path, REPO_ROOT / path]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    if path.suffix.lower() in LOCAL_FORMATS or path.is_absolute() or str(dataset).startswith("."):
        tried = ", ".join(str(c) for c in candidates)
        raise DataError(f"dataset file {str(dataset)!r} not found (tried {tried})")
    return None


@contextlib.contextmanager
def _quiet_datasets() -> Iterator[None]:
    """Silence datasets' progress bars and info logging for the duration, then restore."""
    import datasets

    bars_were_on = not datasets.utils.are_progress_bars_disabled()
    verbosity = datasets.logging.get_verbosity()
    datasets.logging.set_verbosity_error()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        datasets.logging.set_verbosity(verbosity)
        if bars_were_on:
            datasets.enable_progress_bars()


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Quick TCP check of the Hugging Face endpoint, so an offline machine fails in seconds."""
    import huggingface_hub.constants as hfc

    if getattr(hfc, "HF_HUB_OFFLINE", False):
        return False
    url = urlparse(getattr(hfc, "ENDPOINT", "https://huggingface.co"))
    try:
        with socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def _offline_mode() -> Iterator[None]:
    """Make datasets/huggingface_hub use only their local cache (as HF_HUB_OFFLINE=1 would)."""
    import datasets.config as dc
    import huggingface_hub.constants as hfc

    with contextlib.ExitStack() as stack:
        for module in (dc, hfc):
            if hasattr(module, "HF_HUB_OFFLINE"):
                stack.enter_context(mock.patch.object(module, "HF_HUB_OFFLINE", True))
        yield


def _hub_hint(example: str | None, source: str | None = None) -> str:
    example = example or "data/open_ended.jsonl"
    prepare = f"evekit prepare --dataset {source}" if source else "evekit prepare"
    return (f"run `{prepare}` on a machine with network first (offline runs and `evekit plan` then read its copy), or pass a local file in the "
            f"same schema, e.g. dataset={example!r} (JSONL, Parquet or CSV)")


def _check_text_file(path: Path) -> None:
    """A local JSON or CSV file must hold something and be UTF-8: say which line is not, instead of
    the bare decoding error the parser raises later (or never, for JSON Lines read by Arrow)."""
    raw = path.read_bytes()
    if not raw.strip():
        raise DataError(f"{path}: the file is empty (no rows)")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise DataError(f"{path}, line {line}, column {column}: not UTF-8 text (byte 0x{raw[exc.start]:02x}); "
                        f"save the file as UTF-8, e.g. `iconv -f latin1 -t utf-8 {path.name} > utf8_{path.name}`"
                        ) from exc


def _check_json_lines(path: Path, exc: Exception) -> None:
    """Name the first line of a JSON (Lines) file that does not parse; return when every line does."""
    text = path.read_text(encoding="utf-8-sig")
    stripped = text.lstrip()
    if stripped.startswith("["):  # one JSON document (an array of rows), not JSON Lines
        try:
            json.loads(text)
        except json.JSONDecodeError as bad:
            raise DataError(f"{path}, line {bad.lineno}, column {bad.colno}: invalid JSON: {bad.msg}") from exc
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as bad:
            raise DataError(f"{path}, line {number}, column {bad.colno}: invalid JSON: {bad.msg} "
                            "(JSON Lines: one complete object per line)") from exc
        if not isinstance(value, dict):
            raise DataError(f"{path}, line {number}: expected a JSON object with the columns, "
                            f"got {type(value).__name__}") from exc


def load_rows(dataset: str | os.PathLike[str], split: str = "train",
              cache_dir: str | os.PathLike[str] | None = None, *, offline: bool = False,
              config: str | None = None, local_example: str | None = None,
              ) -> tuple[list[dict[str, Any]], list[str], str]:
    """Read a hub dataset or local file: (rows, column names, source label), the rows `datasets` gives.

    `cache_dir` is passed to `datasets.load_dataset` (default: its usual cache). `offline=True`
    never touches the network (not even the reachability check): hub ids come from the local
    datasets cache only. `config` is the hub dataset's configuration (subset) name.
    `local_example`: a local file in the same schema, suggested when the hub cannot be reached.
    """
    local = resolve_local(dataset)
    if local is None:
        return _load_hub(str(dataset), split, cache_dir, offline=offline, config=config,
                         local_example=local_example)
    fmt = LOCAL_FORMATS.get(local.suffix.lower())
    if fmt is None:
        raise DataError(f"{local}: unsupported file type {local.suffix!r}; use one of "
                        f"{', '.join(sorted(LOCAL_FORMATS))}")
    if fmt in ("json", "csv"):
        _check_text_file(local)
    direct = _read_local(local, fmt) if _PLAIN_SPLIT.fullmatch(split) else None
    if direct is not None:
        return direct[0], direct[1], str(local)
    return _load_local_with_datasets(local, fmt, split, cache_dir, offline=offline)


def _load_local_with_datasets(local: Path, fmt: str, split: str, cache_dir: str | os.PathLike[str] | None,
                              *, offline: bool = False) -> tuple[list[dict[str, Any]], list[str], str]:
    """A local file read by `datasets.load_dataset` (what `_read_local` defers to), its errors as
    `DataError`s naming the file (and, for JSON, the line)."""
    import datasets

    kwargs = {} if cache_dir is None else {"cache_dir": str(cache_dir)}
    source = str(local)
    with _quiet_datasets(), _offline_mode() if offline else contextlib.nullcontext():
        try:
            ds = datasets.load_dataset(fmt, data_files={split: str(local)}, split=split, **kwargs)
        except Exception as exc:  # datasets wraps parser errors in several types
            if fmt == "json":
                _check_json_lines(local, exc)
            cause = exc.__cause__ or exc.__context__ or exc
            raise DataError(f"{source}: cannot be read as {fmt}: {type(exc).__name__}: {exc}"
                            + (f" (cause: {type(cause).__name__}: {cause})" if cause is not exc else "")) from exc
    return _rows_of(ds, split, source)


def _load_hub(source: str, split: str, cache_dir: str | os.PathLike[str] | None, *, offline: bool,
              config: str | None, local_example: str | None) -> tuple[list[dict[str, Any]], list[str], str]:
    import datasets

    kwargs: dict[str, Any] = {} if cache_dir is None else {"cache_dir": str(cache_dir)}
    offline = offline or not _hub_reachable()
    if config:
        kwargs["name"] = config
    with _quiet_datasets():
        try:
            with _offline_mode() if offline else contextlib.nullcontext():
                ds = datasets.load_dataset(source, split=split, **kwargs)
        except Exception as exc:
            if offline:
                raise DataError(
                    f"cannot load {source!r}: the Hugging Face Hub cannot be reached (no network, "
                    f"or HF_HUB_OFFLINE is set) and split {split!r} is not in the local datasets cache "
                    f"({type(exc).__name__}); {_hub_hint(local_example, source)}"
                ) from exc
            raise DataError(f"cannot load {source!r} (split {split!r}) from the Hugging Face Hub: "
                            f"{type(exc).__name__}: {exc}. If the Hub is unreachable, "
                            f"{_hub_hint(local_example, source)}") from exc
    return _rows_of(ds, split, source)


def _rows_of(ds: Any, split: str, source: str) -> tuple[list[dict[str, Any]], list[str], str]:
    """(rows, columns, source) of what `datasets.load_dataset` returned."""
    import datasets

    if isinstance(ds, datasets.DatasetDict):  # pragma: no cover - split is always given
        ds = ds[split]
    return ds.to_list(), list(ds.column_names), source


# -- local files without `datasets` ------------------------------------------------------------
# Each reader below repeats, for the common case, what the builder of datasets 5.2
# (datasets/packaged_modules/{json,csv,parquet}) does to a single local file, and returns None for
# anything that builder treats specially; `tests/test_local_reader.py` compares the rows for every
# bundled file and for the edge cases. What datasets adds after its builder (its features inferred
# from the Arrow schema, the cast to them, the Arrow cache, `to_list`) gives Arrow's own
# `to_pylist` for these types.

_PLAIN_SPLIT = re.compile(r"\w+(\.\w+)*")  # a split name; "train[:10]" and the like go to datasets
_JSON_CHUNK = 10 << 20  # JsonConfig.chunksize: a larger file is read in several batches
_JSON_MIN_BLOCK = 16 << 10
# Column sets datasets reads as agent traces (AGENT_TRACES_FEATURES_MARKERS): left to datasets.
_AGENT_TRACE_COLUMNS = ({"type", "message"}, {"type", "payload"},
                        {"id", "source", "model", "system_prompt", "messages"}, {"type", "id", "version", "cwd"})
_CSV_CHUNK = 10_000  # CsvConfig.chunksize: a longer file is several tables, cast to the first's types
# CsvConfig's pandas.read_csv arguments, as datasets passes them with pandas >= 2.2 (its defaults).
_CSV_KWARGS: dict[str, Any] = dict(
    sep=",", header="infer", index_col=None, usecols=None, engine=None, converters=None,
    true_values=None, false_values=None, skipinitialspace=False, skiprows=None, nrows=None,
    na_values=None, keep_default_na=True, na_filter=True, skip_blank_lines=True, thousands=None,
    decimal=".", lineterminator=None, quotechar='"', quoting=0, escapechar=None, comment=None,
    encoding=None, dialect=None, skipfooter=0, doublequote=True, memory_map=False,
    float_precision=None, chunksize=_CSV_CHUNK, encoding_errors="strict", on_bad_lines="error",
    date_format=None)


def _read_local(path: Path, fmt: str) -> tuple[list[dict[str, Any]], list[str]] | None:
    """(rows, columns) of a local file as `datasets.load_dataset` gives them, or None to let
    datasets read it (a file it treats specially, or one that does not parse: its error then)."""
    try:
        reader = {"json": _read_json_lines, "csv": _read_csv, "parquet": _read_parquet}[fmt]
        table = reader(path)
    except Exception:  # noqa: BLE001 - any failure is datasets' to report, in its words
        return None
    if table is None:
        return None
    return table.to_pylist(), list(table.column_names)


def _read_json_lines(path: Path) -> Any:
    """A JSON Lines file as datasets' Json builder reads it: pyarrow's JSON reader (its type
    inference: a key missing from some rows is null, ints beside floats become floats, ISO dates
    timestamps, objects structs), with datasets' block size; None when datasets would go another way."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.json as paj

    batch = path.read_bytes()
    if batch.startswith(codecs.BOM_UTF8):
        batch = batch[len(codecs.BOM_UTF8):]
    if len(batch) > _JSON_CHUNK or batch.lstrip().startswith(b"["):
        return None  # several batches, or one JSON document (read through pandas)
    lines = batch.splitlines()
    if any(not line.strip() for line in lines):
        return None  # datasets then skips its check for mixed types (the line does not parse)
    examples = [pd.io.json.ujson_loads(line) for line in lines]  # datasets' own parser
    if _mixed_struct_types(examples):
        return None  # datasets stores such fields as JSON text
    block_size = max(_JSON_CHUNK // 32, _JSON_MIN_BLOCK)
    block_size = len(batch) if len(batch) // 8 > block_size else block_size
    while True:
        try:
            table = paj.read_json(io.BytesIO(batch), read_options=paj.ReadOptions(block_size=block_size))
            table.validate()
            break
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            if ("straddling" in str(exc) or "JSON conversion to" in str(exc)) and block_size < len(batch):
                block_size *= 2  # as datasets retries
                continue
            return None
    names = set(table.column_names)
    if any(marker <= names for marker in _AGENT_TRACE_COLUMNS):
        return None
    return table


def _mixed_struct_types(examples: list[Any]) -> bool:
    """Whether datasets' `find_mixed_struct_types_field_paths` finds a field it encodes as JSON:
    objects below the top level with different keys (or none), or objects and lists mixed with
    other values."""
    pending: list[tuple[bool, list[Any]]] = [(False, [x for x in examples if x is not None])]
    while pending:
        nested, content = pending.pop()
        if not content:
            continue
        if all(isinstance(x, dict) for x in content):
            if nested and (any(set(x) != set(content[0]) for x in content) or not content[0]):
                return True
            for key in {k for x in content for k in x}:
                pending.append((True, [x[key] for x in content if x.get(key) is not None]))
        elif all(isinstance(x, list) for x in content):
            pending.append((True, [y for x in content for y in x if y is not None]))
        elif any(isinstance(x, (dict, list)) for x in content):
            return True
    return False


def _read_csv(path: Path) -> Any:
    """A CSV file as datasets' Csv builder reads it: pandas' reader with datasets' arguments, then
    `pyarrow.Table.from_pandas`; None when it would be several chunks."""
    import pandas as pd
    import pyarrow as pa

    with pd.read_csv(path, iterator=True, dtype=None, **_CSV_KWARGS) as reader:
        chunks = list(reader)
    if len(chunks) != 1 or chunks[0].empty:
        return None  # several chunks, or no rows (datasets' own error)
    return pa.Table.from_pandas(chunks[0])


def _read_parquet(path: Path) -> Any:
    """A Parquet file as datasets' Parquet builder reads it; None for one with datasets' own
    feature metadata (images, class labels ...) or a type outside plain numbers, text, lists
    and structs."""
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(path)
    schema = parquet.schema_arrow
    if (schema.metadata and b"huggingface" in schema.metadata) or not all(_plain_arrow_type(f.type) for f in schema):
        return None
    return parquet.read()


def _plain_arrow_type(kind: Any) -> bool:
    import pyarrow.types as pt

    if pt.is_struct(kind):
        return all(_plain_arrow_type(kind.field(i).type) for i in range(kind.num_fields))
    if pt.is_list(kind) or pt.is_large_list(kind):
        return _plain_arrow_type(kind.value_type)
    return (pt.is_null(kind) or pt.is_boolean(kind) or pt.is_integer(kind) or pt.is_float32(kind)
            or pt.is_float64(kind) or pt.is_string(kind) or pt.is_large_string(kind))


# ---------------------------------------------------------------------------------------------
# Validation


def items_from_rows(
    task: "Schema",
    rows: Sequence[Mapping[str, Any]],
    source: str,
    columns: Sequence[str] | None = None,
    aliases: Mapping[str, str] | None = None,
    source_columns: Sequence[str] | None = None,
) -> list[Item]:
    """Validate every row for `task` and build the items; raise one `DataError` for all problems.

    `columns` are the source's column names (defaults to the union of the rows' keys). A
    required column absent from the source is reported once with the columns that do exist;
    then every row is checked and the first few problems are listed with the total count.
    `aliases` (schema column -> the user's column, from `apply_column_mapping`) makes row errors
    name the column as it is called in the file, and lists `source_columns` (the file's own).
    """
    if columns is None:
        columns = list(dict.fromkeys(k for r in rows for k in r))
    present = {str(c).strip().lower() for c in columns}
    missing = [c for c in task.columns if c.lower() not in present]
    if missing:
        what = "column" if len(missing) == 1 else "columns"
        raise DataError(
            f"{source}: {what} {', '.join(repr(c) for c in missing)} missing in every row (from row 0, "
            f"0-based) for task {task.name}; the file has columns: "
            f"{', '.join(repr(str(c)) for c in source_columns or columns)} "
            f"(names are matched case-insensitively; other names can be mapped with "
            f"input_column, target_column, choices_column, context_columns)"
        )
    if not rows:
        raise DataError(f"{source}: no rows")
    items: list[Item] = []
    errors: list[str] = []
    for index, raw in enumerate(rows):
        row = Row(raw)
        try:
            question, target, fields = task.prepare(row)
        except RowError as exc:
            column = _shown_column(exc.column, aliases)
            errors.append(f"row {index} (0-based), column {column}: {exc.message}")
            continue
        topic = row.raw(TOPIC_COLUMN)
        if TOPIC_FIELD not in fields and not _is_missing(topic) and str(topic).strip():
            fields = {**fields, TOPIC_FIELD: str(topic).strip()}
        items.append(Item(doc_id=index, question=question, target=target, fields=fields,
                          source=source, row=index))
    if errors:
        shown = "\n  ".join(errors[:MAX_ERRORS_SHOWN])
        more = f"\n  ... and {len(errors) - MAX_ERRORS_SHOWN} more" if len(errors) > MAX_ERRORS_SHOWN else ""
        listing = ""
        if aliases:
            listing = f"\n(the file has columns: {', '.join(repr(str(c)) for c in source_columns or columns)})"
        raise DataError(
            f"{source}: {len(errors)} of {len(rows)} rows cannot be used for task {task.name}:\n  {shown}{more}{listing}"
        )
    return items


def _shown_column(column: str, aliases: Mapping[str, str] | None) -> str:
    for schema, user in (aliases or {}).items():
        if schema.lower() == column.lower():
            return f"{user!r} (used as {schema!r})"
    return repr(column)


def load_items(task: "Schema", dataset: str | os.PathLike[str] | None = None, split: str = "train",
               limit: int | None = None, *, cache_dir: str | os.PathLike[str] | None = None,
               input_column: str | None = None, target_column: str | None = None,
               choices_column: str | Sequence[str] | None = None,
               context_columns: str | Sequence[str] | None = None,
               offline: bool = False, config: str | None = None) -> list[Item]:
    """Load and validate a task's items from a hub id (default: the task's) or a local file.

    The `*_column(s)` arguments map the file's own column names onto the task's schema (see
    `apply_column_mapping`); a custom task brings its own mapping, which they override. All
    rows are validated even with `limit`, so a broken file is noticed on a small run; `limit`
    then keeps the first rows. `offline=True` never touches the network.
    """
    bundled = f"data/{task.name}.jsonl"  # the bundled sample of a built-in task, if there is one
    rows, columns, source = load_rows(dataset or task.hub_id, split, cache_dir=cache_dir, offline=offline,
                                      local_example=bundled if (REPO_ROOT / bundled).is_file() else None,
                                      config=config)
    mapping = {**dict(task.column_mapping),
               **{k: v for k, v in (("input_column", input_column), ("target_column", target_column),
                                    ("choices_column", choices_column), ("context_columns", context_columns))
                  if v is not None}}
    aliases: dict[str, str] | None = None
    source_columns = list(columns)
    if mapping:
        rows, columns, aliases = apply_column_mapping(task, rows, columns, source, **mapping)
    items = items_from_rows(task, rows, source, columns, aliases=aliases, source_columns=source_columns)
    if limit is not None:
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        items = items[:limit]
    return items


# ---------------------------------------------------------------------------------------------
# Column mapping: a file with its own column names, used for a task without renaming anything

# Which schema column each mapping parameter fills, per built-in task. "Doc {n}" spreads several
# context columns over Doc 1, Doc 2, ...; a plain name receives them as one list. Custom tasks
# carry their own `column_roles`.
def _column_list(value: str | Sequence[str], parameter: str) -> list[str]:
    names = [value] if isinstance(value, str) else list(value)
    if not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise DataError(f"{parameter} must be a column name or a list of column names, got {value!r}")
    return names


def apply_column_mapping(
    task: "Schema",
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    source: str,
    *,
    input_column: str | None = None,
    target_column: str | None = None,
    choices_column: str | Sequence[str] | None = None,
    context_columns: str | Sequence[str] | None = None,
) -> tuple[list[dict[str, Any]], list[str], dict[str, str]]:
    """Rows in the task's schema from rows with the user's column names, before validation.

    `input_column` / `target_column` rename one column each (to e.g. Question / Answer);
    `choices_column` is one column holding a list of choices, or several columns holding one
    choice each (A, B, ... in that order; trailing empty cells mean fewer choices, a gap is an
    error); `context_columns` are the context documents. Names match case-insensitively; a name
    that is not a column is an error listing the columns that exist. Returns (rows, columns,
    aliases) with aliases = schema column -> the user's column(s), for error messages.
    """
    roles = task.column_roles
    wanted = {"input": input_column, "target": target_column, "choices": choices_column,
              "context": context_columns}
    by_lower = {str(c).strip().lower(): str(c) for c in columns}
    plan: dict[str, tuple[str, list[str], bool]] = {}  # role -> (schema name, source columns, many)
    for role, value in wanted.items():
        if value is None:
            continue
        parameter = f"{role}_columns" if role == "context" else f"{role}_column"
        if role not in roles:
            usable = ", ".join(f"{r}_column" if r != "context" else "context_columns" for r in roles) or "none"
            raise DataError(f"{source}: task {task.name} has no {role} column, so {parameter}={value!r} "
                            f"cannot be used (mapping parameters for this task: {usable})")
        names = _column_list(value, parameter)
        many = not isinstance(value, str) or role == "context"
        if role in ("input", "target") and len(names) != 1:
            raise DataError(f"{parameter} must name one column, got {value!r}")
        absent = [n for n in names if n.strip().lower() not in by_lower]
        if absent:
            raise DataError(
                f"{source}: {parameter}={value!r}: {'column' if len(absent) == 1 else 'columns'} "
                f"{', '.join(repr(n) for n in absent)} not found; the file has columns: "
                f"{', '.join(repr(str(c)) for c in columns)} (names are matched case-insensitively)")
        plan[role] = (roles[role], [by_lower[n.strip().lower()] for n in names], many)

    aliases = {schema: ", ".join(names) for schema, names, _ in plan.values()}
    errors: list[str] = []
    out_rows: list[dict[str, Any]] = []
    for index, raw in enumerate(rows):
        row = dict(raw)
        new: dict[str, Any] = {}
        for role, (schema, names, many) in plan.items():
            values = [raw.get(n) for n in names]
            if role == "choices" and many:
                filled = [not _is_missing(v) and str(v).strip() != "" for v in values]
                last = max((i for i, f in enumerate(filled) if f), default=-1)
                gap = next((i for i in range(last) if not filled[i]), None)
                if gap is not None:
                    errors.append(f"row {index} (0-based), column {names[gap]!r}: empty choice before a "
                                  f"filled one ({names[last]!r}); choices must be consecutive")
                new[schema] = [str(v).strip() for v in values[:last + 1]]
            elif role == "context" and "{n}" in schema:
                for n, v in enumerate(values, start=1):
                    new[schema.format(n=n)] = v
            elif role == "context":
                new[schema] = [v for v in values if not _is_missing(v) and str(v).strip()]
            else:
                new[schema] = values[0]
        # The schema name wins over a same-named column the file may also have.
        drop = {k.lower() for k in new}
        if any("{n}" in schema for schema, _, _ in plan.values()):
            drop |= {k.lower() for k in row if str(k).lower().startswith("doc ")}
        row = {k: v for k, v in row.items() if str(k).strip().lower() not in drop}
        row.update(new)
        out_rows.append(row)
    if errors:
        shown = "\n  ".join(errors[:MAX_ERRORS_SHOWN])
        more = f"\n  ... and {len(errors) - MAX_ERRORS_SHOWN} more" if len(errors) > MAX_ERRORS_SHOWN else ""
        raise DataError(f"{source}: {len(errors)} of {len(rows)} rows cannot be used for task {task.name}:"
                        f"\n  {shown}{more}")
    new_columns = list(dict.fromkeys(k for r in out_rows for k in r)) if out_rows else list(columns)
    return out_rows, new_columns, aliases


# Helpers used by tasks' prepare functions -------------------------------------------------

def choices_of(row: Row, column: str = "Choices") -> tuple[list[str], list[str]]:
    """(labels, texts) of a Choices value: a list of texts (labelled A, B, ...) or {label, text}.

    `RowError` (the loader names file, row and column) for no choices, an empty text, a single
    choice, and two choices with the same text (after Unicode normalisation, case and spacing).
    """
    value = row.struct(column)
    if hasattr(value, "tolist") and not isinstance(value, (list, dict)):
        value = value.tolist()
    if isinstance(value, Mapping):
        lower = {str(k).lower(): v for k, v in value.items()}
        if "label" not in lower or "text" not in lower:
            raise RowError(column, f"expected {{label, text}}, got keys {sorted(value)}")
        labels = [str(x).strip().upper() for x in parse_list(lower["label"], column)]
        texts = [str(x).strip() for x in parse_list(lower["text"], column)]
        if len(labels) != len(texts):
            raise RowError(column, f"{len(labels)} labels but {len(texts)} texts")
        if len(set(labels)) != len(labels):
            raise RowError(column, f"duplicate labels {labels}")
        if any(not lab for lab in labels):
            raise RowError(column, "empty label")
    else:
        texts = [str(x).strip() for x in parse_list(value, column)]
        if len(texts) > 26:
            raise RowError(column, f"{len(texts)} choices; at most 26 can be labelled A-Z")
        labels = [chr(ord("A") + i) for i in range(len(texts))]
    if not texts:
        raise RowError(column, "no choices")
    if any(not t for t in texts):
        raise RowError(column, f"empty choice text for {labels[[bool(t) for t in texts].index(False)]}")
    if len(texts) == 1:
        raise RowError(column, f"only one choice ({labels[0]}: {_short(texts[0])}); a multiple-choice item needs "
                               "at least two (with one, every answer is right and chance is 1.0)")
    seen: dict[str, str] = {}
    for label, text in zip(labels, texts):
        key = _same_text_key(text)
        if key in seen:
            raise RowError(column, f"choices {seen[key]} and {label} have the same text {_short(text)}; "
                                   "an answer naming the other one would be scored wrong. Make the texts differ "
                                   "or drop one")
        seen[key] = label
    return labels, texts


def _same_text_key(text: str) -> str:
    """What makes two choice texts the same to a reader: Unicode forms (NFKC, invisible format
    characters), case and runs of whitespace aside."""
    return " ".join(normalize_text(text).split()).casefold()

