"""The per-endpoint limit of `evekit run`: shared by every client, thread and process, counted at a stub."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from evekit import batch
from evekit.endpoints import (LIMITS_ENV, SLOTS_ENV, EndpointSlots, endpoint_key, merge_limits, redact_url,
                              url_credentials_problem)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stub_server import StubServer  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def test_an_endpoint_is_scheme_host_port_and_path():
    assert endpoint_key("HTTP://LocalHost/v1/") == "http://localhost:80/v1"
    assert endpoint_key("https://api.example.com/v1") == "https://api.example.com:443/v1"
    assert endpoint_key("http://127.0.0.1:8080/v1") != endpoint_key("http://127.0.0.1:8081/v1")
    assert endpoint_key("http://h:1/v1") != endpoint_key("http://h:1/v2")
    with pytest.raises(ValueError, match="not an http"):
        endpoint_key("ftp://h/v1")


def test_the_limit_is_the_smallest_concurrency_any_run_sets():
    limits = merge_limits([("http://a:1/v1", 8), ("http://a:1/v1/", 3), ("http://b:2/v1", 5)])
    assert limits == {"http://a:1/v1": 3, "http://b:2/v1": 5}


def test_slots_are_exclusive_within_a_process_and_freed(tmp_path):
    slots = EndpointSlots("http://a:1/v1", 2, tmp_path)
    other = EndpointSlots("http://a:1/v1", 2, tmp_path)   # a second client of the same process
    a, b = slots.try_acquire(), slots.try_acquire()
    assert {a, b} == {0, 1}
    assert slots.try_acquire() is None and other.try_acquire() is None
    slots.release(a)
    assert other.try_acquire() == a


def test_endpoint_limits_of_a_batch_take_judges_and_defaults_into_account(tmp_path):
    from evekit.batch.paramfiles import read_run_file
    from evekit.paths import REPO_ROOT

    model = "model_name: m\nbase_url: 'http://m:1/v1'\n"
    (tmp_path / "open_ended.yaml").write_text(  # the run's concurrency is the default, 8
        model + "judges:\n  - {name: a, model: j, base_url: 'http://j:1/v1'}\n"
        "  - {name: b, model: k, base_url: 'http://k:1/v1', concurrency: 2}\n")
    (tmp_path / "open_ended.x.yaml").write_text(model + "concurrency: 4\njudges: []\n")
    (tmp_path / "open_ended.off.yaml").write_text(model + "concurrency: 1\noffline: true\n")  # sends nothing
    files = [read_run_file(f, REPO_ROOT / "notebooks", check_files=False) for f in sorted(tmp_path.glob("*.yaml"))]
    assert batch.endpoint_limits(files) == {"http://m:1/v1": 4, "http://j:1/v1": 8, "http://k:1/v1": 2}


WORKER = textwrap.dedent("""
    import pathlib, sys, time
    from evekit.client import ModelClient
    from evekit.types import GenerationRequest
    base_url, tag, barrier, n = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3]), int(sys.argv[4])
    client = ModelClient("stub", base_url, concurrency=8, progress=False)
    # Start sending together: the processes' start-up (imports) takes longer than their calls.
    (barrier / tag).touch()
    while len(list(barrier.iterdir())) < n:
        time.sleep(0.01)
    reqs = [GenerationRequest(messages=({"role": "user", "content": f"{tag} {i}"},)) for i in range(24)]
    assert all(not r.failed for r in client.generate(reqs))
""")


def _workers(base_url: str, n: int, env: dict[str, str]) -> None:
    import tempfile

    full = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", **env}
    barrier = tempfile.mkdtemp(prefix="evekit-barrier-")
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, base_url, f"p{i}", barrier, str(n)], env=full)
             for i in range(n)]
    assert [p.wait(timeout=120) for p in procs] == [0] * n


def test_processes_sharing_an_endpoint_never_exceed_its_limit(tmp_path):
    with StubServer(latency=0.05) as stub:
        # Without the limit the stub sees the clients' own concurrency add up (so the count works) ...
        _workers(stub.base_url, 3, {})
        unlimited = stub.stats()["peak_in_flight"]
        assert unlimited > 8
        stub.reset()
        # ... with it, three processes of concurrency 8 share 3 slots.
        limits = {endpoint_key(stub.base_url): 3}
        _workers(stub.base_url, 3, {LIMITS_ENV: json.dumps(limits), SLOTS_ENV: str(tmp_path)})
        stats = stub.stats()
    assert stats["peak_in_flight"] == 3
    assert sum(stats["answered"].values()) == 72


def _client_notebook(path: Path, n: int) -> None:
    params = new_code_cell(f'run_name = "t"\noutput_dir = "outputs"\nbase_url = ""\nconcurrency = 8\ntag = "x"')
    params.metadata["tags"] = ["parameters"]
    body = new_code_cell(textwrap.dedent(f"""
        from evekit.client import ModelClient
        from evekit.types import GenerationRequest
        client = ModelClient("stub", base_url, concurrency=concurrency, progress=False)
        reqs = [GenerationRequest(messages=({{"role": "user", "content": f"{{tag}} {{i}}"}},)) for i in range({n})]
        assert all(not r.failed for r in client.generate(reqs))
    """))
    nb = new_notebook(cells=[params, body])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def test_notebooks_run_side_by_side_share_the_endpoint_limit_and_log_with_their_name(tmp_path, capfd):
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    _client_notebook(nb_dir / "calls.ipynb", 30)
    with StubServer(latency=0.1) as stub:
        files = []
        for i, conc in enumerate((8, 8, 3)):  # the smallest concurrency of any run is the endpoint's limit
            f = tmp_path / f"calls.n{i}.yaml"
            f.write_text(f"base_url: {stub.base_url}\nconcurrency: {conc}\ntag: n{i}\n")
            files.append(str(f))
        t0 = time.monotonic()
        code = batch.run_batch(files, output_dir=str(tmp_path / "out"), notebooks_dir=str(nb_dir),
                               progress_every=0, html=False, jobs=3)
        stats = stub.stats()
    out, err = capfd.readouterr()
    assert code == 0, err
    assert stats["peak_in_flight"] == 3, stats["peak_in_flight"]
    assert sum(stats["answered"].values()) == 90
    for i in range(3):
        assert f"[calls.n{i}] running calls" in out and f"[calls.n{i}]   ok in" in out
    assert f"3 to {endpoint_key(stub.base_url)}" in out
    assert time.monotonic() - t0 < 120


def test_jobs_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="jobs"):
        batch.run_batch([], jobs=0)


def test_phases_are_data_driven_and_ranking_runs_with_win_rate():
    files = [Path(p) for p in ("summary.yaml", "ranking.yaml", "win_rate.yaml", "refusal.yaml",
                               "judge_validation.fact.yaml", "open_ended.yaml")]
    assert [[f.name for f in g] for g in batch.phases(files)] == [
        ["judge_validation.fact.yaml"], ["refusal.yaml", "open_ended.yaml"],
        ["ranking.yaml", "win_rate.yaml"], ["summary.yaml"]]


# -- credentials in a URL ----------------------------------------------------------------------
KEY = "sk-proj-SENTINEL99"


@pytest.mark.parametrize("url, part", [
    (f"http://user:{KEY}@host:8080/v1", "user name or password"),
    ("http://user:hunter2@host/v1", "user name or password"),
    (f"http://{KEY}@host/v1", "user name or password"),
    (f"http://host/v1?key={KEY}", "query parameter 'key'"),
    ("http://host/v1?key=plainvalue", "query parameter 'key'"),
    ("http://host/v1?api_key=x", "'api_key'"), ("http://host/v1?apikey=x", "'apikey'"),
    ("http://host/v1?API-KEY=x", "'API-KEY'"), ("http://host/v1?x-goog-api-key=x", "'x-goog-api-key'"),
    ("http://host/v1?token=x", "'token'"), ("http://host/v1?access_token=x", "'access_token'"),
    ("http://host/v1?auth=x", "'auth'"), ("http://host/v1?signature=x", "'signature'"),
    ("http://host/v1?sig=x", "'sig'"), ("http://host/v1?password=x", "'password'"),
    ("http://host/v1?client_secret=x", "'client_secret'"), ("http://host/v1?subscription-key=x", "'subscription-key'"),
    (f"http://host/v1?q={KEY}", "looks like a key"),
    (f"http://host/{KEY}/v1", "path segment"),
    ("http://host/v1#token=x", "fragment parameter 'token'"),
])
def test_a_credential_in_a_url_is_named_never_shown(url, part):
    problem = url_credentials_problem(url, "judge 'j': base_url")
    assert problem is not None and part in problem, problem
    assert problem.startswith("judge 'j': base_url ") and "api_key_env" in problem and "export " in problem
    secret = KEY if KEY in url else ("hunter2" if "hunter2" in url else ("plainvalue" if "plainvalue" in url else "=x"))
    assert secret not in problem and secret not in redact_url(url)
    assert redact_url(url) in problem and "***" in redact_url(url)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/v1", "https://api.openai.com/v1",
                                 "https://x.openai.azure.com/openai/v1?api-version=2024-06-01",
                                 "http://[::1]:8080/v1", "${EVEKIT_SERVER_URL}", "http://host/v1?model=key"])
def test_an_ordinary_url_has_no_problem_and_is_not_redacted(url):
    assert url_credentials_problem(url) is None
    assert redact_url(url) == url


def test_redaction_keeps_what_is_not_secret():
    assert redact_url("https://u:p@host:8443/v1/?api-version=1&key=s#x") == \
        "https://***@host:8443/v1/?api-version=1&key=***#x"
    assert redact_url("http://[bad") == "***"  # unparseable: nothing of it is shown
