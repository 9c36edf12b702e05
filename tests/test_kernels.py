"""`evekit run`'s warm kernels (evekit.kernels), its scheduler (`waits_for`) and Ctrl-C with --jobs.

A forked kernel must be indistinguishable from a fresh one: the probe notebook prints everything
we know a library decides at import time from its surroundings, and every output is compared.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from evekit import batch
from evekit.runs.records import EXECUTION_ENV

ROOT = Path(__file__).resolve().parent.parent

PROBE = '''
import os, sys
import pandas as pd
import matplotlib
import matplotlib.pyplot as plt
from tqdm.auto import tqdm
print("max_columns", pd.get_option("display.max_columns"))
print("backend", matplotlib.get_backend())
print("tqdm widgets", any(c.__module__ == "tqdm.notebook" for c in tqdm.__mro__))
print("widget targets", sorted(get_ipython().kernel.comm_manager.targets))
print("parent is the batch", os.environ.get("JPY_PARENT_PID") == str(batch_pid))
print("cwd", os.getcwd() == cwd, "path", sys.path[:3])
print("value", value, "env", os.environ.get(execution_env, "").startswith(name + "-"))
print(pd.DataFrame({f"a fairly long column name {i}": [i * 1.5] for i in range(12)}))
fig, ax = plt.subplots()
ax.plot([1, 2, 3])
plt.show()
for _ in tqdm(range(3), desc="bar"):
    pass
'''


def _notebook(path: Path, body: str, params: str) -> None:
    cell = new_code_cell(params)
    cell.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[cell, new_code_cell(body)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def _outputs(executed: Path) -> list[tuple[str, str]]:
    """(output type, text or the sorted mime types) of every output, ids and images left out."""
    nb = nbformat.read(executed, as_version=4)
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            if o.output_type == "stream":
                out.append(("stream", o.text))
            else:
                data = o.get("data", {})
                out.append((o.output_type, data.get("text/plain", "") if "image/png" not in data
                            else "image/png " + " ".join(sorted(data))))
    return out


def _probe_batch(tmp_path: Path, fresh: bool) -> dict[str, list[tuple[str, str]]]:
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir(exist_ok=True)
    _notebook(nb_dir / "probe.ipynb", PROBE,
              f'run_name = "t"\noutput_dir = "outputs"\nvalue = 0\nname = ""\nbatch_pid = {os.getpid()}\n'
              f'cwd = {str(ROOT)!r}\nexecution_env = {EXECUTION_ENV!r}')
    params = tmp_path / "params"
    params.mkdir(exist_ok=True)
    for variant in ("a", "b"):
        (params / f"probe.{variant}.yaml").write_text(f"value: {variant!r}\nname: probe.{variant}\n")
    out = tmp_path / ("fresh" if fresh else "forked")
    code = batch.run_batch(sorted(str(p) for p in params.glob("*.yaml")), output_dir=str(out),
                           notebooks_dir=str(nb_dir), html=False, progress_every=0, fresh_kernels=fresh)
    assert code == 0
    return {p.stem: _outputs(p) for p in sorted((out / "t" / "notebooks").glob("*.ipynb"))}


def test_a_forked_kernel_gives_the_same_outputs_as_a_fresh_one(tmp_path, monkeypatch):
    monkeypatch.delenv("EVEKIT_FRESH_KERNELS", raising=False)
    started = []
    real_spawn = __import__("evekit.batch.kernels", fromlist=["KernelServer"]).KernelServer.spawn

    def spawn(self, *args, **kw):
        pid = real_spawn(self, *args, **kw)
        started.append(pid)
        return pid

    monkeypatch.setattr("evekit.batch.kernels.KernelServer.spawn", spawn)
    forked = _probe_batch(tmp_path, fresh=False)
    assert len(started) == 2                                  # both kernels came from the server
    fresh = _probe_batch(tmp_path, fresh=True)
    assert len(started) == 2                                  # ... and none with --fresh-kernels
    assert forked == fresh
    text = "".join(t for kind, t in forked["probe.a"] if kind == "stream")
    assert "max_columns 20" in text and "backend module://matplotlib_inline.backend_inline" in text
    assert "tqdm widgets True" in text and "jupyter.widget" in text
    assert "parent is the batch True" in text and "cwd True path" in text and "value a env True" in text
    assert any(kind == "display_data" and t.startswith("image/png") for kind, t in forked["probe.a"])


def test_a_kernel_server_that_cannot_start_falls_back_to_fresh_kernels(tmp_path, monkeypatch, capsys):
    def broken(self, *args, **kw):
        raise RuntimeError("the kernel server exited")

    monkeypatch.setattr("evekit.batch.kernels.KernelServer.spawn", broken)
    forked = _probe_batch(tmp_path, fresh=False)
    assert "a kernel starts without the warm kernel server (the kernel server exited)" in capsys.readouterr().err
    assert set(forked) == {"probe.a", "probe.b"}


def test_forked_kernel_process_handle_sees_the_kernel_die():
    from evekit.batch.kernels import ForkedKernelProcess

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    handle = ForkedKernelProcess(child.pid)
    assert handle.poll() is None
    handle.kill()
    child.wait(timeout=10)  # reaped by its real parent, as the kernel server reaps its kernels
    assert handle.wait(timeout=5) == 0 and handle.poll() is not None


# -- the scheduler -----------------------------------------------------------------------------
def _params_tree(tmp_path: Path, files: dict[str, str]) -> list:
    from evekit.batch.paramfiles import read_run_file
    from evekit.paths import REPO_ROOT

    paths = []
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        paths.append(tmp_path / name)
    return batch.run_order([read_run_file(p, REPO_ROOT / "notebooks", check_files=False) for p in paths])


JUDGE = "judges: [{name: j, model: m, base_url: 'http://127.0.0.1:9/v1'}]\n"
MODEL = "model_name: m\nbase_url: 'http://127.0.0.1:9/v1'\n"


def test_a_file_waits_for_what_it_reads_and_the_summary_for_everything(tmp_path):
    out = tmp_path / "outputs"
    jv_results = out / "t" / "judge_validation" / "fact_check" / "results.json"
    zero_shot = out / "t" / "m" / "open_ended" / "samples.csv"
    other = out / "t" / "x" / "open_ended" / "samples.csv"
    files = _params_tree(tmp_path, {
        "judge_validation.yaml": "run_name: t\n" + JUDGE, "mcqa_single_answer.yaml": "run_name: t\n" + MODEL,
        "open_ended.yaml": f"judge_validation: {jv_results}\n" + MODEL,
        "ranking.yaml": f"task: open_ended\nmodels:\n  - {{name: a, file: {zero_shot}}}\n  - {{name: b, file: {other}}}\n"
                        + JUDGE, "summary.yaml": "run_name: t\n"})
    needs = batch.waits_for(files)
    by = {f.path.name: f.path for f in files}
    jv, mcqa, oe, rk, summary = (by[n] for n in ("judge_validation.yaml", "mcqa_single_answer.yaml",
                                                  "open_ended.yaml", "ranking.yaml", "summary.yaml"))
    assert needs[jv].met({}) and needs[mcqa].met({})               # they read nothing the batch writes
    assert not needs[oe].met({})                                     # it shows the judge validation
    assert needs[oe].met({jv: [jv_results.parent]})                  # ... which jv wrote
    assert not needs[rk].met({jv: [jv_results.parent], mcqa: []})    # its answer files are not written yet
    assert needs[rk].met({jv: [jv_results.parent], oe: [zero_shot.parent, other.parent]})  # now: mcqa may run
    assert not needs[summary].met({jv: [], mcqa: [], oe: [zero_shot.parent]})
    assert needs[summary].met({jv: [], mcqa: [], oe: [], rk: []})
    assert needs[rk].met({jv: [], mcqa: [], oe: []})                 # a failed producer: once all have run


def test_the_scheduler_starts_each_file_when_its_needs_are_met_and_keeps_both_slots_busy():
    files = [Path(n) for n in ("jv.yaml", "a.yaml", "b.yaml", "c.yaml", "summary.yaml")]
    jv, a, b, c, summary = files
    needs = {jv: batch.Needs([], []), a: batch.Needs([], []), c: batch.Needs([], []),
             b: batch.Needs([jv], [Path("/out/jv/results.json")]), summary: batch.Needs([jv, a, b, c], None)}
    seconds = {jv: 0.6, a: 0.2, b: 0.2, c: 0.2, summary: 0.1}
    log: dict[Path, tuple[float, float]] = {}
    lock = threading.Lock()
    t0 = time.monotonic()

    def run(f: Path, prefix: str) -> tuple[bool, None, list[Path]]:
        start = time.monotonic() - t0
        time.sleep(seconds[f])
        with lock:
            log[f] = (start, time.monotonic() - t0)
        return f != c, None, [Path("/out/jv")] if f == jv else []

    results = batch._run_scheduled(files, needs, 2, run)
    assert [(f, ok) for f, ok, _ in results] == [(f, f != c) for f in files]   # in order, failures kept
    assert log[a][0] < 0.1 and log[c][0] < 0.5                  # tasks do not wait for judge validation
    assert log[b][0] >= log[jv][1] - 0.01                       # ... unless they read it
    assert log[summary][0] >= max(end for f, (_, end) in log.items() if f != summary) - 0.01


# -- Ctrl-C with --jobs 2 ----------------------------------------------------------------------
def test_ctrl_c_with_jobs_stops_the_running_notebooks_at_once(tmp_path):
    from conftest import default_sigint

    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    pids = tmp_path / "pids"
    pids.mkdir()
    _notebook(nb_dir / "slow.ipynb",
              f"import os, time\nopen(os.path.join({str(pids)!r}, str(os.getpid())), 'w').close()\ntime.sleep(300)",
              'run_name = "t"\noutput_dir = "outputs"\nvalue = 1')
    params = []
    for variant in ("a", "b", "c"):
        p = tmp_path / f"slow.{variant}.yaml"
        p.write_text("value: 2\n")
        params.append(str(p))
    proc = subprocess.Popen([sys.executable, "-m", "evekit.cli", "run", "--jobs", "2", "--no-html",
                             "--notebooks-dir", str(nb_dir), "--output-dir", str(tmp_path / "out"), *params],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            preexec_fn=default_sigint)
    deadline = time.monotonic() + 120
    while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    kernels = [int(p.name) for p in pids.iterdir()]
    assert len(kernels) == 2, "two notebooks should be running"
    interrupted = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    took = time.monotonic() - interrupted
    assert proc.returncode == 130, err
    assert took < 20, f"Ctrl-C took {took:.1f} s"
    assert "stopped 2 running notebook kernel(s)" in err
    time.sleep(0.5)
    for pid in kernels:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert "slow.c" not in out  # the third never started
