"""EVE's evalkit configuration files, run as they are: `evals.yaml` and `win_rate_config.yaml`.

A file is recognised by its content, never by its name: an `evals.yaml` has a top-level
`constants:` or a `models:` list whose entries carry `tasks`/`base_url`; a `win_rate_config.yaml`
has `model_a`/`model_b` (or EVE's `models_a`/`models_b`) together with EVE's `evaluation`,
`output` or `wandb` blocks (evekit's own win_rate.yaml has none of those).

`convert(path)` turns one EVE file into evekit runs: ordinary parameter values of evekit's
notebook kinds (one per model x task, or one win rate), each value with where it came from. The
batch runner then runs them like any parameter file (`expand_params`), and `write_eve_layout`
copies what they wrote into the layout EVE's downstream scripts read:
`<output_dir>/<model>/samples_<task>.csv`, and the win rate's `results_{model_a}_vs_{model_b}.csv`,
`summary_...csv`, `comparison_...png`. `evekit convert-eve FILE --out DIR` writes the same
parameter files for keeping (`write_param_files`).

Keys: `api_key: ${NAME}` (and EVE's `JUDGE_API_KEY` variable) are read from the environment by
NAME; a literal key is refused before anything is run or written, with the file, the line and the
fix, and is never repeated. See the README ("Coming from EVE or EuroEval") for every key.
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal, Sequence

import yaml

from evekit.atomic import write_csv_atomic, write_text_atomic
from evekit.batch.paramfiles import MAX_BYTES, _LimitedLoader, read_limited_text
from evekit.endpoints import url_credentials_problem
from evekit.errors import ParameterError, unknown_names
from evekit.paths import output_path, safe_name
from evekit.runs.kind import RunKind
from evekit.runs.task.kind import KIND as TASK_KIND
from evekit.runs.task.params import TaskParams
from evekit.runs.win_rate.eve_definitions import eve_metrics_table, eve_name, eve_summary_table
from evekit.runs.win_rate.kind import KIND as WIN_RATE_KIND
from evekit.runs.win_rate.params import WinRateParams
from evekit.tasks import TASKS
from evekit.types import check_api_key_env

__all__ = ["EVE_TASK_ALIASES", "drawn_seed", "EveRun", "EveConversion", "eve_format", "load_eve_yaml",
           "convert", "write_param_files", "expand_params", "write_eve_layout", "eve_sanitize", "normalize_base_url"]

Format = Literal["evals", "win_rate_config"]

# EVE's task names (its lm-eval task folders and the names its documentation uses) -> evekit's.
EVE_TASK_ALIASES = {
    "mcqa_multiple_answers": "mcqa_multiple_answer",
    "mcqa_multiple_answer": "mcqa_multiple_answer",
    "mcqa_single_answers": "mcqa_single_answer",
    "open-ended": "open_ended",
    "open-ended-w-context": "open_ended_w_context",
    "open_ended_with_context": "open_ended_w_context",
    "hallucination": "hallucination_detection",
}
_MULTI_JUDGE = re.compile(r"_multi_judges?$")

# EVE's keys and defaults (eve-esa/evalkit evaluate.py: ModelConfig, TaskConfig, EvaluationConfig).
EVE_TOP_KEYS = ("constants", "models", "output_dir", "wandb", "hf_token")
EVE_MODEL_KEYS = ("name", "base_url", "api_key", "tasks", "temperature", "num_concurrent", "timeout", "tokenizer")
EVE_TASK_KEYS = ("name", "task_name", "model_type", "max_tokens", "num_fewshot", "temperature", "apply_chat_template",
                 "judge_api_key", "judge_base_url", "judge_name", "judges", "batch_size", "limit")
EVE_JUDGE_KEYS = ("name", "model", "api_key", "base_url")
EVE_DEFAULTS = {"output_dir": "eval_results", "model_type": "openai-chat-completions", "max_tokens": 512,
                "num_fewshot": 0, "temperature": 0.0, "num_concurrent": 3, "timeout": 300}
WIN_TOP_KEYS = ("task", "model_a", "model_b", "models_a", "models_b", "judges", "evaluation", "output", "wandb")
WIN_EVALUATION_KEYS = ("limit", "max_workers", "rate_limit_delay", "random_seed")
WIN_OUTPUT_KEYS = ("save_results", "save_visualizations", "output_dir", "results_filename", "summary_filename",
                   "visualization_filename", "metrics_filename")
WIN_DEFAULTS = {"output_dir": "win_rate_results", "results_filename": "results_{model_a}_vs_{model_b}.csv",
                "summary_filename": "summary_{model_a}_vs_{model_b}.csv",
                "visualization_filename": "comparison_{model_a}_vs_{model_b}.png",
                "metrics_filename": "metrics_{model_a}_vs_{model_b}.csv"}
# `random_seed: null` (EVE: unseeded, "null = random") becomes a seed drawn from the file's own
# bytes (`drawn_seed`): random across configurations, the same for the same file, so a rerun replays
# its cached judge calls; the seed is recorded in the run's parameters and notes.


def drawn_seed(path: Path) -> int:
    """The seed that stands for `random_seed: null` in `path`: 31 bits of the SHA-256 of its bytes."""
    import hashlib

    return int.from_bytes(hashlib.sha256(Path(path).read_bytes()).digest()[:4], "big") >> 1
# Values local servers take for "no key": not secrets, read as no key at all.
_NO_KEY = {"", "empty", "none", "null", "no-key", "nokey", "dummy", "not-needed", "sk-no-key-required"}
_ENV_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$|^\$([A-Za-z_][A-Za-z0-9_]*)$")
_PASSED_THROUGH = "${EVEKIT_SERVER_URL}"


# -- reading: YAML with EVE's tags, every value remembering its line --------------------------------
class _Str(str):
    line: int = 0


class _Map(dict):
    line: int = 0
    lines: dict[str, int]


class _Seq(list):
    line: int = 0


@dataclass(frozen=True)
class _Tag:
    """`!ref NAME`, `!str NAME`, `!int NAME`, `!float NAME`, `!bool NAME` before resolution."""

    tag: str
    name: str
    line: int


class _EveLoader(_LimitedLoader):
    """evekit's limited SafeLoader plus EVE's tags; mappings, lists and strings keep their line."""


def _construct_tag(loader: _EveLoader, node: yaml.Node) -> _Tag:
    line = node.start_mark.line + 1
    if not isinstance(node, yaml.ScalarNode):
        raise yaml.YAMLError(f"line {line}: {node.tag} takes a name (a constant), not a list or mapping")
    return _Tag(node.tag, str(node.value), line)


def _construct_str(loader: _EveLoader, node: yaml.Node) -> _Str:
    value = _Str(loader.construct_scalar(node))
    value.line = node.start_mark.line + 1
    return value


def _construct_map(loader: _EveLoader, node: yaml.Node) -> _Map:
    loader.flatten_mapping(node)
    out = _Map()
    out.line, out.lines = node.start_mark.line + 1, {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        key = str(key) if isinstance(key, str) else key
        out[key] = loader.construct_object(value_node, deep=True)
        out.lines[key] = key_node.start_mark.line + 1
    return out


def _construct_seq(loader: _EveLoader, node: yaml.Node) -> _Seq:
    out = _Seq(loader.construct_object(n, deep=True) for n in node.value)
    out.line = node.start_mark.line + 1
    return out


for _tag in ("!ref", "!str", "!int", "!float", "!bool"):
    _EveLoader.add_constructor(_tag, _construct_tag)
_EveLoader.add_constructor("tag:yaml.org,2002:str", _construct_str)
_EveLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)
_EveLoader.add_constructor("tag:yaml.org,2002:seq", _construct_seq)


def load_eve_yaml(path: Path) -> Any:
    """The file's YAML with EVE's tags left as placeholders (resolved by `convert`); ParameterError
    naming the file for anything unreadable."""
    path = Path(path)
    text = read_limited_text(path, "a configuration file")
    try:
        return yaml.load(text, Loader=_EveLoader)  # noqa: S506
    except yaml.YAMLError as exc:
        raise ParameterError(f"{path}: not valid YAML: {exc}") from None


def eve_format(path: str | Path) -> Format | None:
    """'evals', 'win_rate', or None (not an EVE file: an evekit parameter file, or unreadable)."""
    path = Path(path)
    if not path.is_file() or path.suffix.lower() not in (".yaml", ".yml"):
        return None
    try:
        data = load_eve_yaml(path)
    except ParameterError:
        # A file with EVE's tags that does not read is EVE's: `convert` then says what is wrong.
        text = path.read_text(encoding="utf-8", errors="replace")[:MAX_BYTES]
        return "evals" if re.search(r"!(ref|str|int|float|bool)\b", text) else None
    return _format_of(data)


def _format_of(data: Any) -> Format | None:
    if not isinstance(data, dict):
        return None
    models = data.get("models")
    if "constants" in data or (isinstance(models, list) and any(
            isinstance(m, dict) and ("tasks" in m or "base_url" in m) for m in models)) or isinstance(models, _Tag):
        return "evals"
    if ("model_a" in data or "models_a" in data) and (
            {"evaluation", "output", "wandb", "models_a", "models_b"} & set(data)):
        return "win_rate_config"
    return None


# -- converted runs ------------------------------------------------------------------------------
@dataclass
class EveRun:
    """One evekit run made from an EVE file: its parameter file's name, the values (evekit's
    parameter names), where each came from, and what EVE's layout needs after it ran."""

    filename: str
    kind: RunKind  # the task kind or the win-rate kind (evekit.runs.registry)
    values: dict[str, Any]
    origins: dict[str, str]
    eve: dict[str, Any] = field(default_factory=dict)

    def params(self) -> Any:
        """The validated evekit parameters (files and key variables not checked)."""
        from evekit.runs.params import files_checked

        with files_checked(False, environment=False):
            return self.kind.params.from_dict(self.values)


@dataclass
class EveConversion:
    """An EVE file as evekit runs, with what evekit does not apply (said, never silently dropped)."""

    source: Path
    format: Format
    runs: list[EveRun]
    notes: list[str] = field(default_factory=list)
    output_dir: str = ""
    tracking: dict[str, Any] | None = None


class _Where:
    """Names a place in the file for error messages: `file:line: field`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, container: Any, key: Any, field_name: str) -> str:
        line = None
        if isinstance(container, _Map):
            line = container.lines.get(key, container.line)
        elif isinstance(container, _Seq):
            item = container[key] if isinstance(key, int) and key < len(container) else None
            line = getattr(item, "line", 0) or container.line
        value = container.get(key) if isinstance(container, dict) else None
        line = getattr(value, "line", 0) or line if isinstance(value, (_Str, _Tag)) else line
        return f"{self.path}:{line}: {field_name}" if line else f"{self.path}: {field_name}"

    def error(self, container: Any, key: Any, field_name: str, message: str) -> ParameterError:
        return ParameterError(f"{self(container, key, field_name)}: {message}")


def _resolve(value: Any, constants: dict[str, Any], where: _Where, stack: tuple[str, ...] = ()) -> Any:
    """EVE's tags resolved: `!ref NAME` -> constants[NAME] (recursively), `!str/!int/!float/!bool NAME`
    -> constants[NAME] (or the literal NAME) as that type. An unknown constant, a cycle or a value
    that does not convert is an error naming the line."""
    if isinstance(value, _Tag):
        at = f"{where.path}:{value.line}"
        if value.tag == "!ref":
            if value.name not in constants:
                raise ParameterError(f"{at}: `!ref {value.name}`: no constant {value.name!r} (constants: "
                                     f"{', '.join(map(str, constants)) or 'none'})")
            if value.name in stack:
                raise ParameterError(f"{at}: `!ref {value.name}` refers to itself through "
                                     f"{' -> '.join(stack + (value.name,))}")
            return _resolve(constants[value.name], constants, where, stack + (value.name,))
        raw = _resolve(constants.get(value.name, value.name), constants, where, stack)
        kind = {"!str": str, "!int": int, "!float": float, "!bool": bool}[value.tag]
        if kind is bool and isinstance(raw, str):
            if raw.strip().lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ParameterError(f"{at}: `{value.tag} {value.name}`: {raw!r} is not a boolean")
            return raw.strip().lower() in ("true", "1", "yes")
        try:
            out = kind(raw)
        except (TypeError, ValueError):
            raise ParameterError(f"{at}: `{value.tag} {value.name}`: {raw!r} does not convert to "
                                 f"{kind.__name__}") from None
        if isinstance(out, str):
            out = _Str(out)
            out.line = value.line
        return out
    if isinstance(value, _Map):
        out_map = _Map({k: _resolve(v, constants, where, stack) for k, v in value.items()})
        out_map.line, out_map.lines = value.line, dict(value.lines)
        return out_map
    if isinstance(value, _Seq):
        out_seq = _Seq(_resolve(v, constants, where, stack) for v in value)
        out_seq.line = value.line
        return out_seq
    return value


def _plain(value: Any) -> Any:
    """Plain Python values (what is written and validated)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


def _key_env(value: Any, where: str) -> str | None:
    """A key field as the NAME of its environment variable: `${NAME}` or `$NAME`; None or a
    local server's "no key" placeholder (EMPTY, none, ...) is no key. A literal key is refused
    without being repeated."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ParameterError(f"{where}: expected `${{NAME}}` (an environment variable), got {_kind_of(value)}")
    text = value.strip()
    if text.lower() in _NO_KEY:
        return None
    m = _ENV_REF.match(text)
    if not m:
        raise ParameterError(
            f"{where}: a literal key is refused (it is not shown here, and nothing was run or written): keys "
            "are read from the environment. Export it, e.g. `export MY_API_KEY=...`, and write "
            "`${MY_API_KEY}` in its place")
    name = m.group(1) or m.group(2)
    try:
        check_api_key_env(name, where)
    except ValueError as exc:
        raise ParameterError(str(exc)) from None
    return name


def normalize_base_url(url: Any, where: str) -> str:
    """EVE's `base_url` as the client's: a trailing `/chat/completions` or `/completions` (which
    the client appends itself) and trailing slashes removed, so no path is doubled."""
    if not isinstance(url, str) or not url.strip():
        raise ParameterError(f"{where}: expected the endpoint's URL, e.g. https://api.example.com/v1")
    text = str(url).strip()
    for suffix in ("/chat/completions", "/completions"):
        stripped = text.rstrip("/")
        if stripped.lower().endswith(suffix):
            text = stripped[: -len(suffix)]
    problem = url_credentials_problem(text, where)  # a key in a URL is refused like a key in the file
    if problem:
        raise ParameterError(f"{problem} (nothing was run or written)")
    return text.rstrip("/") if text != _PASSED_THROUGH else text


def evekit_task(name: str, where: str) -> str:
    """EVE's task name (its lm-eval task, or an entry's `name` like `open_ended_multi_judge`) as
    evekit's; an error naming it and evekit's tasks when there is none."""
    key = str(name).strip()
    for candidate in (key, EVE_TASK_ALIASES.get(key), _MULTI_JUDGE.sub("", key),
                      EVE_TASK_ALIASES.get(_MULTI_JUDGE.sub("", key))):
        if candidate and candidate in TASKS:
            return candidate
    raise ParameterError(f"{where}: task {key!r} is not one evekit has; its tasks: {', '.join(TASKS)} "
                         f"(EVE's names {', '.join(sorted(EVE_TASK_ALIASES))} are read as theirs)")


eve_sanitize = eve_name  # a model name as EVE's win-rate script puts it in file names and metric keys


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", str(text)).strip("-") or "x"


def _kind_of(value: Any) -> str:
    """How an error names a value's type: YAML's words, not the reader's classes."""
    return "a mapping" if isinstance(value, dict) else "a list" if isinstance(value, list) else \
        "a text value" if isinstance(value, str) else type(value).__name__  # text is not echoed: it may be a key


def _check_keys(mapping: Any, allowed: Iterable[str], where: str, what: str) -> None:
    if not isinstance(mapping, dict):
        raise ParameterError(f"{where}: expected a mapping ({what}), got {_kind_of(mapping)}")
    unknown = [k for k in mapping if k not in set(allowed)]
    problem = unknown_names(unknown, list(allowed), what="key")
    if problem:
        if isinstance(mapping, _Map) and unknown[0] in mapping.lines:  # the line of the key itself
            where = re.sub(r":\d+: ", f":{mapping.lines[unknown[0]]}: ", where, count=1) if re.search(
                r":\d+: ", where) else f"{where}:{mapping.lines[unknown[0]]}"
        raise ParameterError(f"{where}: {problem} (keys of {what})")


def _number(value: Any, where: str, kind: type, minimum: float | None = None) -> Any:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not float(value).is_integer()):
        raise ParameterError(f"{where}: expected {'a whole number' if kind is int else 'a number'}, got {value!r}")
    value = kind(value)
    if minimum is not None and value < minimum:
        raise ParameterError(f"{where}: must be at least {minimum:g}, got {value!r}")
    return value


_TASK_PARAMS = set(TaskParams.names())
_WIN_PARAMS = set(WinRateParams.names())


# -- evals.yaml ----------------------------------------------------------------------------------
def _judges_of(entry: _Map, task: str, label: str, where: _Where, env: dict[str, str]) -> tuple[list, str, list[str]]:
    """The task entry's judges as evekit judge entries, where they came from, and notes."""
    notes: list[str] = []
    if "judges" in entry:
        judges = entry["judges"]
        if not isinstance(judges, list) or not judges:
            raise where.error(entry, "judges", f"{label}.judges" if label else "judges",
                              "expected a list of {name, model, api_key, base_url}")
        out = []
        for k, j in enumerate(judges):
            at = f"{label}.judges[{k}]" if label else f"judges[{k}]"
            _check_keys(j, (*EVE_JUDGE_KEYS, "api_key_env", "temperature", "api", "concurrency", "max_tokens",
                            "reasoning_max_chars"), where(judges, k, at), "a judge")
            for need in ("name", "model", "base_url"):
                if not j.get(need):
                    raise where.error(judges, k, f"{at}.{need}", "missing")
            judge = {"name": str(j["name"]), "model": str(j["model"]),
                     "base_url": normalize_base_url(j["base_url"], where(j, "base_url", f"{at}.base_url")),
                     "api_key_env": j.get("api_key_env") if "api_key_env" in j
                     else _key_env(j.get("api_key"), where(j, "api_key", f"{at}.api_key"))}
            judge.update({k2: _plain(v) for k2, v in j.items() if k2 not in (*EVE_JUDGE_KEYS, "api_key_env")})
            out.append(judge)
        return out, f"{label}.judges", notes
    model = entry.get("judge_name") or env.get("JUDGE_NAME")
    if not TASKS[task].judge_kind:
        if any(k in entry for k in ("judge_name", "judge_base_url", "judge_api_key")):
            notes.append(f"{label}: {task} has no judge in evekit; judge_name/judge_base_url/judge_api_key are not used")
        return [], "", notes
    if not model:
        notes.append(f"{label}: {task} is judged but no judge is given (judge_name, judges, or JUDGE_NAME / "
                     "JUDGE_BASE_URL / JUDGE_API_KEY in the environment): it runs without judges")
        return [], "", notes
    url = entry.get("judge_base_url") or env.get("JUDGE_BASE_URL")
    if not url:
        raise where.error(entry, "judge_name", f"{label}.judge_base_url",
                          "the judge has no endpoint: set judge_base_url or JUDGE_BASE_URL")
    if "judge_api_key" in entry:
        key_env = _key_env(entry["judge_api_key"], where(entry, "judge_api_key", f"{label}.judge_api_key"))
    else:
        key_env = "JUDGE_API_KEY" if "JUDGE_API_KEY" in env else None
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(model).split("/")[-1]).strip("._-") or "judge"
    source = "judge_name/judge_base_url/judge_api_key" if "judge_name" in entry else "JUDGE_NAME/JUDGE_BASE_URL/JUDGE_API_KEY"
    return ([{"name": name, "model": str(model), "base_url": normalize_base_url(url, f"{label}.judge_base_url"),
              "api_key_env": key_env}], f"{label}: {source}", notes)


def _convert_evals(path: Path, data: _Map, env: dict[str, str]) -> EveConversion:
    where = _Where(path)
    _check_keys(data, EVE_TOP_KEYS, str(path), "an EVE evals.yaml")
    constants = data.get("constants") or _Map()
    if not isinstance(constants, dict):
        raise where.error(data, "constants", "constants", "expected a mapping of names to values")
    resolved = _resolve(data, constants, where)
    notes: list[str] = []
    # A constant named like a key is a key, referenced or not (EVE's docs keep judge_api_key there).
    for key, value in (resolved.get("constants") or {}).items():
        if isinstance(value, str) and re.search(r"(api_?key|_key|token|secret|password)$", str(key), re.IGNORECASE):
            _key_env(value, where(resolved["constants"], key, f"constants.{key}"))
    for container, key, label in ((resolved, "hf_token", "hf_token"),
                                  (resolved.get("constants") or {}, "hf_token", "constants.hf_token")):
        if isinstance(container, dict) and key in container:
            name = _key_env(container[key], where(container, key, label))
            if name and name not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
                notes.append(f"{label}: the Hugging Face hub reads HF_TOKEN; export HF_TOKEN=${name}")
    wandb = resolved.get("wandb")
    if isinstance(wandb, dict) and "api_key" in wandb:
        _key_env(wandb["api_key"], where(wandb, "api_key", "wandb.api_key"))
    output_dir = str(resolved.get("output_dir") or EVE_DEFAULTS["output_dir"])
    models = resolved.get("models")
    if not isinstance(models, list) or not models:
        raise where.error(resolved, "models", "models", "expected a non-empty list of models "
                          "({name, base_url, api_key, tasks})")
    stem = safe_name(path.stem)
    runs: list[EveRun] = []
    seen_runs: set[tuple[str, str, str]] = set()
    eve_files: set[tuple[str, str]] = set()
    model_keys = (*EVE_MODEL_KEYS, *sorted(_TASK_PARAMS - {"task", "judges"}))
    task_keys = (*EVE_TASK_KEYS, *sorted(_TASK_PARAMS - {"task", "model_name"}))
    for i, m in enumerate(models):
        label = f"models[{i}]"
        _check_keys(m, model_keys, where(models, i, label), "a model")
        for need in ("name", "base_url", "tasks"):
            if m.get(need) in (None, ""):
                raise where.error(models, i, f"{label}.{need}", "missing")
        tasks = m["tasks"]
        if not isinstance(tasks, list) or not tasks:
            raise where.error(m, "tasks", f"{label}.tasks", "expected a non-empty list of tasks")
        model = str(m["name"])
        base_url = normalize_base_url(m["base_url"], where(m, "base_url", f"{label}.base_url"))
        key_env = _key_env(m.get("api_key"), where(m, "api_key", f"{label}.api_key")) \
            if "api_key_env" not in m else m["api_key_env"]
        for extra in ("tokenizer",):
            if m.get(extra):
                notes.append(f"{label}.{extra}: not used (the endpoint applies its own chat template)")
        for j, t in enumerate(tasks):
            tlabel = f"{label}.tasks[{j}]"
            if isinstance(t, str):
                entry = _Map({"name": t})
                entry.line, entry.lines = getattr(t, "line", tasks.line), {"name": getattr(t, "line", tasks.line)}
            else:
                entry = t
            _check_keys(entry, task_keys, where(tasks, j, tlabel), "a task")
            if not entry.get("name"):
                raise where.error(tasks, j, f"{tlabel}.name", "missing")
            eve_name = str(entry["name"])
            task = evekit_task(entry.get("task_name") or eve_name, where(entry, "task_name" if "task_name" in entry
                                                                       else "name", f"{tlabel}.task_name"))
            origins: dict[str, str] = {}

            def put(key: str, value: Any, origin: str) -> None:
                values[key] = value
                origins[key] = origin

            values: dict[str, Any] = {}
            put("task", task, f"{tlabel}.task_name" if "task_name" in entry else f"{tlabel}.name")
            put("model_name", model, f"{label}.name")
            put("base_url", base_url, f"{label}.base_url" + (" (its /chat/completions or /completions removed)"
                                                             if base_url != str(m['base_url']).strip().rstrip('/')
                                                             else ""))
            put("api_key_env", key_env, f"{label}.api_key" if "api_key" in m else "no key")
            model_type = str(entry.get("model_type") or EVE_DEFAULTS["model_type"])
            put("api", "chat" if "chat" in model_type.lower() else "completions",
                f"{tlabel}.model_type {model_type}" if "model_type" in entry else f"EVE's default model_type {model_type}")
            t_temp = _number(entry.get("temperature", 0.0), where(entry, "temperature", f"{tlabel}.temperature"), float, 0)
            m_temp = _number(m.get("temperature", 0.0), where(m, "temperature", f"{label}.temperature"), float, 0)
            put("temperature", t_temp if t_temp and t_temp > 0 else (m_temp or 0.0),
                f"{tlabel}.temperature" if t_temp and t_temp > 0 else
                f"{label}.temperature (EVE: the task's when above 0, else the model's)" if "temperature" in m
                else "EVE's default 0.0")
            for key, src in (("max_tokens", "max_tokens"), ("num_fewshot", "num_fewshot")):
                put(key, _number(entry.get(src, EVE_DEFAULTS[src]), where(entry, src, f"{tlabel}.{src}"), int, 0 if
                                 key == "num_fewshot" else 1),
                    f"{tlabel}.{src}" if src in entry else f"EVE's default {EVE_DEFAULTS[src]}")
            if entry.get("limit") is not None:
                put("limit", _number(entry["limit"], where(entry, "limit", f"{tlabel}.limit"), int, 1), f"{tlabel}.limit")
            put("concurrency", _number(m.get("num_concurrent", EVE_DEFAULTS["num_concurrent"]),
                                       where(m, "num_concurrent", f"{label}.num_concurrent"), int, 1),
                f"{label}.num_concurrent" if "num_concurrent" in m else "EVE's default num_concurrent 3")
            put("timeout", float(_number(m.get("timeout", EVE_DEFAULTS["timeout"]),
                                         where(m, "timeout", f"{label}.timeout"), float, 0)),
                f"{label}.timeout" if "timeout" in m else "EVE's default timeout 300")
            judges, judge_origin, judge_notes = _judges_of(entry, task, tlabel, where, env)
            notes += judge_notes
            if judges:
                put("judges", judges, judge_origin)
            for key in ("batch_size", "apply_chat_template"):
                if key in entry and entry[key] not in (1, True):
                    notes.append(f"{tlabel}.{key}={entry[key]!r}: not used (evekit sends one item per call, "
                                 "`concurrency` at a time; chat endpoints apply their own template)")
            if values["api"] == "completions" and entry.get("apply_chat_template", True) is not False:
                # lm-eval formats the prompt with the tokenizer's chat template before /completions; evekit
                # has no tokenizer of the model, so the prompt differs from EVE's: say so
                notes.append(f"{tlabel}: model_type {model_type} with apply_chat_template (EVE's default true): "
                             "evekit sends the prompt to /completions as plain text, without the model's chat "
                             "template (a *-chat-completions model_type lets the server apply it)")
            # evekit's own parameters, at the model's level and then the task's (EVE ignores them).
            for src, mapping in ((label, m), (tlabel, entry)):
                for key, value in mapping.items():
                    if key in _TASK_PARAMS and key not in EVE_MODEL_KEYS + EVE_TASK_KEYS and key != "api_key_env":
                        put(key, _plain(value), f"{src}.{key} (evekit's own parameter)")
            run_name = stem
            if (run_name, model, task) in seen_runs:
                run_name = f"{stem}-{_slug(eve_name)}"
            seen_runs.add((run_name, model, task))
            put("run_name", values.pop("run_name", run_name), origins.pop("run_name", f"the file's name ({path.name})"))
            put("output_dir", values.pop("output_dir", output_dir),
                origins.pop("output_dir", "output_dir" if "output_dir" in resolved else "EVE's default output_dir"))
            put("cache_dir", values.pop("cache_dir", f"{values['output_dir']}/cache"),
                origins.pop("cache_dir", "<output_dir>/cache"))
            # EVE's layout names the file by the lm-eval task (samples_open_ended.csv); a second entry of
            # the same model on that task is named by its own entry name.
            sample_name = str(entry.get("task_name") or eve_name)
            if (model, sample_name) in eve_files:
                sample_name = eve_name if (model, eve_name) not in eve_files else f"{eve_name}_{j}"
            eve_files.add((model, sample_name))
            variant = _slug(model) + ("" if eve_name == task else f"-{_slug(eve_name)}")
            filename = f"{task}.{variant}.yaml"
            while any(r.filename == filename for r in runs):
                filename = f"{task}.{variant}-{len(runs)}.yaml"
            runs.append(EveRun(filename, TASK_KIND, values, origins,
                               {"model": model, "entry": eve_name, "eve_dir": values["output_dir"],
                                "samples": sample_name}))
    conv = EveConversion(path, "evals", runs, notes, output_dir)
    _carry_tracking(conv, wandb, where)
    for run in runs:  # every converted run is checked as `evekit run` will check it
        try:
            run.params()
        except ParameterError as exc:
            raise ParameterError(f"{path}: {run.eve['model']} / {run.eve['entry']}: {exc}") from None
    return conv


# -- win_rate_config.yaml ------------------------------------------------------------------------
def _side(data: _Map, key: str, where: _Where, base: Path) -> list[dict[str, str]]:
    entries = data.get(key)
    if isinstance(entries, dict):
        entries = [entries]
    if not isinstance(entries, list) or not entries:
        raise where.error(data, key, key, "expected {name, file} or a list of them")
    out = []
    for k, e in enumerate(entries):
        at = f"{key}[{k}]"
        _check_keys(e, ("name", "file"), where(entries, k, at) if isinstance(entries, _Seq) else where(data, key, at),
                    "a model")
        for need in ("name", "file"):
            if not e.get(need):
                raise where.error(e, need, f"{at}.{need}", "missing")
        file = str(e["file"])
        # EVE reads the file from the working directory; one next to the config file is found too.
        if not Path(file).is_absolute() and not Path(file).exists() and (base / file).exists():
            file = str((base / file).resolve())
        out.append({"name": str(e["name"]), "file": file})
    return out


def _convert_win_rate(path: Path, data: _Map, env: dict[str, str]) -> EveConversion:
    where = _Where(path)
    _check_keys(data, (*WIN_TOP_KEYS, *sorted(_WIN_PARAMS - {"model_a", "model_b"})), str(path),
                "an EVE win_rate_config.yaml")
    notes: list[str] = []
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}

    def put(key: str, value: Any, origin: str) -> None:
        values[key] = value
        origins[key] = origin

    put("task", str(data.get("task") or "open_ended"), "task" if "task" in data else "EVE's default task open_ended")
    a_key = "models_a" if "models_a" in data else "model_a"
    b_key = "models_b" if "models_b" in data else "model_b"
    if b_key not in data:
        raise where.error(data, a_key, "model_b", "missing (the models compared with model_a)")
    put("model_a", _side(data, a_key, where, path.parent), a_key)
    put("model_b", _side(data, b_key, where, path.parent), b_key)
    judges = data.get("judges")
    if not isinstance(judges, list) or not judges:
        raise where.error(data, "judges", "judges", "expected a list of {name, model, api_key, base_url}")
    entry = _Map({"judges": judges})
    entry.line, entry.lines = data.line, {"judges": data.lines.get("judges", data.line)}
    out_judges, _, _ = _judges_of(entry, values["task"] if values["task"] in TASKS else "open_ended", "", where, env)
    put("judges", out_judges, "judges")
    evaluation = data.get("evaluation") or _Map()
    _check_keys(evaluation, WIN_EVALUATION_KEYS, where(data, "evaluation", "evaluation"), "evaluation")
    if evaluation.get("limit") is not None:
        put("limit", _number(evaluation["limit"], where(evaluation, "limit", "evaluation.limit"), int, 1),
            "evaluation.limit")
    if evaluation.get("max_workers") is not None:
        put("concurrency", _number(evaluation["max_workers"], where(evaluation, "max_workers",
                                                                    "evaluation.max_workers"), int, 1),
            "evaluation.max_workers")
    seed = evaluation.get("random_seed")
    if seed is None:
        drawn = drawn_seed(path)
        put("seed", drawn, f"evaluation.random_seed is null: seed {drawn} drawn from this file's bytes (set "
                           f"random_seed: {drawn} to keep it when the file changes)")
        notes.append(f"evaluation.random_seed: null -> seed {drawn}, drawn from the file's SHA-256 and recorded in "
                     "the run's parameters (the same file draws the same seed, so a rerun replays its cache)")
    else:
        put("seed", _number(seed, where(evaluation, "random_seed", "evaluation.random_seed"), int, 0),
            "evaluation.random_seed")
    if evaluation.get("rate_limit_delay") is not None:
        put("min_interval", _number(evaluation["rate_limit_delay"], where(evaluation, "rate_limit_delay",
                                                                         "evaluation.rate_limit_delay"), float, 0),
            "evaluation.rate_limit_delay")
    put("both_orders", bool(data.get("both_orders", False)),
        "both_orders" if "both_orders" in data else "EVE judges each pair once, in a random order per question")
    output = data.get("output") or _Map()
    _check_keys(output, WIN_OUTPUT_KEYS, where(data, "output", "output"), "output")
    output_dir = str(output.get("output_dir") or WIN_DEFAULTS["output_dir"])
    handled = {"model_a", "model_b", "judges", *values}  # parameters already set from EVE's keys
    for key, value in data.items():
        if key in _WIN_PARAMS and key not in handled:
            put(key, _plain(value), f"{key} (evekit's own parameter)")
    put("run_name", values.pop("run_name", safe_name(path.stem)), origins.pop("run_name", f"the file's name ({path.name})"))
    put("output_dir", values.pop("output_dir", output_dir),
        origins.pop("output_dir", "output.output_dir" if "output_dir" in output else "EVE's default output_dir"))
    put("cache_dir", values.pop("cache_dir", f"{values['output_dir']}/cache"), origins.pop("cache_dir", "<output_dir>/cache"))
    templates = {k: str(output.get(k) or WIN_DEFAULTS[k]) for k in WIN_DEFAULTS if k != "output_dir"}
    for name, template in templates.items():
        try:
            filled = template.format(model_a="a", model_b="b")
        except (KeyError, IndexError, ValueError):
            raise where.error(output, name, f"output.{name}", f"{template!r}: only {{model_a}} and {{model_b}} "
                              "may be filled in") from None
        if Path(filled).name != filled or filled.startswith(".") or "\\" in filled:
            raise where.error(output, name, f"output.{name}", f"{template!r} must be a file name in "
                              "output.output_dir (no folder, no leading dot)")
    eve = {"eve_dir": values["output_dir"], "templates": templates,
           "save_results": bool(output.get("save_results", True)),
           "save_visualizations": bool(output.get("save_visualizations", True))}
    run = EveRun(f"{WIN_RATE_KIND.notebooks[0]}.{_slug(path.stem)}.yaml", WIN_RATE_KIND, values, origins, eve)
    conv = EveConversion(path, "win_rate_config", [run], notes, values["output_dir"])
    wandb = data.get("wandb")
    _carry_tracking(conv, wandb, where)
    try:
        run.params()
    except ParameterError as exc:
        raise ParameterError(f"{path}: {exc}") from None
    return conv


def _carry_tracking(conv: EveConversion, wandb: Any, where: _Where) -> None:
    """EVE's `wandb:` block: handed to evekit's tracking when this evekit has it, else kept aside
    with a note (never dropped silently). Its api_key, if any, must be a `${NAME}`."""
    if wandb is None:
        return
    if not isinstance(wandb, dict):
        raise ParameterError(f"{where.path}: wandb: expected a mapping")
    if "api_key" in wandb:
        _key_env(wandb["api_key"], where(wandb, "api_key", "wandb.api_key"))
    block = {k: _plain(v) for k, v in wandb.items() if k != "api_key"}
    conv.tracking = block
    if not block.get("enabled", False):
        return
    log = block.get("log")
    if isinstance(log, dict) and log.get("accuracy_rates"):
        conv.notes.append("wandb.log.accuracy_rates: accepted, nothing to log (EVE's per-answer accuracy needs a "
                          "correctness verdict per answer, which evekit's pairwise judge does not give)")
    names = TaskParams.names() if conv.format == "evals" else WinRateParams.names()
    if "tracking" in names:
        try:
            from evekit.tracking import TrackingConfig  # type: ignore[import-not-found]

            config = TrackingConfig.from_eve_wandb(block)
            if config is None:
                return
            value = config.public() if hasattr(config, "public") else config.as_dict()
        except Exception as exc:  # noqa: BLE001 - tracking never stops an evaluation
            conv.notes.append(f"wandb: not converted to evekit's tracking ({exc}); the runs go untracked")
            return
        for run in conv.runs:
            run.values["tracking"] = value
            run.origins["tracking"] = "wandb"
    else:
        conv.notes.append("wandb: kept aside; tracking is not available in this evekit, the runs go untracked")


def convert(path: str | Path, env: dict[str, str] | None = None) -> EveConversion:
    """An EVE evals.yaml or win_rate_config.yaml as evekit runs; ParameterError naming the file,
    the line and the field for anything wrong (a literal key: before anything is written)."""
    path = Path(path)
    data = load_eve_yaml(path)
    fmt = _format_of(data)
    if fmt is None:
        raise ParameterError(f"{path}: not an EVE file (an evals.yaml has `constants:` or `models:` with tasks; "
                             "a win_rate_config.yaml has model_a/model_b with evaluation/output/wandb)")
    env = dict(os.environ if env is None else env)
    return _convert_evals(path, data, env) if fmt == "evals" else _convert_win_rate(path, data, env)


# -- writing parameter files ---------------------------------------------------------------------
def _file_text(conv: EveConversion, run: EveRun, folder: Path | None = None) -> str:
    lines = [f"# Converted from EVE's {conv.source.name} ({conv.format}) by evekit.",
             "# Each value's comment says where it came from; keys are read from the environment by NAME.",
             f"# Run with: evekit run {(folder / run.filename) if folder is not None else run.filename}"]
    lines += [f"# note: {n}" for n in conv.notes]
    for key, value in run.values.items():
        text = yaml.safe_dump({key: _plain(value)}, sort_keys=False, allow_unicode=True, width=200).rstrip()
        origin = run.origins.get(key, "")
        if "\n" in text:
            lines += [f"# {key}: from {origin}", text]
        else:
            lines.append(f"{text}  # from {origin}" if origin else text)
    return "\n".join(lines) + "\n"


def write_param_files(conv: EveConversion, out_dir: str | Path) -> list[Path]:
    """One evekit parameter file per run into `out_dir`, each value commented with its origin."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for run in conv.runs:
        target = out / run.filename
        write_text_atomic(target, _file_text(conv, run, out))
        written.append(target)
    return written


def expand_params(params: Sequence[str], *, output_dir: str | None = None,
                  quiet: bool = False) -> tuple[list[str], list[EveConversion]]:
    """The parameter files of a command line with each EVE file replaced by its converted files
    (written to `<its output_dir>/evekit_params/<file stem>/`); other files pass as they are.
    Every EVE file is converted (and refused) before any is written."""
    conversions: list[tuple[int, EveConversion]] = []
    for i, p in enumerate(params):
        if eve_format(p):
            conv = convert(p)
            if output_dir is not None:
                for run in conv.runs:
                    if run.kind is TASK_KIND:  # a win rate naming EVE's path as the file declares it still finds it
                        run.eve["declared"] = str(_eve_samples_path(run).resolve())
                    run.values["output_dir"] = output_dir
                    run.origins["output_dir"] = "--output-dir"
                    run.eve["eve_dir"] = output_dir
                conv.output_dir = output_dir
            conversions.append((i, conv))
    by_index = dict(conversions)
    _chain(conv for _, conv in conversions)
    out: list[str] = []
    for i, p in enumerate(params):
        conv = by_index.get(i)
        if conv is None:
            out.append(p)
            continue
        folder = output_path(conv.output_dir) / "evekit_params" / safe_name(conv.source.stem)
        files = write_param_files(conv, folder)
        if not quiet:
            print(f"{p}: EVE's {conv.format} file, run as {len(files)} evekit run(s) "
                  f"(parameter files in {folder})", flush=True)
            for note in conv.notes:
                print(f"  note: {note}", flush=True)
        out += [str(f) for f in files]
    return out, [c for _, c in conversions]


def _eve_samples_path(run: EveRun) -> Path:
    """Where EVE's layout puts a task run's samples: <output_dir>/<model>/samples_<task>.csv."""
    return output_path(run.eve["eve_dir"]) / safe_name(run.eve["model"]) / f"samples_{safe_name(run.eve['samples'])}.csv"


def _chain(conversions: Iterable[EveConversion]) -> None:
    """A win rate of the same command line that reads a file EVE's layout will hold after an
    evals.yaml's run reads that run's samples.csv instead (the same answers, there before the
    win rate starts, so the scheduler waits for that run)."""
    conversions = list(conversions)
    made: dict[Path, Path] = {}
    for conv in conversions:
        for run in conv.runs:
            if run.kind is TASK_KIND:
                made[_eve_samples_path(run).resolve()] = run.params().out_dir / "samples.csv"
                if run.eve.get("declared"):
                    made[Path(run.eve["declared"])] = run.params().out_dir / "samples.csv"
    if not made:
        return
    for conv in conversions:
        for run in conv.runs:
            if run.kind is not WIN_RATE_KIND:
                continue
            for side in ("model_a", "model_b"):
                for entry in run.values[side]:
                    target = made.get(output_path(entry["file"]).resolve()) or made.get(Path(entry["file"]).resolve())
                    if target is not None:
                        entry["file"] = str(target)
                        run.origins[side] = f"{run.origins[side]} (EVE's samples_<task>.csv of this batch read " \
                                            "from its evekit samples.csv)"


# -- EVE's layout of outputs ---------------------------------------------------------------------
def _eve_samples(samples_csv: Path) -> "Any":
    """evekit's samples.csv with EVE's column names: `doc\\\\.Question`, `doc\\\\.Answer`, target,
    filtered_resps as "['...']" (as lm-eval writes it), then evekit's per-item columns."""
    import pandas as pd

    df = pd.read_csv(samples_csv, dtype=str, keep_default_na=False)
    renamed = {c: "doc\\\\." + c[4:] for c in df.columns if c.startswith("doc.")}
    out = df.rename(columns=renamed)
    if "doc\\\\.Answer" not in out.columns and "target" in out.columns:
        out.insert(min(2, len(out.columns)), "doc\\\\.Answer", df["target"])
    if "filtered_resps" in out.columns:
        out["filtered_resps"] = [repr([v]) for v in df["filtered_resps"]]
    return out


def write_eve_layout(conversions: Sequence[EveConversion], since: float | None = None) -> list[Path]:
    """After the runs: EVE's files beside evekit's, from what the runs wrote (`since`: only files
    written at or after that time, so a run that failed now leaves no copy of an older result)."""
    written: list[Path] = []

    def fresh(path: Path) -> bool:
        return path.is_file() and (since is None or path.stat().st_mtime >= since - 1)

    for conv in conversions:
        for run in conv.runs:
            try:
                params = run.params()
            except ParameterError:
                continue
            eve_dir = output_path(run.eve["eve_dir"])
            if run.kind is TASK_KIND:
                samples = params.out_dir / "samples.csv"
                if not fresh(samples):  # the run did not finish (or never started): nothing to copy
                    continue
                target = _eve_samples_path(run)
                target.parent.mkdir(parents=True, exist_ok=True)
                write_csv_atomic(_eve_samples(samples), target, index=False)
                written.append(target)
                continue
            from evekit.runs.params import files_checked

            with files_checked(False):
                sides = params.model_a_specs, params.model_b_specs
            for a in sides[0]:
                for b in sides[1]:
                    folder = params.run_dir / WIN_RATE_KIND.name / f"{safe_name(a.name)}_vs_{safe_name(b.name)}"
                    if not fresh(folder / "results.csv"):
                        continue
                    t = {k: v.format(model_a=eve_sanitize(a.name), model_b=eve_sanitize(b.name))
                         for k, v in run.eve["templates"].items()}
                    eve_dir.mkdir(parents=True, exist_ok=True)
                    if run.eve["save_results"]:
                        import pandas as pd

                        results = pd.read_csv(folder / "results.csv")
                        judges = [j["name"] for j in params.judges]
                        # evekit's per-decision table as it is; summary and metrics in EVE's shapes.
                        shutil.copyfile(folder / "results.csv", eve_dir / t["results_filename"])
                        write_csv_atomic(eve_summary_table(results, judges), eve_dir / t["summary_filename"])
                        metrics = t["metrics_filename"]
                        write_csv_atomic(eve_metrics_table(results, a.name, b.name, judges, params.task),
                                         eve_dir / metrics, index=False)
                        written += [eve_dir / t["results_filename"], eve_dir / t["summary_filename"], eve_dir / metrics]
                    if run.eve["save_visualizations"] and (folder / "comparison.png").is_file():
                        shutil.copyfile(folder / "comparison.png", eve_dir / t["visualization_filename"])
                        written.append(eve_dir / t["visualization_filename"])
    return written
