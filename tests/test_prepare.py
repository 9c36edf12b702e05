"""`evekit prepare` without network: fails in seconds with the reason, downloads nothing."""
from __future__ import annotations

import socket
import time

from evekit import prepare


def test_prepare_fails_fast_when_the_hub_host_does_not_resolve(tmp_path, monkeypatch, capsys):
    def no_dns(*args, **kwargs):
        raise socket.gaierror(-3, "Temporary failure in name resolution")

    def never(*args, **kwargs):  # the slow path that must not be reached
        raise AssertionError("the hub was contacted although its host does not resolve")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    monkeypatch.setattr(prepare, "_load_all_splits", never)
    started = time.monotonic()
    code = prepare.main(str(tmp_path), [], include_eve=True)
    assert time.monotonic() - started < 5
    err = capsys.readouterr().err
    assert code == 2
    assert "the Hub host huggingface.co does not resolve" in err and "Nothing was downloaded" in err
    assert not (tmp_path / prepare.MANIFEST).exists()


def test_hub_check_names_a_refused_connection():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    port = server.getsockname()[1]
    server.close()                      # nothing listens there now
    assert "no connection to the Hub at 127.0.0.1" in prepare.hub_unreachable(f"http://127.0.0.1:{port}", timeout=2)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    try:
        assert prepare.hub_unreachable(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=2) is None
    finally:
        listener.close()


def test_local_files_need_no_hub(tmp_path, monkeypatch):
    monkeypatch.setattr(prepare, "hub_unreachable", lambda *a, **k: "offline")
    f = tmp_path / "items.jsonl"
    f.write_text('{"question": "q", "answer": "a"}\n')
    assert prepare.main(str(tmp_path / "prep"), [str(f)], include_eve=False) == 0
