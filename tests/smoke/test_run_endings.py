"""How ``gorila train`` ends when it is not let finish (local runtime): a second run in a live run's
directory is refused, and a run whose terminal is closed under it (SIGHUP) is saved and resumable."""

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time

import pytest

from gorila.checkpoint import load_checkpoint

pytestmark = pytest.mark.heavy  # 10-13 s each on 2 busy cores

LONG_RUN = ("train", "--algo", "a3c", "--runtime", "local", "--total-steps", "100000000", "--no-stop-at-target")


def test_a_second_run_in_a_live_runs_directory_is_refused_naming_its_pid(gorila_process, tmp_path):
    run_dir = tmp_path / "run"
    job = gorila_process(*LONG_RUN, "--run-dir", str(run_dir))
    job.wait_for("checkpoint ckpt-000001", timeout_s=120)  # its first, seconds in
    rows = (run_dir / "metrics.csv").read_text()
    second = subprocess.run([sys.executable, "-m", "gorila", "train", "--resume", str(run_dir), "--total-steps", "1"],
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 2, second.stderr
    assert f"in use by a live run (PID {job.proc.pid})" in second.stderr and "--resume" in second.stderr
    assert "Traceback" not in second.stderr and second.stdout == ""
    assert (run_dir / "metrics.csv").read_text().startswith(rows)  # the live run's rows, none cut or added
    job.signal(signal.SIGINT)
    code, _ = job.finish(timeout_s=60)
    assert code == 130 and json.loads((run_dir / "summary.json").read_text())["stop_reason"] == "interrupted"


def _read_until(master, text, timeout_s):
    """The terminal's output until ``text`` shows (an AssertionError after ``timeout_s``)."""
    seen, deadline = b"", time.monotonic() + timeout_s
    while text not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"no {text!r} within {timeout_s} s: {seen[-2000:]!r}"
        if select.select([master], [], [], left)[0]:
            seen += os.read(master, 65536)
    return seen


def test_a_closed_terminal_sighup_saves_the_run_and_exits_129(tmp_path):
    """The terminal goes away (its pty closed, then SIGHUP, as when a window is closed or an ssh
    session drops): writes to it now fail, yet the run writes its final checkpoint and its full
    summary, and exits 129 (128 + SIGHUP)."""
    run_dir = tmp_path / "run"
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "gorila", "train", *LONG_RUN[1:], "--run-dir", str(run_dir)],
                            stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                            env={**os.environ, "TERM": "xterm"})
    os.close(slave)
    try:
        _read_until(master, b"training until", timeout_s=120)
    finally:
        os.close(master)  # the terminal is gone
    try:
        os.killpg(proc.pid, signal.SIGHUP)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert code == 129
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "interrupted" and summary["signal"] == "SIGHUP" and summary["env_steps"] > 0
    _, meta = load_checkpoint(run_dir / "checkpoints")
    assert meta["env_steps"] == summary["env_steps"]
