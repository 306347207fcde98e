"""Rows 14 and 15 of the fault matrix, on one ``gorila train`` run on the embedded Ray: what it
exposes while it runs, and what is left after its driver is killed with SIGKILL."""

import json
import os
import signal
import stat
import subprocess
import sys

import psutil
import pytest

from conftest import GorilaProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    """An A3C run on the embedded Ray that has written its first checkpoint."""
    run_dir = tmp_path_factory.mktemp("killed") / "run"
    job = GorilaProcess("train", "--algo", "a3c", "--workers", "2", "--total-steps", "100000000",
                        "--no-stop-at-target", "--checkpoint-every-s", "1", "--run-dir", str(run_dir))
    try:
        job.wait_for("checkpoint ckpt-000001", timeout_s=180)
        yield job, run_dir
    finally:
        job.kill()


def _tree(job):
    driver = psutil.Process(job.proc.pid)
    return [driver, *driver.children(recursive=True)]


@pytest.mark.heavy
def test_row15_every_listening_socket_is_on_loopback_and_the_fast_path_is_private(running):
    """Row 15 (network exposure): the run's processes listen on 127.0.0.1 only, nothing on the
    dashboard's port; the shard's fast-path sockets live in a directory only this user can open."""
    job, _ = running
    listening, unix_paths = [], []
    for process in _tree(job):
        try:
            listening += [c.laddr for c in process.net_connections("inet") if c.status == psutil.CONN_LISTEN]
            unix_paths += [c.laddr for c in process.net_connections("unix") if "gorila-shard-" in (c.laddr or "")]
        except psutil.NoSuchProcess:
            continue
    assert listening, "the run listens nowhere: nothing was checked"
    assert all(addr.ip in ("127.0.0.1", "::ffff:127.0.0.1", "::1") for addr in listening), listening
    assert 8265 not in {addr.port for addr in listening}  # no dashboard
    assert unix_paths, "no fast-path socket found"
    for path in unix_paths:
        mode = os.stat(os.path.dirname(path))
        assert stat.S_IMODE(mode.st_mode) == 0o700 and mode.st_uid == os.getuid(), path


@pytest.mark.heavy
def test_row14_a_sigkilled_driver_leaves_no_ray_process_and_the_run_resumes(running):
    """Row 14 (driver killed with SIGKILL): within 30 s no process of the run is left (Ray's
    agents included); ``--resume`` continues from the last checkpoint."""
    job, run_dir = running
    tree = _tree(job)
    assert any("DashboardAgent" in " ".join(p.cmdline()) for p in tree[1:])  # the agents were there
    os.kill(job.proc.pid, signal.SIGKILL)  # the driver alone, not its process group
    _, alive = psutil.wait_procs(tree, timeout=30)
    assert not alive, [(p.pid, p.name()) for p in alive]

    saved = json.loads(max((run_dir / "checkpoints").glob("ckpt-*.json")).read_text())["meta"]
    resumed = subprocess.run([sys.executable, "-m", "gorila", "train", "--resume", str(run_dir), "--total-steps", "1"],
                             capture_output=True, text=True, timeout=180)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] >= saved["env_steps"] > 0 and summary["updates"] >= saved["updates"]
