"""What a user of ``gorila train`` sees, end to end: stdout for the summary alone, the run directory
first on stderr, the start-up stages then the bar on a terminal, and a clean stop on SIGTERM."""

import fcntl
import json
import os
import pty
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import termios
import time

import pytest

pytestmark = pytest.mark.smoke

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_stdout_is_the_summary_alone_and_stderr_starts_with_the_run_directory(tmp_path):
    result = subprocess.run([sys.executable, "-m", "gorila", "train", "--algo", "a3c", "--runtime", "local",
                             "--time-limit-s", "10"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)  # as `| python -m json.tool` or `| jq` reads it
    first = result.stderr.splitlines()[0]
    assert first == f"run directory: {summary['run_dir']}" and summary["run_dir"].startswith("runs/a3c-CartPole-v1-")
    saved = json.loads((tmp_path / summary["run_dir"] / "summary.json").read_text())
    assert saved["run_dir"] == summary["run_dir"]
    assert json.loads((tmp_path / summary["run_dir"] / "config.json").read_text())["run_dir"] == summary["run_dir"]
    assert summary["wall_time_from_start_s"] > summary["train_time_s"] > 0


def test_python_dash_m_gorila_is_the_command():
    result = subprocess.run([sys.executable, "-m", "gorila", "--version"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("gorila ")


def _read_until_exit(fd: int, proc: subprocess.Popen, timeout_s: float) -> bytes:
    """Everything written to the terminal whose master side is ``fd``, until the program exits."""
    chunks, deadline = [], time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the program closed its side of the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    return b"".join(chunks)


def test_a_terminal_shows_the_start_up_stages_then_the_bar(tmp_path):
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))  # 40 rows of 200 columns
    proc = subprocess.Popen([sys.executable, "-m", "gorila", "train", "--algo", "lstsq", "--runtime", "local",
                             "--n", "4000", "--d", "8", "--run-dir", str(tmp_path / "run")],
                            stdout=subprocess.PIPE, stderr=slave, stdin=slave, env={**os.environ, "TERM": "xterm"})
    os.close(slave)
    try:
        raw = _read_until_exit(master, proc, timeout_s=120).decode("utf-8", "replace")
    finally:
        os.close(master)
    assert proc.returncode == 0, raw
    assert "\x1b[" in raw  # drawn for a terminal
    screen = ANSI.sub("", raw).replace("\r", "\n")
    assert screen.lstrip().startswith(f"run directory: {tmp_path / 'run'}")
    stages = ["building the lstsq plan", "local runtime", "starting 1 parameter shard, 2 workers",
              "training until 1,000 updates"]
    where = [screen.index(stage) for stage in stages]
    assert where == sorted(where)
    bar = screen.index("━")  # rich's bar
    assert bar > where[-1] and re.search(r"\d+/1,000 updates", screen[bar:])
    assert json.loads(proc.stdout.read())["stop_reason"] == "target"  # stdout stays the summary alone


def test_sigterm_saves_the_run_and_exits_143(gorila_process, tmp_path):
    job = gorila_process("train", "--algo", "a3c", "--runtime", "local", "--total-steps", "100000000",
                         "--no-stop-at-target", "--run-dir", str(tmp_path / "run"))
    job.wait_for("training until", timeout_s=120)
    job.signal(signal.SIGTERM)
    code, stdout = job.finish(timeout_s=10)
    assert code == 143, "".join(job.stderr)
    summary = json.loads(stdout)
    assert summary["stop_reason"] == "interrupted" and summary["signal"] == "SIGTERM"
    assert summary == {k: v for k, v in json.loads((tmp_path / "run" / "summary.json").read_text()).items()
                       if not isinstance(v, (dict, list)) or k == "best_checkpoint"}
    assert "Traceback" not in "".join(job.stderr)


def test_an_address_where_no_ray_answers_is_named_at_once(tmp_path):
    with socket.socket() as probe:  # a loopback port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "gorila", "train", "--algo", "lstsq", "--address", address,
                             "--run-dir", str(tmp_path / "run")], capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < 30
    assert result.returncode == 2 and result.stdout == ""
    assert f"no Ray cluster answers at {address} (from --address)" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_address_that_answers_but_is_not_ray_is_refused_within_30_s(tmp_path):
    with socket.socket() as listener:  # accepts connections and never says a word, as a non-Ray service might
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        started = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "gorila", "train", "--algo", "lstsq", "--address", address,
                                 "--run-dir", str(tmp_path / "run")], capture_output=True, text=True, timeout=120)
    assert time.monotonic() - started < 30
    assert result.returncode == 2 and result.stdout == ""
    assert f"something listens at {address} (from --address) but it is not a Ray cluster" in result.stderr
    assert not (tmp_path / "run" / "metrics.csv").exists()
