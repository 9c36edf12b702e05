"""Parameter files: `<notebook>[.<variant>].yaml`, read and checked before anything runs."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

SERVER_URL_PLACEHOLDER = "${EVEKIT_SERVER_URL}"


def notebook_name(params_file: Path) -> str:
    return params_file.name.split(".")[0]



def _substitute(value: Any, server_url: str | None) -> Any:
    if isinstance(value, str) and SERVER_URL_PLACEHOLDER in value:
        if server_url is None:
            raise ValueError(f"{SERVER_URL_PLACEHOLDER} is used but no server was started (pass --serve)")
        return value.replace(SERVER_URL_PLACEHOLDER, server_url)
    if isinstance(value, dict):
        return {k: _substitute(v, server_url) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, server_url) for v in value]
    return value


def load_params(path: Path, server_url: str | None = None) -> dict[str, Any]:
    with open(path) as f:
        params = yaml.safe_load(f) or {}
    if not isinstance(params, dict):
        raise ValueError(f"{path}: expected a mapping of parameter names to values")
    return _substitute(params, server_url)


def notebook_defaults(notebook: Path) -> dict[str, Any]:
    """Literal default values of the notebook's `parameters` cell (what runs when a YAML omits them)."""
    import ast

    import papermill as pm

    values = {}
    for name, info in pm.inspect_notebook(str(notebook)).items():
        try:
            values[name] = ast.literal_eval(info["default"])
        except (ValueError, SyntaxError):
            pass
    return values



def check_param_files(files: list[Path], notebooks_dir: Path) -> list[str]:
    """Every problem that would stop a parameter file, found before anything runs: a missing
    file, a notebook that does not exist, YAML that is not a mapping, an unknown parameter name."""
    import papermill as pm

    from evekit.errors import unknown_names

    notebooks = sorted(p.stem for p in notebooks_dir.glob("*.ipynb"))
    problems = []
    for f in files:
        if not f.is_file():
            problems.append(f"{f}: no such file")
            continue
        name = notebook_name(f)
        if name not in notebooks:
            problems.append(f"{f}: no notebook {name!r} (a parameter file is named <notebook>[.<variant>].yaml; "
                            f"notebooks: {', '.join(notebooks)})")
            continue
        try:
            params = load_params(f, server_url="http://server.invalid")  # only the names matter here
        except (ValueError, yaml.YAMLError) as exc:
            problems.append(f"{f}: {exc}")
            continue
        known = pm.inspect_notebook(str(notebooks_dir / f"{name}.ipynb"))
        problem = unknown_names(params, known)
        if problem:
            problems.append(f"{f}: notebook {name}: {problem}")
    return problems

