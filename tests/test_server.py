"""The embedded llama.cpp server: start, answer, stop, and fail clearly without leaving processes."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evekit.server import MODEL_NAME, EmbeddedServer, ServerError, llama_server_binary


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited; it only waits for its parent to reap it.
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())


def _fake_binary(tmp_path: Path) -> Path:
    """An executable file standing in for llama-server where only the command line matters."""
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\nexit 0\n")
    binary.chmod(0o755)
    return binary


def test_missing_model_file_is_a_clear_error(tmp_path):
    with pytest.raises(ServerError, match="model file not found"):
        EmbeddedServer(tmp_path / "nope.gguf").start()


def test_port_in_use_is_a_clear_error(tmp_path):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"x")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ServerError, match=f"port {port} .* already in use"):
            EmbeddedServer(model, port=port).start()


def test_command_runs_llama_server_with_parallel_slots(tmp_path, monkeypatch):
    binary = _fake_binary(tmp_path)
    monkeypatch.setenv("EVEKIT_LLAMA_SERVER", str(binary))
    cmd = EmbeddedServer(tmp_path / "m.gguf", n_ctx=4096, n_parallel=3, n_threads=2).command(tmp_path / "m.gguf", 8123)
    assert cmd[0] == str(binary)
    opts = dict(zip(cmd[1::2], cmd[2::2]))
    assert opts["--alias"] == MODEL_NAME  # the served id: cache keys and notebooks name it
    assert opts["--parallel"] == "3" and opts["--ctx-size"] == str(4096 * 3)  # a full window per slot
    assert opts["--threads"] == "2" and opts["--port"] == "8123" and opts["--host"] == "127.0.0.1"


def test_zero_parallel_slots_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="n_parallel must be at least 1, got 0"):
        EmbeddedServer(tmp_path / "m.gguf", n_parallel=0)


def test_binary_override_that_is_not_executable_is_a_clear_error(tmp_path, monkeypatch):
    not_exe = tmp_path / "llama-server"
    not_exe.write_text("")
    monkeypatch.setenv("EVEKIT_LLAMA_SERVER", str(not_exe))
    with pytest.raises(ServerError, match=f"EVEKIT_LLAMA_SERVER={not_exe} is not an executable file"):
        llama_server_binary()


def test_missing_binary_says_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.delenv("EVEKIT_LLAMA_SERVER", raising=False)
    monkeypatch.setattr("sysconfig.get_path", lambda name, *a, **k: str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    model = tmp_path / "model.gguf"
    model.write_bytes(b"x")
    with pytest.raises(ServerError, match="llama-server is not installed: run `make serve`.*build_llama_server.py"):
        EmbeddedServer(model).start()


def test_binary_is_found_in_the_environment_bin_before_path(tmp_path, monkeypatch):
    env_bin, path_bin = tmp_path / "env", tmp_path / "path"
    env_bin.mkdir(), path_bin.mkdir()
    _fake_binary(path_bin)
    monkeypatch.delenv("EVEKIT_LLAMA_SERVER", raising=False)
    monkeypatch.setattr("sysconfig.get_path", lambda name, *a, **k: str(env_bin))
    monkeypatch.setenv("PATH", str(path_bin))
    assert llama_server_binary() == path_bin / "llama-server"
    _fake_binary(env_bin)
    assert llama_server_binary() == env_bin / "llama-server"


# A stand-in for llama-server's readiness protocol: /health is 503 while "loading", then 200;
# /v1/models names a model. Argument order: port, seconds of loading, served model id.
_FAKE_HTTP_SERVER = """
import json, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer
port, loading, model = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
ready_at = time.monotonic() + loading
class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_GET(self):
        if self.path == "/health":
            code, body = (200, {"status": "ok"}) if time.monotonic() >= ready_at else (503, {"error": "Loading model"})
        elif self.path == "/v1/models" and time.monotonic() >= ready_at:
            code, body = 200, {"object": "list", "data": [{"id": model}]}
        else:
            code, body = 404, {}
        data = json.dumps(body).encode()
        self.send_response(code); self.send_header("Content-Length", str(len(data))); self.end_headers()
        self.wfile.write(data)
HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


class _FakeHttp(EmbeddedServer):
    loading, served = 1.0, MODEL_NAME

    def command(self, model_path, port):
        return [sys.executable, "-c", _FAKE_HTTP_SERVER, str(port), str(self.loading), self.served]


def test_ready_only_once_health_says_ok(tmp_path):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"x")
    started = time.monotonic()
    with _FakeHttp(model, ready_timeout=30) as server:
        assert time.monotonic() - started >= 1.0  # the 503s of "loading" were waited out
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    assert server.process is None


def test_healthy_server_with_another_model_name_is_an_error(tmp_path):
    class _WrongName(_FakeHttp):
        loading, served = 0.0, "some-other-model"

    model = tmp_path / "model.gguf"
    model.write_bytes(b"x")
    server = _WrongName(model, ready_timeout=30)
    with pytest.raises(ServerError, match=r"serves \['some-other-model'\], not 'smollm2-135m-instruct' \(log: "):
        server.start()
    assert server.process is None


class _NeverReady(EmbeddedServer):
    """A 'server' that never listens: sleeps instead of serving."""

    def command(self, model_path, port):
        return [sys.executable, "-c", "import time; time.sleep(600)"]


class _ExitsAtOnce(EmbeddedServer):
    def command(self, model_path, port):
        return [sys.executable, "-c", "import sys; print('bad model file'); sys.exit(3)"]


def test_server_that_never_becomes_ready_times_out_and_is_killed(tmp_path):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"x")
    server = _NeverReady(model, ready_timeout=1.5)
    started = time.monotonic()
    with pytest.raises(ServerError, match="did not answer .* within 2 s"):
        server.start()
    assert time.monotonic() - started < 15
    assert server.process is None  # stopped and forgotten


def test_server_that_exits_early_reports_its_log(tmp_path):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"x")
    server = _ExitsAtOnce(model, ready_timeout=30)
    with pytest.raises(ServerError, match="exited with code 3 .*log: .*evekit-server-.*\\.log(.|\n)*bad model file"):
        server.start()


class _SpawnsGrandchild(_NeverReady):
    """A server process that starts a grandchild of its own, as a real server's workers might."""

    def command(self, model_path, port):
        return [sys.executable, "-c",
                "import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; "
                "time.sleep(600)']); print(p.pid, flush=True); time.sleep(600)"]


def test_failed_start_leaves_no_process_behind(tmp_path):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"x")
    server = _SpawnsGrandchild(model, ready_timeout=2)
    pids = []
    original = server._wait_ready

    def remember_pids():
        pids.append(server.process.pid)
        original()

    server._wait_ready = remember_pids
    with pytest.raises(ServerError):
        server.start()
    grandchild = int(server.log_file.read_text().split()[0])
    deadline = time.monotonic() + 5
    while (_alive(pids[0]) or _alive(grandchild)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pids[0]) and not _alive(grandchild)


@pytest.mark.integration
def test_embedded_server_answers_chat_and_completions(embedded_server):
    from openai import OpenAI

    client = OpenAI(base_url=embedded_server, api_key="EMPTY", timeout=120)
    assert [m.id for m in client.models.list().data] == [MODEL_NAME]
    chat = client.chat.completions.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": "Name one Sentinel mission."}], max_tokens=12,
        temperature=0)
    assert chat.choices[0].message.content.strip()
    assert chat.usage.completion_tokens > 0
    completion = client.completions.create(
        model=MODEL_NAME, prompt="Synthetic aperture radar is", max_tokens=12, temperature=0)
    assert completion.choices[0].text.strip(), completion


@pytest.mark.integration
def test_evekit_serve_stops_cleanly_on_ctrl_c():
    from conftest import _local_extra_missing

    if reason := _local_extra_missing():
        pytest.skip(reason)
    from conftest import default_sigint, llama_server_pids

    proc = subprocess.Popen([sys.executable, "-m", "evekit.cli", "serve"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    try:
        line = proc.stdout.readline()  # blocks until ready (or failure)
        assert "serving model 'smollm2-135m-instruct' at http://127.0.0.1:" in line, proc.stderr.read()
        new = llama_server_pids(proc.pid)
        assert len(new) == 1
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in new) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_alive(p) for p in new), "llama.cpp server left behind after Ctrl-C"
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.integration
def test_embedded_server_runs_parallel_slots(embedded_server_process):
    import json
    import urllib.request

    root = embedded_server_process.base_url.removesuffix("/v1")
    with urllib.request.urlopen(f"{root}/props", timeout=30) as response:
        props = json.load(response)
    assert props["total_slots"] == embedded_server_process.n_parallel == 4


@pytest.mark.integration
def test_embedded_server_follows_a_json_schema(embedded_server):
    """structured.ask_json's first format: the reply must parse and fit the schema."""
    import json

    from openai import OpenAI

    schema = {"type": "object", "properties": {"reasoning": {"type": "string", "maxLength": 80},
                                               "verdict": {"type": "integer", "enum": [0, 1]}},
              "required": ["reasoning", "verdict"], "additionalProperties": False}
    client = OpenAI(base_url=embedded_server, api_key="EMPTY", timeout=120)
    chat = client.chat.completions.create(
        model=MODEL_NAME, max_tokens=120, temperature=0,
        messages=[{"role": "user", "content": "Is Sentinel-2 an optical mission? Reply in JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema, "strict": True}})
    reply = json.loads(chat.choices[0].message.content)
    assert set(reply) == {"reasoning", "verdict"} and reply["verdict"] in (0, 1)


@pytest.mark.integration
def test_embedded_server_returns_top_logprobs(embedded_server):
    import math

    from openai import OpenAI

    client = OpenAI(base_url=embedded_server, api_key="EMPTY", timeout=120)
    chat = client.chat.completions.create(
        model=MODEL_NAME, max_tokens=3, temperature=0, logprobs=True, top_logprobs=5,
        messages=[{"role": "user", "content": "Answer with one letter, A or B: which is a radar mission? "
                                              "A) Sentinel-1 B) Sentinel-2"}])
    tokens = chat.choices[0].logprobs.content
    assert tokens, chat
    first = tokens[0]
    assert len(first.top_logprobs) == 5
    assert all(t.logprob <= 0 for t in first.top_logprobs)
    probs = sorted((t.logprob for t in first.top_logprobs), reverse=True)
    assert math.isclose(first.logprob, probs[0], abs_tol=1e-4)  # greedy: the chosen token is the top one


# --- the thread rule (issue 30): never a busy core, no spin-wait on a busy machine -------------

from evekit.server import POLL_ENV, THREADS_ENV, ThreadPlan, busy_cores, thread_plan  # noqa: E402


@pytest.mark.parametrize("cores, busy, threads, poll", [
    (2, 0.0, 2, 50),    # quiet two-core machine: both cores, llama.cpp's default spin
    (2, 0.4, 2, 50),
    (2, 1.0, 1, 0),     # one core taken: the free one only, and no spinning at the barrier
    (2, 2.0, 1, 0),     # both taken: still one thread
    (8, 0.0, 7, 50),    # above two cores one stays free for the kernels
    (8, 3.2, 5, 0),
    (1, 0.0, 1, 50),
])
def test_thread_plan_rule(monkeypatch, cores, busy, threads, poll):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    monkeypatch.delenv(POLL_ENV, raising=False)
    plan = thread_plan(cores=cores, busy=busy)
    assert (plan.threads, plan.poll) == (threads, poll)
    assert f"{cores} cores" in plan.reason and f"{busy:.1f} busy" in plan.reason


def test_thread_plan_env_overrides_and_bad_values(monkeypatch):
    monkeypatch.setenv(THREADS_ENV, "3")
    monkeypatch.delenv(POLL_ENV, raising=False)
    plan = thread_plan(cores=2, busy=0.0)
    assert (plan.threads, plan.poll) == (3, 50) and THREADS_ENV in plan.reason
    monkeypatch.setenv(POLL_ENV, "0")
    assert thread_plan(cores=2, busy=0.0).poll == 0
    for name, bad in ((THREADS_ENV, "0"), (THREADS_ENV, "two"), (POLL_ENV, "101")):
        monkeypatch.setenv(THREADS_ENV, "2")
        monkeypatch.setenv(POLL_ENV, "0")
        monkeypatch.setenv(name, bad)
        with pytest.raises(ServerError, match=name):
            thread_plan(cores=2, busy=0.0)


def test_command_carries_the_plan(tmp_path):
    server = EmbeddedServer(tmp_path / "m.gguf", n_threads=1, poll=0)
    cmd = server.command(tmp_path / "m.gguf", 8123)
    opts = {cmd[i]: cmd[i + 1] for i in range(1, len(cmd) - 1)}
    assert opts["--threads"] == "1" and opts["--threads-batch"] == "1" and opts["--poll"] == "0"
    assert server.plan == ThreadPlan(1, 0, "1 threads, --poll 0: as asked")


def test_busy_cores_sees_another_busy_loop_and_not_its_own_children():
    import signal
    import subprocess
    import sys
    import time

    quiet = busy_cores(0.5)
    # Someone else's busy loop: started through a shell that exits, so the loop is not below us.
    pid = int(subprocess.run(["sh", "-c", f"'{sys.executable}' -c 'while True: pass' >/dev/null 2>&1 & echo $!"],
                             capture_output=True, text=True, check=True).stdout)
    try:
        time.sleep(0.3)
        loaded = busy_cores(0.5)
    finally:
        os.kill(pid, signal.SIGKILL)
    # a busy loop holds about one core; the machine's other work moves both readings alike
    assert loaded >= min(quiet + 0.5, 0.8 * (os.cpu_count() or 1))
    # Our own: a batch whose kernel server is importing its libraries is not a busy machine.
    own = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        with_own = min(busy_cores(0.5) for _ in range(3))   # the least of three: other work comes and goes
    finally:
        own.kill()
    assert with_own <= quiet + 0.4
