"""Shared fixtures. `embedded_server` starts the real llama.cpp server once per test session."""
from __future__ import annotations

import pytest


def _local_extra_missing() -> str | None:
    from evekit.server import ServerError, default_model_path, llama_server_binary

    try:
        llama_server_binary()
        path = default_model_path()
    except ServerError as exc:
        return str(exc)
    return None if path.is_file() else f"model file not found: {path}"


def llama_server_pids(parent: int | None = None) -> set[int]:
    """Running llama-server processes (children of `parent` if given), to check none outlives a run."""
    import subprocess

    args = ["pgrep", "-x", "llama-server"] + (["-P", str(parent)] if parent is not None else [])
    out = subprocess.run(args, capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


def default_sigint() -> None:
    """For `preexec_fn`: Ctrl-C's default action in a child a test interrupts. A shell without job
    control starts background commands with SIGINT ignored, Python keeps that, and the Ctrl-C the
    test sends would do nothing."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="session")
def embedded_server_process():
    """The running EmbeddedServer (`.base_url`, `.model`, `.process`); always stopped afterwards."""
    reason = _local_extra_missing()
    if reason:
        pytest.skip(f"embedded model not available: {reason}")
    from evekit.server import EmbeddedServer

    with EmbeddedServer(ready_timeout=180) as server:
        yield server


@pytest.fixture(scope="session")
def embedded_server(embedded_server_process) -> str:
    """Base URL of the embedded server, e.g. http://127.0.0.1:PORT/v1, serving smollm2-135m-instruct."""
    return embedded_server_process.base_url
