"""``memlab serve``: argument checks, and a real server process on the environment's stack."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

import memlab.api
from memlab.cli import main


def test_serve_passes_its_options_to_uvicorn(env_root, monkeypatch):
    calls = []
    monkeypatch.setattr(memlab.api, "serve", lambda **options: calls.append(options))
    assert main(["serve"]) == 0
    assert main(["serve", "--host", "0.0.0.0", "--port", "9001", "--workers", "3"]) == 0
    assert calls == [{"host": "127.0.0.1", "port": 8000, "workers": 1}, {"host": "0.0.0.0", "port": 9001, "workers": 3}]


def test_serve_refuses_a_bad_environment_before_starting(env_root, monkeypatch, capsys):
    monkeypatch.setattr(memlab.api, "serve", lambda **options: pytest.fail("started"))
    monkeypatch.setenv("CACHE_BACKEND", "nosuch")
    assert main(["serve"]) == 2
    assert "CACHE_BACKEND" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--port", "70000"], ["--port", "http"], ["--workers", "0"]])
def test_serve_refuses_bad_options(argv, capsys):
    with pytest.raises(SystemExit) as excinfo:
        main(["serve", *argv])
    assert excinfo.value.code == 2


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_memlab_serve_answers_with_a_key_from_create_key(env_root, workers, capsys):
    assert main(["users", "create-key", "alice"]) == 0
    key = capsys.readouterr().out.strip()
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "memlab", "serve", "--port", str(port), "--workers", workers],
        env=os.environ.copy(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "memlab serve did not answer within 60 s"
            time.sleep(0.1)
        page = httpx.get(f"{url}/api/v1/sessions", headers={"Authorization": f"Bearer {key}"})
        assert page.status_code == 200 and page.json()["total"] == 0
        assert httpx.get(f"{url}/api/v1/sessions").status_code == 401
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr:
            process.stderr.close()
