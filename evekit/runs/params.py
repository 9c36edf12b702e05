"""Notebook parameters, for every notebook kind: each parameter declared once.

A parameter is a dataclass field made by `param()`: its type (the annotation), its default, one
line of help, and its bounds. From that one declaration come the checks (type, bounds, choices),
the did-you-mean for a misspelt name, the generated parameters cell of the notebooks
(`Params.parameters_cell`) and the public record in results.json (`Params.as_dict`).

Parameters that several kinds take live in the groups below (`SeedLimit`, `Judging`, `Client`,
`Output`); a kind's class inherits the groups it needs and adds its own fields. So `seed`,
`cache_dir` or `concurrency` have one definition and one default in every kind
(`tests/test_run_kinds.py` checks it). Rules that tie parameters together are a kind's `check()`.
"""
from __future__ import annotations

import ast
import contextlib
import contextvars
import math
import os
import types
import typing
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Iterator, Literal, Mapping, Sequence

from evekit.errors import ParameterError, unknown_names
from evekit.paths import cache_path, output_path, resolve_path
from evekit.tracking import TrackingConfig
from evekit.types import JUDGE_MAX_TOKENS, JudgeSpec

__all__ = ["files_checked", "check_files", "check_environment", "param", "Params", "OnTask", "Seeded", "Limited", "SeedLimit", "Judging", "ShowsValidation", "ExpertLabelled", "Clustered", "BothOrders", "Client", "Output", "injected_parameters", "check_injected",
           "check_type", "GROUPS"]

# The order of the parameters cell: what is evaluated, then the model, the data, the judges, the
# client settings, where outputs go. Within a group, the order of declaration.
GROUPS = ("what", "model", "data", "repeats", "judges", "client", "output", "mapping")


def param(default: Any = MISSING, *, help: str, group: str, minimum: float | None = None,
          factory: Any = MISSING, only: str | None = None, unless: str | None = None, path: bool = False) -> Any:
    """A parameter: a dataclass field carrying its help line, group, lower bound and flags.

    `only`: the one notebook variant whose parameters cell carries it ("task": the EVE task
    notebooks, "custom": custom_task.ipynb). `path`: a file or folder name (a `Path` is accepted
    and kept as text).
    """
    if group not in GROUPS:
        raise ValueError(f"group={group!r}; use one of {GROUPS}")
    metadata = {"help": help, "group": group, "minimum": minimum, "only": only, "unless": unless, "path": path}
    return field(default=default, default_factory=factory, metadata=metadata)


_CHECK_FILES = contextvars.ContextVar("evekit_check_files", default=True)
_CHECK_ENVIRONMENT = contextvars.ContextVar("evekit_check_environment", default=True)


@contextlib.contextmanager
def files_checked(check: bool, *, environment: bool = True) -> Iterator[None]:
    """Within: parameter checks that input files exist run only when `check` (a batch checks its
    files before the runs that write their inputs have run); checks that key variables are set only
    when `environment` (`evekit init` writes files for a shell that may not have them yet)."""
    token, env_token = _CHECK_FILES.set(check), _CHECK_ENVIRONMENT.set(environment)
    try:
        yield
    finally:
        _CHECK_FILES.reset(token)
        _CHECK_ENVIRONMENT.reset(env_token)


def check_files() -> bool:
    """Whether checks that input files exist apply now (`files_checked`)."""
    return _CHECK_FILES.get()


def check_environment() -> bool:
    """Whether checks that key variables are set apply now (`files_checked`)."""
    return _CHECK_ENVIRONMENT.get()


def injected_parameters(namespace: Mapping[str, Any]) -> list[str]:
    """The names papermill injected into this kernel: its cell's first line is exactly
    "# Parameters" (IPython keeps every executed cell's source in `In`)."""
    names: list[str] = []
    for source in namespace.get("In") or []:
        if not isinstance(source, str) or source.split("\n", 1)[0].strip() != "# Parameters":
            continue
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        names += [t.id for node in tree.body if isinstance(node, ast.Assign)
                  for t in node.targets if isinstance(t, ast.Name)]
    return names


def check_injected(namespace: Mapping[str, Any], known: Sequence[str]) -> None:
    """Raise ParameterError naming each injected parameter that `known` lacks, with a did-you-mean."""
    problem = unknown_names(injected_parameters(namespace), known)
    if problem:
        raise ParameterError(f"{problem} (a misspelt parameter would otherwise be ignored and its "
                             "default used)")


def check_type(name: str, value: Any, types_: tuple[type, ...], optional: bool = False) -> None:
    """ParameterError unless `value` is one of `types_` (or None when `optional`). bool is an int in
    Python: a bool passes only where bool is one of the types."""
    if value is None and optional:
        return
    if not isinstance(value, types_) or (isinstance(value, bool) and bool not in types_):
        want = " or ".join(t.__name__ for t in types_) + (" or None" if optional else "")
        raise ParameterError(f"parameter {name}={value!r} has type {type(value).__name__}; expected {want}")


@dataclass(frozen=True)
class _Rule:
    """What an annotation allows: the value types, None or not, the literal choices."""

    types: tuple[type, ...]
    optional: bool
    choices: tuple[Any, ...] | None = None


def _rule(hint: Any) -> _Rule:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        parts = [_rule(a) for a in args if a is not type(None)]
        choices = tuple(c for p in parts for c in (p.choices or ())) or None
        return _Rule(tuple(t for p in parts for t in p.types), type(None) in args or any(p.optional for p in parts),
                     choices)
    if origin is Literal:
        values = typing.get_args(hint)
        return _Rule(tuple({type(v) for v in values}), False, values)
    if hint is float:
        return _Rule((int, float), False)
    if hint is Any:
        return _Rule((object,), True)
    base = origin or hint
    if base is list:
        return _Rule((list, tuple), False)
    return _Rule((base,), False)


@dataclass(kw_only=True)
class Params:
    """The base of every notebook kind's parameters. Build with `from_dict` or `from_notebook`.

    `RENAMED`: old parameter names a kind no longer takes, with the new one, so an old file fails
    with the fix instead of a bare "unknown parameter".
    """

    RENAMED: ClassVar[dict[str, str]] = {}

    @classmethod
    def parameters(cls, variant: str | None = None) -> list[Field]:
        """The fields in parameters-cell order (by group, then declaration); `variant` keeps the
        fields whose `only` is unset or equal to it (None: every field)."""
        chosen = [f for f in fields(cls) if variant is None
                  or (f.metadata.get("only") in (None, variant) and f.metadata.get("unless") != variant)]
        return sorted(chosen, key=lambda f: GROUPS.index(f.metadata.get("group", "output")))

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in cls.parameters()]

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Every parameter with a default, and that default (a fresh copy of a list)."""
        out = {}
        for f in fields(cls):
            if f.default is not MISSING:
                out[f.name] = f.default
            elif f.default_factory is not MISSING:
                out[f.name] = f.default_factory()
        return out

    @classmethod
    def unknown(cls, names: Sequence[str]) -> str | None:
        """The message for names this kind does not take (renamed ones say their new name)."""
        renamed = [f"{n!r} is now {cls.RENAMED[n]!r}" for n in names if n in cls.RENAMED]
        problem = unknown_names([n for n in names if n not in cls.RENAMED], cls.names())
        parts = ([f"renamed parameter{'s' if len(renamed) > 1 else ''}: {'; '.join(renamed)}"] if renamed else []) \
            + ([problem] if problem else [])
        return "; ".join(parts) or None

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "Params":
        """Validate a mapping of parameter names to values; an unknown name is an error."""
        problem = cls.unknown(list(values))
        if problem:
            raise ParameterError(problem)
        missing = [f.name for f in fields(cls) if f.name not in values
                   and f.default is MISSING and f.default_factory is MISSING]
        if missing:
            raise ParameterError(f"missing parameter{'s' if len(missing) > 1 else ''}: {', '.join(missing)}")
        config = cls(**dict(values))
        config.validate()
        return config

    @classmethod
    def from_notebook(cls, namespace: Mapping[str, Any]) -> "Params":
        """Pick this kind's names out of a notebook's globals() and validate them; a name papermill
        injected that is not a parameter is an error, never silently ignored."""
        problem = cls.unknown([n for n in injected_parameters(namespace) if n not in cls.names()])
        if problem:
            raise ParameterError(f"{problem} (a misspelt parameter would otherwise be ignored and its "
                                 "default used)")
        return cls.from_dict({n: namespace[n] for n in cls.names() if n in namespace})

    def validate(self) -> None:
        """The checks every declaration implies (type, choices, lower bound), then the kind's own."""
        hints = typing.get_type_hints(type(self))
        for f in fields(self):
            value = getattr(self, f.name)
            if f.metadata.get("path") and isinstance(value, os.PathLike):
                value = os.fspath(value)
                setattr(self, f.name, value)
            rule = _rule(hints[f.name])
            check_type(f.name, value, rule.types, rule.optional)
            if rule.choices is not None and value is not None and value not in rule.choices:
                raise ParameterError(f"{f.name}={value!r} is not valid; use one of: "
                                     f"{', '.join(map(str, rule.choices))}")
            if isinstance(value, float) and not math.isfinite(value):
                raise ParameterError(f"parameter {f.name}={value!r} must be a finite number")
            low = f.metadata.get("minimum")
            if low is not None and value is not None and not isinstance(value, (list, tuple)) and value < low:
                word = "at least" if low else "0 or more"
                raise ParameterError(f"parameter {f.name}={value!r} must be {word}{f' {low:g}' if low else ''}")
            if hints[f.name] is float and isinstance(value, int):
                setattr(self, f.name, float(value))
        self.check()

    def check(self) -> None:
        """Rules that tie parameters together or look at files; a kind overrides it (and calls super)."""

    def as_run_values(self) -> dict[str, Any]:
        """Every parameter and its value, as a notebook is given them (`evekit run` injects these)."""
        return {f.name: getattr(self, f.name) for f in self.parameters()}

    def as_dict(self) -> dict[str, Any]:
        """The public record of the parameters (results.json, run.json): judges carry only the NAME
        of their key variable, never a key."""
        out = {f.name: getattr(self, f.name) for f in self.parameters()}
        if "judges" in out:
            out["judges"] = [public_judge(j) for j in self.judge_specs()]  # type: ignore[attr-defined]
        return out

    @classmethod
    def parameters_cell(cls, values: Mapping[str, Any], *, header: str, variant: str | None = None,
                        comments: Mapping[str, str] | None = None, column: int = 40) -> str:
        """A notebook's parameters cell: one line per parameter of `variant`, its value from `values`
        else the default, its comment from `comments` else the parameter's help."""
        comments = comments or {}
        params = cls.parameters(variant)
        unknown = (set(values) | set(comments)) - {f.name for f in params}
        if unknown:
            raise ValueError(f"not parameters of {cls.__name__} ({variant or 'every variant'}): {sorted(unknown)}")
        defaults = cls.defaults()
        lines = [header]
        for f in params:
            if f.name in values:
                value = values[f.name]
            elif f.name in defaults:
                value = defaults[f.name]
            else:
                raise ValueError(f"{cls.__name__}: {f.name} has no default; give the notebook a value")
            first, *rest = f"{f.name} = {_literal(value)}".split("\n")
            comment = comments.get(f.name, f.metadata.get("help"))
            if comment:
                first = f"{first:<{column - 1}} # {comment}" if len(first) < column - 1 else f"{first}  # {comment}"
            lines += [first, *rest]
        return "\n".join(lines)


def _literal(value: Any) -> str:
    """Python source of a parameter value: strings in double quotes, a list of mappings one per line."""
    import json

    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid Python literal
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return "[\n" + "".join(f"    {v!r},\n" for v in value) + "]"
    return repr(value)


def public_judge(spec: JudgeSpec) -> dict[str, Any]:
    """A judge entry for the record: every key that is set, the key variable by NAME only."""
    return {k: getattr(spec, k) for k in JudgeSpec.KEYS if getattr(spec, k) is not None or k == "api_key_env"}


# -- the groups of parameters that several kinds share ----------------------------------------
@dataclass(kw_only=True)
class OnTask(Params):
    # The custom task notebook names a task file instead: its task's name comes from the file.
    task: str = param(help="the task, by its name in the catalogue", group="what", unless="custom")


@dataclass(kw_only=True)
class Seeded(Params):
    seed: int = param(1234, help="fixes every random choice (few-shot sample, positions, bootstrap)",
                      group="data", minimum=0)


@dataclass(kw_only=True)
class Limited(Params):
    limit: int | None = param(None, help="None: every item (question); N: the first N", group="data", minimum=1)


@dataclass(kw_only=True)
class SeedLimit(Limited, Seeded):
    """The seed, then the limit."""


@dataclass(kw_only=True)
class Judging(Params):
    """A judge panel: the judges, their defaults, and the validation to show beside them."""

    judges: list = param(help="list of {name, model, base_url, api_key_env}", group="judges", factory=list)
    judge_temperature: float = param(0.0, help="the judges' temperature (a judge entry may set its own)",
                                     group="judges", minimum=0)
    judge_max_tokens: int = param(JUDGE_MAX_TOKENS, help="longest judge reply in tokens (a judge entry may set "
                                  "its own)", group="judges", minimum=1)

    def judge_specs(self) -> list[JudgeSpec]:
        """The judges as JudgeSpecs: unique names usable as column names, no key pasted anywhere."""
        from evekit.judges.panel import validate_judges

        if not isinstance(self.judges, (list, tuple)):
            raise ParameterError(f"judges must be a list of {{name, model, base_url, api_key_env}}, "
                                 f"got {self.judges!r}")
        return (validate_judges(list(self.judges), temperature=self.judge_temperature, max_tokens=self.judge_max_tokens)
                if self.judges else [])

    def check(self) -> None:
        super().check()
        specs = self.judge_specs()
        if specs and "pooled" in [s.name for s in specs]:
            raise ParameterError("a judge may not be called 'pooled': that name is the pooled fit's")

    def require_judges(self) -> None:
        """For kinds that are nothing without judges (win rate, ranking, judge validation)."""
        if not self.judges:
            raise ParameterError("judges must be a non-empty list of {name, model, base_url, api_key_env}")

    def check_key_variables(self, offline: bool) -> None:
        """Each judge's key variable is set (unless the run only replays the cache)."""
        if not _CHECK_ENVIRONMENT.get():
            return
        for j in self.judge_specs():
            if j.api_key_env and not offline and j.api_key_env not in os.environ:
                raise ParameterError(f"judge {j.name!r}: environment variable {j.api_key_env} "
                                     "(its api_key_env) is not set")


@dataclass(kw_only=True)
class ShowsValidation(Params):
    """Kinds whose judges' scores are shown beside their validation against expert labels."""

    judge_validation: str | None = param(None, help="a judge-validation results.json: validated accuracy and kappa "
                                         "beside each judge", group="judges", path=True)

    def check(self) -> None:
        super().check()
        if self.judge_validation is not None and check_files() and not resolve_path(self.judge_validation).is_file():
            raise ParameterError(f"parameter judge_validation: file not found: {self.judge_validation} (a "
                                 "results.json written by notebooks/judge_validation.ipynb)")


@dataclass(kw_only=True)
class ExpertLabelled(Params):
    """Kinds whose judged scores an expert's labels of a random draw can correct (PPI++)."""

    expert_labels: str | dict | None = param(
        None, help="filled labelling sheet(s) (`evekit label sample RUN_DIR --n N`): each judged score is also "
        "corrected by them; a win rate with several comparisons: {<model_a>_vs_<model_b>: file}", group="judges")
    expert_labels_target: float | None = param(
        None, help="a half-width (e.g. 0.03): `evekit plan` says how many expert labels the corrected score "
        "needs for it, from the judges' disagreement in judge_validation or a pilot sheet", group="judges",
        minimum=0)

    def check(self) -> None:
        super().check()
        value = self.expert_labels
        sheets = [value] if isinstance(value, str) else list(value.values()) if isinstance(value, dict) else []
        for sheet in sheets:
            if not isinstance(sheet, str) or (check_files() and not resolve_path(sheet).is_file()):
                raise ParameterError(f"parameter expert_labels: file not found: {sheet} (a sheet written by "
                                     "`evekit label sample`, with its label column filled)")
        if self.expert_labels_target is not None and not 0 < self.expert_labels_target < 0.5:
            raise ParameterError(f"parameter expert_labels_target={self.expert_labels_target!r}: a half-width "
                                 "between 0 and 0.5 (e.g. 0.03)")


@dataclass(kw_only=True)
class Clustered(Params):
    """Kinds whose intervals resample clusters of items (questions from one source document, one
    exam) instead of single items: a task run (a column of its dataset), the win rate and the
    ranking (a column of the answer files)."""

    cluster_by: str | None = param(None, help="a dataset column whose values group items (e.g. the source "
                                   "document): intervals resample clusters (None: items)", group="repeats")

    def check(self) -> None:
        super().check()
        if self.cluster_by is not None and not self.cluster_by.strip():
            raise ParameterError("parameter cluster_by='' must name a column of the dataset, or be None")


@dataclass(kw_only=True)
class BothOrders(Params):
    both_orders: bool = param(True, help="pairwise judging: judge each pair both ways round (2x calls; "
                              "no effect on pointwise judges)", group="judges")


@dataclass(kw_only=True)
class Client(Params):
    """The client settings of every kind that calls models."""

    concurrency: int = param(8, help="calls in flight at once (per endpoint across a batch)", group="client",
                             minimum=1)
    timeout: float = param(120.0, help="seconds per call", group="client", minimum=0)
    max_retries: int = param(4, help="retries of a failed call, with backoff", group="client", minimum=0)
    cache_dir: str = param("outputs/cache", help="every call is cached here; a rerun resumes", group="client",
                           path=True)
    offline: bool = param(False, help="True: replay from the cache only, a miss is an error", group="client")
    min_interval: float = param(0.0, help="seconds between the starts of two calls of one client (EVE's "
                                "rate_limit_delay); 0: none", group="client", minimum=0)

    @property
    def cache_path(self) -> Path:
        return cache_path(self.cache_dir)

    def client_settings(self) -> dict[str, Any]:
        """The keyword arguments every model client and judge panel of the run takes."""
        return {"concurrency": self.concurrency, "timeout": self.timeout, "max_retries": self.max_retries,
                "cache_dir": self.cache_path, "offline": self.offline, "min_interval": self.min_interval}


@dataclass(kw_only=True)
class Output(Params):
    run_name: str = param("demo", help="outputs go to <output_dir>/<run_name>/...", group="output")
    output_dir: str = param("outputs", help="root folder of every run", group="output", path=True)
    # Every kind can log its run to an experiment tracker (evekit.tracking; the evekit[tracking] extra).
    tracking: dict | str | None = param(None, help='None: off; "mlflow", "wandb" or {backend, uri, project, entity, '
                                        "run_name, tags, log, sample_count, log_replays}", group="output")

    def check(self) -> None:
        super().check()
        TrackingConfig.from_param(self.tracking)

    @property
    def tracking_config(self) -> TrackingConfig | None:
        """The `tracking` parameter, checked (None: the run is not tracked)."""
        return TrackingConfig.from_param(self.tracking)

    def as_dict(self) -> dict[str, Any]:
        out = super().as_dict()
        cfg = self.tracking_config
        out["tracking"] = cfg.public() if cfg is not None else None
        return out

    @property
    def run_dir(self) -> Path:
        """<output_dir>/<run_name> (the name made safe as a folder name)."""
        from evekit.paths import safe_name

        return output_path(self.output_dir) / safe_name(self.run_name)
