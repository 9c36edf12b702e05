"""Parameter files: `<notebook>[.<variant>].yaml`, read and checked before anything runs.

`open_ended.yaml` and `open_ended.5shot.yaml` both run `notebooks/open_ended.ipynb`. A file of a
notebook kind (`evekit.runs.registry`) is checked by that kind's parameters (`RunKind.params`):
names, types, bounds and the kind's rules, all before a kernel starts; the run then gets every
parameter, the file's values over the defaults, so what runs is what the file and the defaults
say, never a notebook's demo values. A notebook of no kind (your own, in `--notebooks-dir`) is
checked against its parameters cell and gets the file's values only.

YAML is read with limits (size, aliases, nesting), so a hostile file is refused at once instead
of expanding into gigabytes.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evekit.errors import EvekitError, ParameterError, unknown_names
from evekit.runs.kind import RunKind
from evekit.runs.params import Params, check_environment, files_checked
from evekit.runs.registry import notebooks as kind_notebooks

__all__ = ["SERVER_URL_PLACEHOLDER", "RunFile", "notebook_name", "load_params", "read_run_file", "check_param_files",
           "MAX_BYTES", "MAX_ALIASES", "MAX_DEPTH", "MAX_NODES"]

SERVER_URL_PLACEHOLDER = "${EVEKIT_SERVER_URL}"
# Limits of a parameter file: far above any real one (the demo's largest is about 1.5 KB, with no
# alias), far below what a "billion laughs" file needs.
MAX_BYTES = 1_000_000
MAX_ALIASES = 100
MAX_DEPTH = 20
# Values once aliases are expanded: 73 aliases nine deep stand for 387 million list items.
MAX_NODES = 100_000


def notebook_name(params_file: Path) -> str:
    return Path(params_file).name.split(".")[0]


class _LimitedLoader(yaml.SafeLoader):
    """yaml's SafeLoader, counting aliases and nesting as it composes the document."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._aliases = 0
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:  # noqa: D401 - yaml's hook
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise yaml.YAMLError(f"more than {MAX_ALIASES} aliases (*name): refused, a parameter file "
                                     "needs none")
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.YAMLError(f"nested more than {MAX_DEPTH} levels deep: refused")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:  # noqa: D401 - yaml's hook
        # A name given twice would silently keep its last value: refused, naming the line.
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is not None and key != "<<" and key in seen:
                raise yaml.YAMLError(f"line {key_node.start_mark.line + 1}: {key!r} is given twice (first on line "
                                     f"{seen[key]}); keep one")
            if key is not None:
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)

    def construct_document(self, node: Any) -> Any:  # noqa: D401 - yaml's hook
        sizes: dict[int, int] = {}

        def size(n: Any) -> int:  # the values `n` stands for once every alias is expanded
            if id(n) not in sizes:
                sizes[id(n)] = 1  # a cycle counts once (and is not followed again)
                if isinstance(n, yaml.SequenceNode):
                    sizes[id(n)] = 1 + sum(size(c) for c in n.value)
                elif isinstance(n, yaml.MappingNode):
                    sizes[id(n)] = 1 + sum(size(k) + size(v) for k, v in n.value)
            return sizes[id(n)]

        if size(node) > MAX_NODES:
            raise yaml.YAMLError(f"its aliases (*name) expand to {size(node):,} values, more than {MAX_NODES:,}: "
                                 "refused, a parameter file needs no aliases")
        return super().construct_document(node)


def _substitute(value: Any, server_url: str | None) -> Any:
    if isinstance(value, str) and SERVER_URL_PLACEHOLDER in value:
        if server_url is None:
            raise ParameterError(f"{SERVER_URL_PLACEHOLDER} is used but no server was started: pass --serve "
                                 "(evekit run --serve starts the embedded model and fills it in)")
        return value.replace(SERVER_URL_PLACEHOLDER, server_url)
    if isinstance(value, dict):
        return {k: _substitute(v, server_url) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, server_url) for v in value]
    return value


def read_limited_text(path: Path, what: str = "a parameter file") -> str:
    """The text of a YAML file of at most MAX_BYTES; ParameterError naming the file otherwise."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ParameterError(f"{path}: cannot be read ({exc.strerror})") from None
    if size > MAX_BYTES:
        raise ParameterError(f"{path}: {size:,} bytes; {what} may have at most {MAX_BYTES:,}")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:  # replacing the bytes would run a value nobody wrote
        raise ParameterError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason}); save it as UTF-8") from None


def load_params(path: Path, server_url: str | None = None) -> dict[str, Any]:
    """The file's mapping of parameter names to values, `${EVEKIT_SERVER_URL}` filled in.
    ParameterError naming the file for anything that is not such a mapping."""
    path = Path(path)
    text = read_limited_text(path)
    try:
        params = yaml.load(text, Loader=_LimitedLoader)  # noqa: S506 - a SafeLoader with limits
    except yaml.YAMLError as exc:
        raise ParameterError(f"{path}: not valid YAML: {exc}") from None
    if params is None:
        raise ParameterError(f"{path}: the file is empty; it must map parameter names to values")
    if not isinstance(params, dict):
        raise ParameterError(f"{path}: expected a mapping of parameter names to values, got a "
                             f"{type(params).__name__}")
    try:
        params = _substitute(params, server_url)
    except ParameterError as exc:  # name the file (and the field: the first one that uses it)
        field = next(iter(_fields_using(params, SERVER_URL_PLACEHOLDER)), "")
        raise ParameterError(f"{path}: {field + ': ' if field else ''}{exc}") from None
    # The planning commands keep the server's placeholder as written (no server runs; cache keys do not
    # hold the URL): only that one is allowed to stay.
    _check_environment_refs(params, path, keep=("EVEKIT_SERVER_URL",) if server_url == SERVER_URL_PLACEHOLDER else ())
    return params


_ENV_REF = re.compile(r"\$\{([^}]*)\}")


def _fields_using(value: Any, text: str, where: str = "") -> list[str]:
    """The fields (`judges[0].base_url`) whose value contains `text`."""
    if isinstance(value, dict):
        return [f for k, v in value.items() for f in _fields_using(v, text, f"{where}.{k}" if where else str(k))]
    if isinstance(value, list):
        return [f for i, v in enumerate(value) for f in _fields_using(v, text, f"{where}[{i}]")]
    return [where] if isinstance(value, str) and text in value else []


def _check_environment_refs(value: Any, path: Path, where: str = "", keep: tuple[str, ...] = ()) -> None:
    """Every `${NAME}` left in a value must name a set environment variable (or one of `keep`): an
    unset one is a ParameterError naming the file and the field now, not a failure inside the kernel
    later."""
    if isinstance(value, dict):
        for k, v in value.items():
            _check_environment_refs(v, path, f"{where}.{k}" if where else str(k), keep)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_environment_refs(v, path, f"{where}[{i}]", keep)
    elif isinstance(value, str):
        for name in _ENV_REF.findall(value):
            if name in keep:
                continue
            if not name or name not in os.environ:
                raise ParameterError(f"{path}: {where}: ${{{name}}} names an environment variable that is not set "
                                     f"(export {name or 'NAME'}=... before evekit run)")


def _check_urls(value: Any, path: Path, where: str = "") -> None:
    """A credential in any `base_url` (the model's, a judge's), as written or as the environment
    completes it, is refused before papermill writes the parameters into a notebook."""
    from evekit.endpoints import url_credentials_problem

    if isinstance(value, dict):
        for k, v in value.items():
            _check_urls(v, path, f"{where}.{k}" if where else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_urls(v, path, f"{where}[{i}]")
    elif isinstance(value, str) and where.rsplit(".", 1)[-1] == "base_url":
        expanded = os.path.expandvars(value)
        for url in (value, expanded):
            problem = url_credentials_problem(url, where)
            if problem:
                raise ParameterError(f"{path}: {problem}")
        if "$" not in expanded and not expanded.lower().startswith(("http://", "https://")):
            raise ParameterError(f"{path}: {where} {expanded!r} is not an http:// or https:// URL (an OpenAI-compatible "
                                 "endpoint, e.g. http://localhost:8000/v1)")


def check_run_name(run_name: Any, output_dir: Any, path: Path) -> None:
    """A run name is one folder inside output_dir: `..`, an absolute path or a control character
    (NUL above all) is refused with the file named; output_dir may not hold NUL or control characters."""
    name = str(run_name)
    if not name.strip() or name != name.strip():
        raise ParameterError(f"{path}: run_name {name!r}: must be a folder name without leading or trailing spaces")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ParameterError(f"{path}: run_name {name!r}: control characters (NUL, newline, ...) are not allowed")
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\", "~")) or ".." in parts or "." in parts:
        raise ParameterError(f"{path}: run_name {name!r} would leave output_dir (an absolute path, `~`, `.` or "
                             "`..`): a run name is one folder inside output_dir; set output_dir for another place")
    out = str(output_dir)
    if any(ord(c) < 32 or ord(c) == 127 for c in out):
        raise ParameterError(f"{path}: output_dir {out!r}: control characters (NUL, newline, ...) are not allowed")


@dataclass
class RunFile:
    """One parameter file, checked: its notebook, its kind (None: a notebook of no kind), the values
    it sets, the validated parameters and what papermill injects."""

    path: Path
    notebook: str
    kind: RunKind | None
    values: dict[str, Any]
    params: Params | None = None
    injected: dict[str, Any] = field(default_factory=dict)
    # A notebook of no kind: the literal values of its parameters cell (what runs where the file is silent).
    defaults: dict[str, Any] = field(default_factory=dict)

    @property
    def output_dir(self) -> str:
        return str(self.injected.get("output_dir") or self.defaults.get("output_dir") or "outputs")

    @property
    def run_name(self) -> str:
        return str(self.injected.get("run_name") or self.defaults.get("run_name") or "demo")

    def reads(self) -> list[str] | None:
        """The files this run reads that other runs may write (None: everything of its run)."""
        if self.kind is None or self.params is None:
            return []
        return None if self.kind.reads is None else self.kind.reads(self.params)


def _notebook_defaults(notebook: Path) -> dict[str, Any]:
    """Every parameter of a notebook's parameters cell, with its value where it is a literal."""
    import ast

    import papermill as pm

    values: dict[str, Any] = {}
    for name, info in pm.inspect_notebook(str(notebook)).items():
        try:
            values[name] = ast.literal_eval(info["default"])
        except (ValueError, SyntaxError):
            values[name] = None
    return values


def read_run_file(path: Path, notebooks_dir: Path, server_url: str | None = None, *,
                  output_dir: str | None = None, check_files: bool = True) -> RunFile:
    """Read and check one parameter file; ParameterError (naming the file) for any problem.

    `check_files=False` leaves out the checks that input files exist (a batch checks before the
    runs that write them have run; the notebook checks again when it starts).
    """
    path = Path(path)
    if not path.is_file():
        raise ParameterError(f"{path}: no such file")
    name = notebook_name(path)
    notebook = Path(notebooks_dir) / f"{name}.ipynb"
    if not notebook.is_file():
        available = sorted(p.stem for p in Path(notebooks_dir).glob("*.ipynb"))
        raise ParameterError(f"{path}: no notebook {name!r} (a parameter file is named <notebook>[.<variant>].yaml; "
                             f"notebooks: {', '.join(available)})")
    values = load_params(path, server_url)
    _check_urls(values, path)
    if output_dir is not None:
        values["output_dir"] = output_dir
    kind = kind_notebooks().get(name)
    if kind is None:  # a notebook of your own: its parameters cell says which names it takes
        defaults = _notebook_defaults(notebook)
        problem = unknown_names(values, defaults)
        if problem:
            raise ParameterError(f"{path}: notebook {name}: {problem}")
        run = RunFile(path, name, None, values, injected=dict(values), defaults=defaults)
        check_run_name(run.run_name, run.output_dir, path)
        return run
    variant = kind.variant(name)
    try:
        # The key-variable check stays as the caller set it (`evekit plan` sends nothing: no key needed).
        with files_checked(check_files, environment=check_environment()):
            params = kind.params.from_dict({**kind.implied(name, values), **values})
    except EvekitError as exc:
        raise ParameterError(f"{path}: {exc}") from None
    own = {f.name for f in kind.params.parameters(variant)}
    injected = {k: v for k, v in params.as_run_values().items() if k in own}
    run = RunFile(path, name, kind, values, params, injected)
    check_run_name(run.run_name, run.output_dir, path)
    return run


def check_param_files(files: list[Path], notebooks_dir: Path, server_url: str | None = "http://server.invalid",
                      output_dir: str | None = None) -> list[str]:
    """Every problem that would stop a parameter file, found before anything runs: a missing file,
    a notebook that does not exist, YAML that is not a mapping, an unknown parameter name, a value
    of the wrong type or out of bounds, a rule of the kind broken."""
    problems = []
    for f in files:
        try:
            read_run_file(f, notebooks_dir, server_url, output_dir=output_dir, check_files=False)
        except EvekitError as exc:
            problems.append(str(exc))
    return problems


def expand(value: str) -> str:
    """`${NAME}` and `$NAME` from the environment (a path or URL as the notebook will see it)."""
    return os.path.expandvars(value)
