"""Every file explorer is given: a regular file only, opened without blocking, read up to its cap (issue 25)."""

from __future__ import annotations

import os
import socket
import sys
import threading

import pytest

from explorer.errors import ClusterSpecError, ConfigError, GGUFError, NotAModelConfigError
from explorer.sources.local_files import read_local_config
from explorer.sources.regular_file import file_kind, open_regular_file, read_capped
from explorer.sources.resolve import resolve_model
from explorer.sources.shipped import load_cluster_file, read_user_text

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="named pipes and /dev are POSIX")


def _fifo(tmp_path, name="pipe"):
    path = tmp_path / name
    os.mkfifo(path)
    return path


def test_a_regular_file_is_read_up_to_its_cap(tmp_path):
    f = tmp_path / "x.json"
    f.write_bytes(b"0123456789")
    assert read_capped(f, 10, "the file", ConfigError) == b"0123456789"
    with pytest.raises(ConfigError, match="is over 9 bytes; at most that many are read"):
        read_capped(f, 9, "the file", ConfigError)


@pytest.mark.parametrize(
    ("path", "kind"),
    [("/dev/zero", "a character device"), ("/dev/null", "a character device"), ("/", "a folder")],
)
def test_devices_and_folders_are_typed_errors_naming_the_kind(path, kind):
    # before: stat().st_size is 0 for /dev/zero, so read_bytes() read until memory ran out (MemoryError)
    with pytest.raises(ConfigError, match=f"the file {path} is {kind}, not a regular file"):
        read_capped(path, 1024, "the file", ConfigError)


def test_a_named_pipe_with_no_writer_is_refused_at_once(tmp_path):
    # before: open() of a FIFO waited for a writer for good, holding the thread (a session in the app)
    pipe = _fifo(tmp_path)
    done: list[BaseException] = []
    reader = threading.Thread(target=lambda: _catch(done, pipe), daemon=True)
    reader.start()
    reader.join(10)  # not a timing check: a blocked open would never end, and the assert below says so
    assert not reader.is_alive(), "opening a named pipe blocked"
    assert isinstance(done[0], ConfigError) and "a named pipe (FIFO)" in str(done[0])


def _catch(out: list[BaseException], path) -> None:
    try:
        read_capped(path, 1024, "the file", ConfigError)
    except BaseException as e:  # handed to the test
        out.append(e)


def test_a_socket_is_refused(tmp_path):
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        with pytest.raises(ConfigError, match=r"cannot read the file .*s\.sock|is a socket"):
            open_regular_file(path, "the file", ConfigError)


def test_file_kind_names():
    assert file_kind(os.stat("/dev/zero").st_mode) == "a character device"
    assert file_kind(os.stat("/").st_mode) == "a folder"
    assert file_kind(os.stat(__file__).st_mode) == "a regular file"


def test_explorer_reads_of_a_config_a_gguf_and_a_cluster_file_refuse_devices_and_pipes(tmp_path):
    pipe = _fifo(tmp_path, "model.gguf")
    with pytest.raises(ConfigError, match="/dev/zero is a character device"):
        read_local_config("/dev/zero")
    with pytest.raises(ConfigError, match="config .*config.json is a named pipe"):
        os.mkdir(tmp_path / "m")
        os.mkfifo(tmp_path / "m" / "config.json")
        read_local_config(tmp_path / "m")
    with pytest.raises(GGUFError, match="the GGUF file .*model.gguf is a named pipe"):
        resolve_model(str(pipe), offline=True)
    with pytest.raises(ClusterSpecError, match="/dev/zero is a character device"):
        load_cluster_file("/dev/zero")
    with pytest.raises(ConfigError, match="/dev/urandom is a character device"):
        read_user_text("/dev/urandom", "the log", ConfigError, head_bytes=100)


def test_a_json_file_that_is_not_a_config_is_refused_without_its_keys(tmp_path):
    # before: "… is not a model config … (its keys: auths, credsStore)": a Docker config.json's keys shown
    docker = tmp_path / "config.json"
    docker.write_text('{"auths": {"registry": {"auth": "c2VjcmV0"}}, "credsStore": "desktop"}')
    with pytest.raises(NotAModelConfigError) as e:
        resolve_model(str(docker), offline=True)
    message = str(e.value)
    assert "none of its 2 keys" in message
    assert "auths" not in message and "credsStore" not in message and "c2VjcmV0" not in message
