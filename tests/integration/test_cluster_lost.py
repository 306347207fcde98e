"""A Ray cluster that dies under a run (``--address``): the run ends soon, with a named error
(``ClusterLostError``, exit 1, no traceback), a full summary and a checkpoint to resume from."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gorila.checkpoint import load_checkpoint
from gorila.driver.progress import resumable

pytestmark = [pytest.mark.integration, pytest.mark.heavy, pytest.mark.timeout(300)]


@pytest.fixture
def cluster():
    """A one-node Ray cluster (``ray start --head --block``) in a process group of its own, its
    session in a temp dir of its own; yields ``(head, address, temp_dir)``; killed with its group at
    the end (if the test has not killed it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    temp_dir = tempfile.mkdtemp(prefix="gl", dir="/tmp")  # short: Ray's socket paths live under it
    head = subprocess.Popen([sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
                             "--port", str(port), "--num-cpus", "2", "--include-dashboard", "false",
                             "--node-ip-address", "127.0.0.1", "--temp-dir", temp_dir],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        for line in head.stdout:  # its banner ends with the command that stops it
            if "Ray runtime started" in line:
                break
        else:
            raise AssertionError("ray start ended before the cluster was up")
        yield head, f"127.0.0.1:{port}", temp_dir
    finally:
        if head.poll() is None:
            os.killpg(head.pid, signal.SIGKILL)
        head.wait(timeout=30)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _drivers_warnings(temp_dir: str) -> str:
    """What the driver's Ray core wrote to its log file at warning level and above: where Ray says
    why it ended a driver itself (its warnings reach that file only, not the driver's stderr)."""
    logs = Path(temp_dir).glob("session_*/logs/python-core-driver-*.log")
    lines = [line for log in logs for line in log.read_text(errors="replace").splitlines()
             if line.split(" ", 3)[2:3] in (["W"], ["E"], ["F"])]  # "[date time LEVEL pid tid] ..."
    return "\n".join(lines[-40:])


def test_a_cluster_that_dies_ends_the_run_with_a_named_error_and_a_checkpoint(gorila_process, cluster, tmp_path):
    head, address, temp_dir = cluster
    run_dir = tmp_path / "run"
    job = gorila_process("train", "--algo", "a3c", "--workers", "2", "--total-steps", "100000000",
                         "--no-stop-at-target", "--address", address, "--run-dir", str(run_dir))
    job.wait_for("checkpoint ckpt-000001", timeout_s=180)  # seconds after training starts
    os.killpg(head.pid, signal.SIGKILL)  # the whole cluster: its GCS, raylet and workers
    code, stdout = job.finish(timeout_s=120)
    stderr = "".join(job.stderr)
    said = f"{stderr[-3000:]}\n--- the driver's Ray log:\n{_drivers_warnings(temp_dir)}"
    assert code == 1 and stdout == "", said
    assert f"ClusterLostError: the Ray cluster at {address} stopped answering" in stderr, said
    assert "Traceback" not in stderr and f"gorila train --resume {run_dir}" in stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["stop_reason"] == "cluster_lost"
    assert summary["env_steps"] > 0 and summary["updates"] > 0 and summary["train_time_s"] > 0
    _, meta = load_checkpoint(run_dir / "checkpoints", check=resumable(1))
    assert summary["last_checkpoint"]["path"].startswith("checkpoints/ckpt-") and meta["env_steps"] > 0
