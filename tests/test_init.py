"""`evekit init` writes a complete, commented set of parameter files; `evekit plan` and `evekit run` on
them from a folder outside the checkout put everything in that folder; the README's walkthrough runs
as written (a stub server standing in for both endpoints)."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evekit.errors import ParameterError
from evekit.paths import REPO_ROOT
from evekit.scaffold import init_files, parse_judge, parse_model


def _evekit(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 900):
    return subprocess.run([sys.executable, "-m", "evekit.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def test_parse_judge_and_model():
    assert parse_judge("gpt=gpt-4o-mini@https://api.openai.com/v1", "K") == {
        "name": "gpt", "model": "gpt-4o-mini", "base_url": "https://api.openai.com/v1", "api_key_env": "K"}
    assert parse_model("Qwen/Qwen3-8B@http://localhost:8000/v1") == ("Qwen/Qwen3-8B", "http://localhost:8000/v1")
    with pytest.raises(ParameterError, match="NAME=MODEL@URL"):
        parse_judge("gpt@https://x")


def test_init_writes_every_kind_with_comments_and_checked_values(tmp_path):
    judges = [parse_judge("j=jm@http://127.0.0.1:9/v1")]
    files = init_files(tmp_path / "evals", model="Org/M", base_url="http://127.0.0.1:9/v1", judges=judges,
                       baseline=("b", "http://127.0.0.1:9/v1"))
    names = [f.name for f in files]
    assert names[0] == "judge_validation.yaml" and names[-1] == "summary.yaml"
    assert {"open_ended.yaml", "open_ended.baseline.yaml", "win_rate.yaml", "refusal.yaml"} <= set(names)
    text = (tmp_path / "evals" / "open_ended.yaml").read_text()
    assert "# any OpenAI-compatible endpoint" in text and "dataset: eve-esa/open-ended" in text
    values = yaml.safe_load(text)
    assert values["run_name"] == "Org__M" and values["model_name"] == "Org/M"
    win = yaml.safe_load((tmp_path / "evals" / "win_rate.yaml").read_text())
    assert win["model_a"][0]["file"] == "outputs/Org__M/Org__M/open_ended/samples.csv"
    with pytest.raises(ParameterError, match="unknown task"):
        init_files(tmp_path / "x", model="m", base_url="http://127.0.0.1:9/v1", tasks=["open_end"])


def _repo_outputs() -> set[str]:
    return {str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "outputs").glob("*")}


def test_init_plan_run_from_a_folder_outside_the_checkout_lands_everything_there(tmp_path):
    from stub_server import StubServer

    before = _repo_outputs()
    with StubServer(latency=0.0) as stub:
        done = _evekit(["init", "--model", "m", "--base-url", stub.base_url, "--judge", f"j=jm@{stub.base_url}",
                        "--baseline", f"b@{stub.base_url}", "--tasks", "open_ended", "mcqa_single_answer",
                        "--sample", "evals"], tmp_path)
        assert done.returncode == 0, done.stderr
        assert "evekit plan evals/*.yaml" in done.stdout and "evekit run --jobs 2 evals/*.yaml" in done.stdout
        files = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "evals").glob("*.yaml"))
        plan = _evekit(["plan", *files], tmp_path)
        assert plan.returncode == 0, plan.stderr
        assert (tmp_path / "outputs" / "plan.csv").is_file()
        run = _evekit(["run", "--jobs", "2", *files], tmp_path)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert stub.stats()["total"] > 0
    out = tmp_path / "outputs"
    for sub in ("m/m/open_ended/results.json", "m/m/mcqa_single_answer/results.json", "b/b/open_ended/samples.csv",
                "m/judge_validation/fact_check/results.json", "m/win_rate/m_vs_b/summary.csv", "m/summary",
                "m/index.html", "cache"):
        assert (out / sub).exists(), sub
    assert _repo_outputs() == before  # nothing was written into the checkout


def _walkthrough() -> list[list[str]]:
    """The evekit commands of the README's walkthrough block, continuation lines joined."""
    text = (REPO_ROOT / "README.md").read_text()
    block = re.search(r"<!-- walkthrough[^>]*-->\s*```bash\n(.*?)```", text, re.S).group(1)
    joined = re.sub(r"\\\n\s*", " ", block)
    return [shlex.split(line.split("  #")[0]) for line in joined.splitlines() if line.startswith("evekit ")]


def test_the_readme_walkthrough_runs_as_written(tmp_path):
    from stub_server import StubServer

    commands = _walkthrough()
    assert [c[1] for c in commands] == ["init", "plan", "run"]
    with StubServer(latency=0.0) as stub:
        urls = {"http://localhost:8000/v1", "http://localhost:8001/v1", "https://api.openai.com/v1"}

        def local(arg: str) -> str:
            for url in urls:
                arg = arg.replace(url, stub.base_url)
            return arg

        for command in commands:
            args = [local(a) for a in command[1:]]
            if command[1] == "init":
                args += ["--tasks", "open_ended"]  # one task keeps the test short; the rest is as written
            else:  # the shell's glob
                args = [a for a in args if "*" not in a] + sorted(
                    str(p.relative_to(tmp_path)) for p in (tmp_path / "evals").glob("*.yaml"))
            done = _evekit(args, tmp_path, env={"OPENAI_API_KEY": "sk-test-not-a-key"})
            assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
    assert (tmp_path / "outputs" / "Qwen__Qwen3-8B" / "index.html").is_file()
    leaked = [p for p in tmp_path.rglob("*") if p.is_file() and "sk-test-not-a-key" in p.read_text(errors="ignore")]
    assert leaked == []


def test_plan_works_on_every_committed_example_offline_without_keys(tmp_path):
    """`evekit plan` on the committed examples from a folder outside the checkout, with the Hub out of
    reach and no key variable set: the demo, the examples and EVE's files are planned (nothing is
    sent, so no key is needed); the hub-backed local and hosted examples name the one `evekit
    prepare` command that copies their datasets."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "EVEKIT_SERVER_URL"}
    env["HF_HUB_OFFLINE"] = "1"

    def plan(*folders: str):
        files = sorted(str(p) for f in folders for p in (REPO_ROOT / "params" / f).glob("*.yaml"))
        return subprocess.run([sys.executable, "-m", "evekit.cli", "plan", *files], cwd=tmp_path, capture_output=True,
                              text=True, timeout=600, env=env)

    before = _repo_outputs()
    done = plan("demo", "examples")
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "outputs" / "plan.csv").is_file()
    done = plan("eve")
    assert done.returncode == 0, done.stderr[-3000:]
    done = plan("local", "hosted")
    assert done.returncode == 2
    assert ("`evekit prepare --dataset eve-esa/mcqa-single-answer --dataset eve-esa/open-ended`" in done.stderr
            or "`evekit prepare --dataset eve-esa/open-ended --dataset eve-esa/mcqa-single-answer`" in done.stderr)
    assert _repo_outputs() == before
