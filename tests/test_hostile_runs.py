"""Hostile cases that need a real `evekit run` (issue 24): every call failed, a failed re-run over an
older result, and a batch killed with SIGKILL half-way then run again. A stub server stands in for
the model (tests/stub_server.py) and counts what it was sent."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pandas as pd

from evekit.paths import REPO_ROOT

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stub_server import StubServer  # noqa: E402


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _evekit(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evekit.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=_env())


def _task_file(folder: Path, name: str, base_url: str, tmp: Path, **extra: object) -> Path:
    values = {"model_name": "m", "base_url": base_url, "dataset": str(REPO_ROOT / "data" / "mcqa_single_answer.jsonl"),
              "limit": 4, "num_fewshot": 0, "max_retries": 0, "timeout": 10, "concurrency": 2,
              "cache_dir": str(tmp / "cache"), "output_dir": str(tmp / "out"), "run_name": "r", **extra}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in values.items()))
    return path


def test_a_run_where_every_call_failed_exits_non_zero_and_shows_no_score(tmp_path):
    with StubServer(fault_rate=1.0, faults=("500",)) as stub:
        params = _task_file(tmp_path / "params", "mcqa_single_answer.yaml", stub.base_url, tmp_path)
        done = _evekit(["run", str(params)], tmp_path)
        assert stub.stats()["total"] >= 4
    assert done.returncode != 0, done.stdout[-2000:]
    assert "every one of its model calls failed (4 of 4): HTTP 500" in done.stderr, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    run_dir = tmp_path / "out" / "r"
    index = (run_dir / "index.html").read_text()
    assert "ALL CALLS FAILED" in index
    results = json.loads((run_dir / "m" / "mcqa_single_answer" / "results.json").read_text())
    assert all(m.get("value") is None for m in results["metrics"].values())  # no score anywhere
    attempt = json.loads((run_dir / ".evekit-attempts" / "mcqa_single_answer.json").read_text())
    assert attempt["status"] == "all_failed"


def test_a_failed_rerun_leaves_the_older_result_marked_stale(tmp_path):
    with StubServer() as stub:
        params = _task_file(tmp_path / "params", "mcqa_single_answer.yaml", stub.base_url, tmp_path)
        first = _evekit(["run", str(params)], tmp_path)
        assert first.returncode == 0, first.stderr[-3000:]
        index = (tmp_path / "out" / "r" / "index.html").read_text()
        assert "stale" not in index.split("<body>")[1].split("Glossary")[0]
    # The endpoint is gone and the parameters changed (another temperature: nothing cached).
    _task_file(tmp_path / "params", "mcqa_single_answer.yaml", stub.base_url, tmp_path, temperature=0.5)
    second = _evekit(["run", str(params)], tmp_path)
    assert second.returncode != 0
    index = (tmp_path / "out" / "r" / "index.html").read_text()
    assert "stale: from" in index and "other parameters" in index and "failed" in index
    assert "FAILED: mcqa_single_answer" in index  # the failed run's own report is listed too


def _clean_of_half_files(folder: Path) -> None:
    """Every JSON, CSV and notebook under `folder` reads whole."""
    for path in folder.rglob("*"):
        if path.name.startswith(".") and path.suffix == ".tmp":
            continue  # a temporary file of a write the kill cut short: never under the real name
        if path.suffix == ".json":
            json.loads(path.read_text())
        elif path.suffix == ".csv":
            pd.read_csv(path)
        elif path.suffix == ".ipynb":
            nbformat.read(path, as_version=4)


def test_kill_9_half_way_then_rerun_resumes_from_the_cache_and_gives_the_same_results(tmp_path):
    """`evekit run --jobs 2` killed with SIGKILL while its two notebooks are calling the model; the
    re-run is not blocked by a stale lock, sends only what had not been answered (a call in flight
    at the kill at most once more), and writes the results a run never interrupted writes."""
    with StubServer(latency=0.25) as stub:
        files = [_task_file(tmp_path / "params", f"{task}.yaml", stub.base_url, tmp_path, limit=12,
                            dataset=str(REPO_ROOT / "data" / f"{task}.jsonl"))
                 for task in ("mcqa_single_answer", "open_ended")]
        proc = subprocess.Popen([sys.executable, "-m", "evekit.cli", "run", "--jobs", "2", *map(str, files)],
                                cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        deadline = time.monotonic() + 300
        while stub.stats()["total"] < 8 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        os.killpg(proc.pid, signal.SIGKILL)  # the runner, its kernels and kernel server at once
        proc.wait()
        proc.stdout.close()
        before = stub.stats()
        assert 8 <= before["total"] < 24, before["total"]  # killed half-way
        _clean_of_half_files(tmp_path / "out")
        again = _evekit(["run", "--jobs", "2", *map(str, files)], tmp_path)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        after = stub.stats()
    sent_twice = {p: n for p, n in after["requests"].items() if n > 1}
    answered_before = {p for p, n in before["answered"].items() if n}
    # A call answered before the kill was cached: never paid again. Only calls in flight at the
    # kill (at most concurrency x jobs = 4) may have been sent twice.
    lost = answered_before & set(sent_twice)  # answered by the server, never received or cached
    print(f"killed after {before['total']} of 24 calls; the re-run sent {after['total'] - before['total']}, "
          f"{len(sent_twice)} of them a second time ({len(lost)} answered by the server as the kill came)")
    # At most the calls in flight at the kill (the endpoint's limit, 2) and the answers of the last
    # moment (the cache writer commits every 10 ms) are sent again; everything else came from the cache.
    assert len(sent_twice) <= 4, sent_twice
    assert after["total"] == 24 + len(sent_twice)
    assert len(lost) <= 2, lost
    _clean_of_half_files(tmp_path / "out")
    assert not list((tmp_path / "out").rglob(".*.tmp"))  # the re-run cleared what the kill's writes left
    # The same results as a run never interrupted (a fresh output folder replaying the same cache).
    fresh = tmp_path / "fresh"
    for f in files:
        f.write_text(f.read_text().replace(str(tmp_path / "out"), str(fresh)) + "offline: true\n")
    replay = _evekit(["run", "--jobs", "2", *map(str, files)], tmp_path)
    assert replay.returncode == 0, replay.stderr[-3000:]
    for task in ("mcqa_single_answer", "open_ended"):
        a = pd.read_csv(tmp_path / "out" / "r" / "m" / task / "samples.csv")
        b = pd.read_csv(fresh / "r" / "m" / task / "samples.csv")
        pd.testing.assert_frame_equal(a, b)


def test_a_full_output_disk_is_one_clear_message_and_leaves_no_half_file(tmp_path):
    """output_dir on a 256 KB tmpfs (root only) that fills while the notebook saves: `evekit run`
    fails with one line naming the file, no traceback, no 0-byte or half-written file; the answers
    are in the cache (elsewhere), so the re-run on a disk with room sends nothing."""
    import pytest

    if os.geteuid() != 0 or sys.platform != "linux":
        pytest.skip("a tmpfs needs root on Linux")
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs")
    try:
        with StubServer() as stub:
            params = _task_file(tmp_path / "params", "mcqa_single_answer.yaml", stub.base_url, tmp_path,
                                output_dir=str(mnt), limit=40)
            done = _evekit(["run", str(params)], tmp_path)
            sent = stub.stats()["total"]
            assert done.returncode != 0, done.stdout[-2000:]
            assert "the disk is full" in done.stderr, done.stderr[-3000:]
            print(done.stderr[-1500:])
            assert "Traceback" not in done.stderr and "NotJSONError" not in done.stderr, done.stderr[-3000:]
            for path in mnt.rglob("*"):
                if path.is_file() and not path.name.startswith("."):
                    assert path.stat().st_size > 0, path
            _clean_of_half_files(mnt)
            roomy = tmp_path / "roomy"
            params.write_text(params.read_text().replace(str(mnt), str(roomy)))
            again = _evekit(["run", str(params)], tmp_path)
            assert again.returncode == 0, again.stderr[-3000:]
            assert stub.stats()["total"] == sent  # every answer was in the cache
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_two_evekit_runs_on_one_folder_the_second_is_refused_and_the_first_is_unharmed(tmp_path):
    """Issue 24.10: the second `evekit run` on the same run folder is refused at once (exit 2, the
    folder and the first run's pid named), sends nothing, and the first run's results, run.json and
    index are its own."""
    with StubServer(latency=2.0) as stub:  # the first run calls for 20 s (20 items, 2 at a time)
        params = _task_file(tmp_path / "params", "mcqa_single_answer.yaml", stub.base_url, tmp_path, limit=20)
        first = subprocess.Popen([sys.executable, "-m", "evekit.cli", "run", str(params)], cwd=tmp_path, env=_env(),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while stub.stats()["total"] == 0 and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.05)
        sent = stub.stats()["total"]
        second = _evekit(["run", str(params)], tmp_path)
        assert first.poll() is None, "the first run ended before the second was tried: make it slower"
        out, err = first.communicate(timeout=300)
        assert first.returncode == 0, err[-3000:]
    assert second.returncode == 2, second.stdout[-2000:] + second.stderr[-2000:]
    assert f"{tmp_path / 'out' / 'r'}: another evekit run (pid {first.pid})" in second.stderr
    assert "nothing was run" in second.stderr and sent > 0
    index = (tmp_path / "out" / "r" / "index.html").read_text()
    assert "FAILED" not in index and not (tmp_path / "out" / "r" / "failed").exists()
