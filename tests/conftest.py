"""Shared fixtures. `embedded_server` starts the real llama.cpp server once per test session."""
from __future__ import annotations

import importlib.util

import pytest


def _local_extra_missing() -> str | None:
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (pip install -e '.[local]')"
    from evekit.server import ServerError, default_model_path

    try:
        path = default_model_path()
    except ServerError as exc:
        return str(exc)
    return None if path.is_file() else f"model file not found: {path}"


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
