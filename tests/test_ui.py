"""memlab.ui and ``memlab ui`` without a browser: the checks made before the server starts, the Voilà setup, the shipped notebook."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import pytest

from memlab import ConfigError, StackConfig, ValidationError, ui
from memlab.cli import main


@pytest.fixture
def data_root(tmp_path) -> Path:
    root = tmp_path / "lab"
    root.mkdir()
    return root


def test_prepare_resolves_the_data_root_and_sets_up_the_kernels_environment(data_root, monkeypatch) -> None:
    monkeypatch.chdir(data_root.parent)
    server = ui.prepare(data_root="lab", port=0, open_browser=False, environ={"JUPYTER_PATH": "/elsewhere"})
    assert server.data_root == data_root.resolve() and server.stack_config.data_root == data_root.resolve()
    assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}/"
    assert server.environ["MEMLAB_DATA_ROOT"] == str(data_root.resolve())  # absolute: the kernel runs elsewhere
    assert server.environ[ui.CWD_VARIABLE] == str(data_root.parent)
    assert server.environ["JUPYTER_PATH"] == os.pathsep.join([str(ui.SHARE), "/elsewhere"])  # memlab's template first
    config = server.voila_config()
    assert config.Voila.port == server.port and config.Voila.port_retries == 0 and config.Voila.open_browser is False
    assert config.VoilaConfiguration.template == "memlab" and config.VoilaConfiguration.preheat_kernel is True
    assert config.VoilaConfiguration.extension_allowlist == list(ui.EXTENSIONS)


def test_the_data_root_comes_from_the_environment_when_not_given(data_root) -> None:
    server = ui.prepare(port=0, environ={"MEMLAB_DATA_ROOT": str(data_root)})
    assert server.data_root == data_root.resolve()


def test_a_data_root_that_does_not_exist_or_is_a_file_is_refused(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"data root .*nope \(--data-root\) does not exist"):
        ui.prepare(data_root=tmp_path / "nope", port=0)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match=r"\(MEMLAB_DATA_ROOT\) is not a directory"):
        ui.prepare(port=0, environ={"MEMLAB_DATA_ROOT": str(tmp_path / "file")})


def test_a_port_in_use_is_refused_before_anything_starts(data_root) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ValidationError, match=rf"port {port} on 127.0.0.1 is in use: pick another with --port"):
            ui.prepare(data_root=data_root, port=port)


def test_without_the_extra_the_error_names_it(data_root, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "voila", None)  # find_spec("voila") is None: as if not installed
    assert ui.is_available() is False
    with pytest.raises(ImportError, match=r"memlab ui needs voila \(the ui extra\): pip install 'memlab\[ui\]'"):
        ui.prepare(data_root=data_root, port=0)


def test_the_url_names_a_reachable_address() -> None:
    def url(host: str) -> str:
        return ui.UIServer(stack_config=StackConfig(), host=host, port=8866, open_browser=False, environ={}).url

    assert url("0.0.0.0") == "http://127.0.0.1:8866/" and url("::1") == "http://[::1]:8866/" and url("localhost") == "http://localhost:8866/"


def test_a_specific_host_is_where_a_preheated_kernel_calls_back(data_root) -> None:
    assert ui.prepare(data_root=data_root, host="127.0.0.1", port=0).environ["VOILA_APP_IP"] == "127.0.0.1"
    assert "VOILA_APP_IP" not in ui.prepare(data_root=data_root, host="0.0.0.0", port=0).environ


def test_wait_for_request_returns_at_once_outside_a_preheated_kernel(monkeypatch) -> None:
    monkeypatch.delenv("VOILA_PREHEAT", raising=False)
    assert ui.wait_for_request() is None


async def test_open_page_moves_to_the_commands_directory_first(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "root").mkdir()
    monkeypatch.setenv("MEMLAB_DATA_ROOT", "root")  # relative: to the directory memlab ui ran in
    monkeypatch.setenv("EMBEDDING_MODEL", "memlab/hashing")
    monkeypatch.setenv(ui.CWD_VARIABLE, str(tmp_path))
    monkeypatch.chdir(ui.NOTEBOOK.parent)  # where a Voilà kernel starts
    page = await ui.open_page()
    try:
        assert Path.cwd() == tmp_path and page.data_root == (tmp_path / "root").resolve() and page.session is None
    finally:
        await page.close()


def test_the_shipped_notebook_is_thin_and_waits_for_the_request() -> None:
    notebook = json.loads(ui.NOTEBOOK.read_text())
    cells = ["".join(cell["source"]) for cell in notebook["cells"]]
    assert [cell["cell_type"] for cell in notebook["cells"]] == ["code"] * 3
    assert all(not cell["outputs"] for cell in notebook["cells"])
    assert "from memlab.ui import open_page, wait_for_request" in cells[0] and "wait_for_request()" in cells[1]
    assert "await page.refresh(latest=True)" in cells[2] and cells[2].rstrip().endswith("page")
    assert notebook["metadata"]["title"] == "memlab ui"
    template = ui.SHARE / "voila" / "templates" / ui.TEMPLATE
    assert json.loads((template / "conf.json").read_text()) == {"base_template": "lab"}
    assert "https://" not in (template / "index.html.j2").read_text()  # Voilà's lab template links two CDN stylesheets


def test_the_command_refuses_a_missing_data_root_in_one_line(tmp_path, capsys) -> None:
    assert main(["ui", "--no-browser", "--data-root", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("memlab: error: data root ") and "does not exist" in err and len(err.splitlines()) == 1


def test_the_command_refuses_a_port_in_use(data_root, capsys) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["ui", "--no-browser", "--data-root", str(data_root), "--port", str(port)]) == 2
    assert f"port {port} on 127.0.0.1 is in use" in capsys.readouterr().err


def test_the_command_without_the_extra_names_it(data_root, monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "voila", None)
    assert main(["ui", "--no-browser", "--data-root", str(data_root)]) == 1
    assert capsys.readouterr().err.strip() == "memlab: error: memlab ui needs voila (the ui extra): pip install 'memlab[ui]'"


def test_the_command_help_says_what_the_page_shows(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["ui", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for words in ("--data-root PATH", "--no-browser", "--port", "Voilà", "memlab[ui]", "lanes, verdicts and phases", "no authentication"):
        assert words in text
