"""A Ray cluster that dies under a run (``--address``): the run ends soon, with a named error
(``ClusterLostError``, exit 1, no traceback), a full summary and a checkpoint to resume from."""

import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from gorila.checkpoint import load_checkpoint
from gorila.driver.progress import resumable

pytestmark = [pytest.mark.integration, pytest.mark.heavy, pytest.mark.timeout(300)]


@pytest.fixture
def cluster():
    """A one-node Ray cluster (``ray start --head --block``) in a process group of its own; yields
    its address; killed with its group at the end (if the test has not killed it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    head = subprocess.Popen([sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
                             "--port", str(port), "--num-cpus", "2", "--include-dashboard", "false",
                             "--node-ip-address", "127.0.0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        for line in head.stdout:  # its banner ends with the command that stops it
            if "Ray runtime started" in line:
                break
        else:
            raise AssertionError("ray start ended before the cluster was up")
        yield head, f"127.0.0.1:{port}"
    finally:
        if head.poll() is None:
            os.killpg(head.pid, signal.SIGKILL)
        head.wait(timeout=30)


def test_a_cluster_that_dies_ends_the_run_with_a_named_error_and_a_checkpoint(gorila_process, cluster, tmp_path):
    head, address = cluster
    run_dir = tmp_path / "run"
    job = gorila_process("train", "--algo", "a3c", "--workers", "2", "--total-steps", "100000000",
                         "--no-stop-at-target", "--address", address, "--run-dir", str(run_dir))
    job.wait_for("checkpoint ckpt-000001", timeout_s=180)  # seconds after training starts
    os.killpg(head.pid, signal.SIGKILL)  # the whole cluster: its GCS, raylet and workers
    code, stdout = job.finish(timeout_s=120)
    stderr = "".join(job.stderr)
    assert code == 1 and stdout == "", stderr[-3000:]
    assert f"ClusterLostError: the Ray cluster at {address} stopped answering" in stderr
    assert "Traceback" not in stderr and f"gorila train --resume {run_dir}" in stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["stop_reason"] == "cluster_lost"
    assert summary["env_steps"] > 0 and summary["updates"] > 0 and summary["train_time_s"] > 0
    _, meta = load_checkpoint(run_dir / "checkpoints", check=resumable(1))
    assert summary["last_checkpoint"]["path"].startswith("checkpoints/ckpt-") and meta["env_steps"] > 0
