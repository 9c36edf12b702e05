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

from evekit.server import MODEL_NAME, EmbeddedServer, ServerError


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited; it only waits for its parent to reap it.
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())


def _llama_pids() -> set[int]:
    out = subprocess.run(["pgrep", "-f", "llama_cpp.server"], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


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


class _NeverReady(EmbeddedServer):
    """A 'server' that never listens: sleeps instead of serving."""

    def command(self, model_path, port):
        return [sys.executable, "-c", "import time; time.sleep(600)"]


class _ExitsAtOnce(EmbeddedServer):
    def command(self, model_path, port):
        return [sys.executable, "-c", "import sys; print('bad model file'); sys.exit(3)"]


def test_server_that_never_becomes_ready_times_out_and_is_killed(tmp_path, monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: object())
    model = tmp_path / "model.gguf"
    model.write_bytes(b"x")
    server = _NeverReady(model, ready_timeout=1.5)
    started = time.monotonic()
    with pytest.raises(ServerError, match="did not answer .* within 2 s"):
        server.start()
    assert time.monotonic() - started < 15
    assert server.process is None  # stopped and forgotten


def test_server_that_exits_early_reports_its_log(tmp_path, monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: object())
    model = tmp_path / "model.gguf"
    model.write_bytes(b"x")
    with pytest.raises(ServerError, match="exited with code 3(.|\n)*bad model file"):
        _ExitsAtOnce(model, ready_timeout=30).start()


class _SpawnsGrandchild(_NeverReady):
    """A server process that starts a grandchild of its own, as a real server's workers might."""

    def command(self, model_path, port):
        return [sys.executable, "-c",
                "import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; "
                "time.sleep(600)']); print(p.pid, flush=True); time.sleep(600)"]


def test_failed_start_leaves_no_process_behind(tmp_path, monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: object())
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
    before = _llama_pids()
    proc = subprocess.Popen([sys.executable, "-m", "evekit.cli", "serve"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # blocks until ready (or failure)
        assert "serving model 'smollm2-135m-instruct' at http://127.0.0.1:" in line, proc.stderr.read()
        new = _llama_pids() - before
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
