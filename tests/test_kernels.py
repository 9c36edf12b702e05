"""`evekit run`'s warm kernels (evekit.batch.kernels), its scheduler (`waits_for`) and Ctrl-C with --jobs.

A forked kernel must be indistinguishable from a fresh one: the probe notebook prints everything
we know a library decides at import time from its surroundings, and every output is compared.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from evekit import batch
from evekit.batch import kernels
from evekit.runs.records import EXECUTION_ENV

ROOT = Path(__file__).resolve().parent.parent
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="warm kernels are Linux-only")


def _declared_provisioner() -> tuple[str, str, str]:
    """(group, name, object) of the provisioner entry point pyproject.toml declares."""
    points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    (name, value), = points[kernels.PROVISIONER_GROUP].items()
    return kernels.PROVISIONER_GROUP, name, value


@pytest.fixture(scope="module")
def provisioner_path(tmp_path_factory) -> str | None:
    """A folder to put on sys.path (and the PYTHONPATH of a batch run as a command) that registers
    the entry point pyproject.toml declares, when the installed evekit predates it (an editable
    install reads its entry points at install time); None when it is installed."""
    from importlib.metadata import entry_points

    group, name, value = _declared_provisioner()
    if entry_points(group=group, name=name):
        yield None
        return
    folder = tmp_path_factory.mktemp("entry_points")
    info = folder / "evekit_warm_kernel_tests-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evekit-warm-kernel-tests\nVersion: 0\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{name} = {value}\n")
    sys.path.insert(0, str(folder))
    yield str(folder)
    sys.path.remove(str(folder))


def test_the_provisioner_is_declared_as_a_jupyter_client_entry_point(provisioner_path):
    from importlib.metadata import entry_points

    from jupyter_client.provisioning.provisioner_base import KernelProvisionerBase

    group, name, value = _declared_provisioner()
    assert (name, value) == (kernels.PROVISIONER_NAME, "evekit.batch.kernels:WarmKernelProvisioner")
    (point,) = entry_points(group=group, name=name)
    assert point.load() is kernels.WarmKernelProvisioner
    assert issubclass(kernels.WarmKernelProvisioner, KernelProvisionerBase)


PROBE = '''
import os, sys
print("imported outside", sorted(m for m in ("tqdm.auto", "tqdm.autonotebook") if m in sys.modules))
import numpy as np
import scipy.linalg
import pandas as pd
import matplotlib
import matplotlib.pyplot as plt
from threadpoolctl import threadpool_info
from tqdm.auto import tqdm
print("max_columns", pd.get_option("display.max_columns"))
print("backend", matplotlib.get_backend())
print("tqdm widgets", any(c.__module__ == "tqdm.notebook" for c in tqdm.__mro__))
print("widget targets", sorted(get_ipython().kernel.comm_manager.targets))
print("blas threads", sorted((i["filepath"], i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"))
a = np.random.default_rng(0).normal(size=(300, 300))
print("eigenvalues", round(float(scipy.linalg.eigvalsh(a @ a.T).sum()), 6), round(float(np.linalg.det(a[:50, :50])), 3))
print("parent is the batch", os.environ.get("JPY_PARENT_PID") == str(batch_pid))
import signal
print("signals", [str(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD)])
print("argv", sys.orig_argv[1:3], sys.argv[0].endswith("ipykernel_launcher.py"))
print("cwd", os.getcwd() == cwd, "path", sys.path[:3])
print("value", value, "env", os.environ.get(execution_env, "").startswith(name + "-"))
print(pd.DataFrame({f"a fairly long column name {i}": [i * 1.5] for i in range(12)}))
fig, ax = plt.subplots()
ax.plot([1, 2, 3])
plt.show()
for _ in tqdm(range(3), desc="bar"):
    pass
_ = os.write(2, f"probe stderr {value}\\n".encode())
'''


def _notebook(path: Path, body: str, params: str) -> None:
    cell = new_code_cell(params)
    cell.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[cell, new_code_cell(body)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def _outputs(executed: Path) -> list[tuple[str, str]]:
    """(stream name or output type, text or the sorted mime types) of every output, ids and images
    left out; a stream's consecutive pieces joined (where the kernel cut them depends on timing)."""
    nb = nbformat.read(executed, as_version=4)
    out: list[tuple[str, str]] = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            if o.output_type == "stream" and out and out[-1][0] == o.name:
                out[-1] = (o.name, out[-1][1] + o.text)
            elif o.output_type == "stream":
                out.append((o.name, o.text))
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


@pytest.fixture
def forks(monkeypatch, provisioner_path) -> list[int]:
    """The pids of the kernels the kernel server forks from here on."""
    monkeypatch.delenv("EVEKIT_FRESH_KERNELS", raising=False)
    started: list[int] = []
    real = kernels.request_kernel

    def request_kernel(*args, **kw):
        pid = real(*args, **kw)
        started.append(pid)
        return pid

    monkeypatch.setattr(kernels, "request_kernel", request_kernel)
    return started


@linux_only
def test_a_forked_kernel_gives_the_same_outputs_as_a_fresh_one(tmp_path, forks, capsys):
    forked = _probe_batch(tmp_path, fresh=False)
    assert len(forks) == 2, capsys.readouterr().err            # both kernels came from the server
    forked_err = capsys.readouterr().err
    fresh = _probe_batch(tmp_path, fresh=True)
    assert len(forks) == 2                                      # ... and none with --fresh-kernels
    fresh_err = capsys.readouterr().err
    assert forked == fresh
    text = "".join(t for kind, t in forked["probe.a"] if kind == "stdout")
    assert "imported outside []" in text
    assert "max_columns 20" in text and "backend module://matplotlib_inline.backend_inline" in text
    assert "tqdm widgets True" in text and "jupyter.widget" in text
    threads = json.loads(subprocess.run([sys.executable, "-c", kernels._FRESH_THREADS], capture_output=True,
                                        text=True, check=True).stdout)
    blas = sorted((t["filepath"], t["num_threads"]) for t in threads if t["user_api"] == "blas")
    assert blas and f"blas threads {blas}" in text                 # a fresh interpreter's, not the server's 1
    assert "parent is the batch True" in text and "cwd True path" in text and "value a env True" in text
    assert any(kind == "display_data" and t.startswith("image/png") for kind, t in forked["probe.a"])
    for err in (forked_err, fresh_err):                         # the kernel's stderr file, passed on
        assert "kernel: probe stderr a" in err and "kernel: probe stderr b" in err
        assert "without the warm kernel server" not in err and "the usual way" not in err


@linux_only
def test_a_kernel_server_that_fails_falls_back_to_fresh_kernels(tmp_path, monkeypatch, capsys, provisioner_path):
    monkeypatch.delenv("EVEKIT_FRESH_KERNELS", raising=False)

    def broken(*args, **kw):
        raise RuntimeError("the kernel server exited")

    monkeypatch.setattr(kernels, "request_kernel", broken)
    forked = _probe_batch(tmp_path, fresh=False)
    assert "a kernel starts without the warm kernel server (the kernel server exited)" in capsys.readouterr().err
    assert set(forked) == {"probe.a", "probe.b"}


def test_without_linux_kernels_start_the_usual_way_with_a_note(monkeypatch, capsys):
    monkeypatch.delenv("EVEKIT_FRESH_KERNELS", raising=False)
    monkeypatch.setattr(sys, "platform", "darwin")
    assert kernels.start_kernel_server() is None
    assert capsys.readouterr().err.strip() == \
        "evekit run: note: kernels start the usual way (warm kernels are Linux-only (this is darwin))"
    monkeypatch.setenv("EVEKIT_FRESH_KERNELS", "1")                # asked not to: no note
    assert kernels.start_kernel_server() is None and capsys.readouterr().err == ""


def _request(server: kernels.KernelServer, cmd: list[str], env: dict[str, str], stderr: int = 2) -> int:
    return kernels.request_kernel(server.address, cmd, {**env, "JPY_PARENT_PID": str(os.getpid())},
                                  os.getcwd(), 1, stderr)


@linux_only
def test_the_server_forks_only_single_threaded_and_only_its_own_kernel_with_its_environment(tmp_path):
    kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", str(tmp_path / "k.json")]
    with kernels.KernelServer() as server:
        with pytest.raises(RuntimeError, match="not this interpreter's IPython kernel"):
            _request(server, ["/usr/bin/python3", *kernel[1:]], dict(os.environ))
        with pytest.raises(RuntimeError, match="environment differs from the server's in MPLCONFIGDIR"):
            _request(server, kernel, {**os.environ, "MPLCONFIGDIR": str(tmp_path), "EVEKIT_X": "1"})
    # The checks before every fork, in a process that has imported nothing else
    probe = ("import json, os, sys, threading\n"
             "from evekit.batch.kernels import _fork_refusal\n"
             f"request = {{'cmd': {kernel!r}, 'env': dict(os.environ)}}\n"
             "said = [_fork_refusal(request, dict(os.environ))]\n"
             "stop = threading.Event(); worker = threading.Thread(target=stop.wait); worker.start()\n"
             "said.append(_fork_refusal(request, dict(os.environ))); stop.set(); worker.join()\n"
             "import tqdm.auto\n"
             "said.append(_fork_refusal(request, dict(os.environ)))\n"
             "print(json.dumps(said))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT)
    assert json.loads(done.stdout) == [None, "the kernel server runs 2 threads",
                                       "tqdm.auto, tqdm.autonotebook was imported outside a kernel"], done.stderr


@linux_only
def test_the_server_has_one_thread_and_no_kernel_deciding_module_once_everything_is_imported():
    """What `serve` imports, in the server's environment: no thread is left running (so fork is
    safe) and nothing that decides at import time whether it is in a kernel was imported."""
    probe = ("import importlib, json, os, sys\n"
             "from evekit.batch.kernels import PRELOAD, KERNEL_DECIDED\n"
             "for m in PRELOAD: importlib.import_module(m)\n"
             "print(json.dumps([len(os.listdir('/proc/self/task')), [m for m in KERNEL_DECIDED if m in sys.modules],"
             " [m for m in PRELOAD if m not in sys.modules]]))")
    env = {**os.environ, **kernels._single_threaded(dict(os.environ)), "MPLBACKEND": kernels.INLINE_BACKEND}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [1, [], []]
    unlimited = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT,
                               env={k: v for k, v in env.items() if k not in ("OPENBLAS_NUM_THREADS", "JE_ARROW_MALLOC_CONF")})
    if (os.cpu_count() or 1) > 1:  # the limits are what keeps it single-threaded
        assert json.loads(unlimited.stdout)[0] > 1


@linux_only
def test_evekit_modules_the_server_preloads_read_no_kernel_only_variable_when_imported():
    """A forked kernel's EVEKIT_*/JPY_* variables may differ from the server's: safe only because
    no preloaded evekit module reads one at import (a module-level default would keep the server's)."""
    probe = ("import importlib, json, os, sys\n"
             "from collections.abc import MutableMapping\n"
             "from evekit.batch.kernels import THIRD_PARTY_PRELOAD, EVEKIT_PRELOAD, KERNEL_ONLY_PREFIXES\n"
             "for m in THIRD_PARTY_PRELOAD: importlib.import_module(m)\n"
             "read = []\n"
             "class Recording(MutableMapping):\n"
             "    def __init__(self, inner): self.inner = inner\n"
             "    def __getitem__(self, key): read.append(key); return self.inner[key]\n"
             "    def __setitem__(self, key, value): self.inner[key] = value\n"
             "    def __delitem__(self, key): del self.inner[key]\n"
             "    def __iter__(self): read.append('*'); return iter(self.inner)\n"
             "    def __len__(self): return len(self.inner)\n"
             "    def __contains__(self, key): read.append(key); return key in self.inner\n"
             "    def copy(self): read.append('*'); return dict(self.inner)\n"
             "os.environ = Recording(os.environ)\n"
             "before = set(sys.modules)\n"
             "for m in EVEKIT_PRELOAD: importlib.import_module(m)\n"
             "print(json.dumps([sorted({k for k in read if k == '*' or k.startswith(KERNEL_ONLY_PREFIXES)}),"
             " len([m for m in sys.modules if m.startswith('evekit.') and m not in before])]))")
    env = {**os.environ, "EVEKIT_PROBE": "1", "JPY_PROBE": "1"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    keys, imported = json.loads(done.stdout)
    assert imported > 20                       # the notebook modules were imported under the recorder
    assert keys == [], f"read at import: {keys}"


async def _kernel_saw_preloaded(server: kernels.KernelServer, module: str) -> bool:
    """Start a kernel from `server`: was `module` imported before its first cell?"""
    import tempfile

    fd, stderr = tempfile.mkstemp(suffix=".stderr")
    os.close(fd)
    km = kernels.kernel_manager_class(stderr, {}, server)(kernel_name="python3")
    await km.start_kernel(cwd=str(ROOT))
    kc = km.client()
    kc.start_channels()
    printed: list[str] = []
    try:
        await kc.wait_for_ready(timeout=120)
        reply = await kc.execute_interactive(f"import sys; print({module!r} in sys.modules)", timeout=120,
                                             output_hook=lambda msg: printed.append(msg["content"].get("text", "")))
        assert reply["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)
        os.unlink(stderr)
    return "".join(printed).strip() == "True"


@linux_only
def test_the_first_kernels_start_before_the_imports_and_the_next_waits_for_them(provisioner_path):
    """One kernel per core beside the server's imports starts at once (it imports for itself); a
    kernel asked for while they import waits until the server has imported everything."""
    import asyncio

    last = kernels.EVEKIT_PRELOAD[-1]  # what the server imports last; no kernel imports it to start

    async def ask_at_once(server: kernels.KernelServer) -> list[bool]:
        return list(await asyncio.gather(*(_kernel_saw_preloaded(server, last)
                                           for _ in range(kernels.early_kernels() + 1))))

    with kernels.KernelServer() as server:
        saw = asyncio.run(ask_at_once(server))
    assert sorted(saw) == [False] * kernels.early_kernels() + [True]


def test_forked_kernel_process_handle_sees_the_kernel_die():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    handle = kernels.ForkedKernelProcess(child.pid)
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
def test_ctrl_c_with_jobs_stops_the_running_notebooks_at_once(tmp_path, provisioner_path):
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
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), provisioner_path]))},
                            preexec_fn=default_sigint)
    deadline = time.monotonic() + 120
    while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    running = [int(p.name) for p in pids.iterdir()]
    assert len(running) == 2, "two notebooks should be running"
    interrupted = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    took = time.monotonic() - interrupted
    assert proc.returncode == 130, err
    assert took < 20, f"Ctrl-C took {took:.1f} s"
    assert "stopped 2 running notebook kernel(s)" in err
    assert "the usual way" not in err and "without the warm kernel server" not in err  # they were forked
    time.sleep(0.5)
    for pid in running:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert "slow.c" not in out  # the third never started
