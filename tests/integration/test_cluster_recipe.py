"""Issue 44, item 8: the README's cluster recipe as typed, on the Ray that ``make setup`` installs.
``ray start --head --port P --node-ip-address 127.0.0.1`` takes the token in ``~/.ray/auth_token``
(any machine where an embedded Ray once ran has one), and ``gorila train --address 127.0.0.1:P``
used to print 20 s of ``InvalidAuthToken`` lines and a traceback. The head here runs under a HOME
of its own holding a token, in a temp dir of its own, and is stopped by the PIDs of its processes
(``ray stop`` would stop every other Ray on the machine)."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import psutil
import pytest

RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(temp_dir: str) -> None:
    """Kill the processes of the Ray whose session lives in ``temp_dir``, and theirs, by PID."""
    mine = [p for p in psutil.process_iter(["cmdline"]) if temp_dir in " ".join(p.info["cmdline"] or [])]
    for process in mine:
        for child in process.children(recursive=True) + [process]:
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass
    psutil.wait_procs(mine, timeout=30)


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    """A head node started as the README says, with a token in its HOME; yields (address, env)."""
    home = tmp_path_factory.mktemp("home")
    (home / ".ray").mkdir()
    (home / ".ray" / "auth_token").write_text(uuid.uuid4().hex)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RAY_ADDRESS"))}
    env["HOME"] = str(home)
    temp_dir = tempfile.mkdtemp(prefix="gr", dir="/tmp")  # short: Ray's socket paths live under it
    port = _free_port()
    started = subprocess.run([RAY, "start", "--head", "--port", str(port), "--node-ip-address", "127.0.0.1",
                              "--temp-dir", temp_dir, "--num-cpus", "2", "--include-dashboard", "false"],
                             env=env, capture_output=True, text=True, timeout=120)
    try:
        assert started.returncode == 0, started.stderr[-2000:]
        yield f"127.0.0.1:{port}", env
    finally:
        _stop(temp_dir)


def _train(address, env, tmp_path, **extra_env):
    return subprocess.run([sys.executable, "-m", "gorila", "train", "--algo", "a3c", "--address", address,
                           "--workers", "1", "--time-limit-s", "2", "--run-dir", str(tmp_path / "run")],
                          env={**env, **extra_env}, capture_output=True, text=True, timeout=240, cwd=tmp_path)


pytestmark = [pytest.mark.integration, pytest.mark.heavy]


def test_gorila_train_joins_a_head_started_as_the_readme_says(head, tmp_path):
    address, env = head
    done = _train(address, env, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "InvalidAuthToken" not in done.stderr
    summary = json.loads(done.stdout)
    assert summary["stop_reason"] in ("time_limit", "target") and summary["env_steps"] > 0


def test_a_cluster_that_refuses_the_token_is_one_line_that_says_what_to_set(head, tmp_path):
    address, env = head
    done = _train(address, env, tmp_path, RAY_AUTH_TOKEN="not-the-heads-token")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "InvalidAuthToken" not in done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("gorila train:")]
    assert len(said) == 1 and "RAY_AUTH_TOKEN" in said[0] and address in said[0]

