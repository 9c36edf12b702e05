"""environment.yml (conda) and pyproject.toml (pip) must install the same thing."""
import re
import tomllib

import yaml

from evekit.paths import REPO_ROOT as ROOT


def _name(requirement: str) -> str:
    name = re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0]
    return name.lower().replace("_", "-")


def _spec(requirement: str) -> str:
    return requirement.strip().replace(" ", "")


def test_environment_yml_matches_pyproject_dependencies():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    conda_specs = {_name(d): _spec(d) for d in conda if _name(d) not in {"python", "pip"}}
    pip_specs = {_name(d): _spec(d) for d in pyproject["project"]["dependencies"]}
    assert conda_specs == pip_specs


def test_environment_yml_installs_evekit_with_the_local_extra():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    extras = {e for line in pip_section for e in re.findall(r"\[([^\]]*)\]", line)[0].split(",")}
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "local" in extras and extras <= set(pyproject["project"]["optional-dependencies"])
