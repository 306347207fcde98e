"""Ctrl-C on ``gorila train`` on the Ray runtime loses nothing and leaves nothing behind."""

import json
import re
import signal
import time

import psutil
import pytest

from gorila.checkpoint import load_checkpoint

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

COUNTERS = ("env_steps", "env_steps_per_s", "updates", "updates_per_s", "pushes_counted", "pushes_accepted",
            "pushes_rejected", "pushes_rejected_stale", "pushes_rejected_nonfinite", "pushes_rejected_outlier",
            "bytes_pushed", "bytes_pulled", "worker_restarts", "wall_time_from_start_s", "train_time_s",
            "cpu_time_s")


@pytest.mark.heavy
def test_ctrl_c_after_the_first_checkpoint_saves_everything_and_exits_130(gorila_process, tmp_path):
    run_dir = tmp_path / "run"
    job = gorila_process("train", "--algo", "a3c", "--workers", "2", "--total-steps", "100000000",
                         "--no-stop-at-target", "--checkpoint-every-s", "1", "--run-dir", str(run_dir))
    job.wait_for("checkpoint ckpt-000001", timeout_s=180)
    ray_processes = psutil.Process(job.proc.pid).children(recursive=True)
    assert any(p.name() == "raylet" for p in ray_processes)
    signalled = time.time()
    job.signal(signal.SIGINT)  # to the whole process group, as Ctrl-C in a terminal
    code, stdout = job.finish(timeout_s=30)
    took = time.time() - signalled
    stderr = "".join(job.stderr)
    assert code == 130, stderr
    assert took < 10, f"exit {took:.1f} s after the signal"

    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "interrupted" and summary["signal"] == "SIGINT"
    assert all(summary.get(name) is not None for name in COUNTERS)
    assert summary["env_steps"] > 0 and summary["updates"] > 0
    assert json.loads(stdout)["env_steps"] == summary["env_steps"]  # stdout: the same summary

    newest = max((run_dir / "checkpoints").glob("ckpt-*.json"))
    assert json.loads(newest.read_text())["saved_at"] > signalled  # the final checkpoint, after the signal
    _, meta = load_checkpoint(run_dir / "checkpoints")
    assert meta["env_steps"] == summary["env_steps"] and meta["updates"] == summary["updates"]
    assert (run_dir / "learning_curve.png").stat().st_size > 0

    _, alive = psutil.wait_procs(ray_processes, timeout=1)
    assert not alive, [p.name() for p in alive]
    assert "Traceback" not in stderr  # no stack dump
    assert "WARNING" not in stderr and not re.search(r"^\[\d{4}-\d\d-\d\d [\d:,]+ [IWE] \d+ \d+\]", stderr, re.M)
    # ... and none of Ray's own log lines, Python's or its C++ core's
    assert "starting Ray on this machine" in stderr


@pytest.mark.heavy
def test_a_double_ctrl_c_still_saves_the_final_checkpoint_and_the_full_summary(gorila_process, tmp_path):
    """The second Ctrl-C comes while the run stops: the chunks under way are given up, and the
    final checkpoint and the full summary are written all the same (not a stub), exit 130."""
    run_dir = tmp_path / "run"
    job = gorila_process("train", "--algo", "a3c", "--workers", "2", "--total-steps", "100000000",
                         "--no-stop-at-target", "--run-dir", str(run_dir))
    job.wait_for("training until", timeout_s=180)
    job.signal(signal.SIGINT)
    job.wait_for("SIGINT: stopping", timeout_s=60)
    job.signal(signal.SIGINT)
    code, stdout = job.finish(timeout_s=60)
    stderr = "".join(job.stderr)
    assert code == 130, stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "interrupted" and summary["signal"] == "SIGINT"
    assert all(summary.get(name) is not None for name in COUNTERS)
    _, meta = load_checkpoint(run_dir / "checkpoints")
    assert meta["env_steps"] == summary["env_steps"] and meta["updates"] == summary["updates"]
    assert json.loads(stdout)["env_steps"] == summary["env_steps"] and "Traceback" not in stderr


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_while_ray_starts_exits_with_its_code(gorila_process, wait_until, tmp_path, signum, code):
    """While Ray starts (its GCS up, ray.init not returned), ray.init's own SIGTERM handler
    (sys.exit(15)) is in place: the run still ends as any stopped start does, with 128 + the
    signal and nothing trained. A SIGTERM that ends the GCS before it names its port waits out
    Ray's 30-s wait for that port first (see gorila.driver.stop): hence a minute."""
    job = gorila_process("train", "--algo", "a3c", "--workers", "2", "--run-dir", str(tmp_path / "run"))
    job.wait_for("starting Ray on this machine", timeout_s=120)
    driver = psutil.Process(job.proc.pid)
    wait_until(lambda: any(p.name() == "gcs_server" for p in driver.children()), 60, "Ray's GCS started")
    job.signal(signum)
    returned, _ = job.finish(timeout_s=60)
    stderr = "".join(job.stderr)
    assert returned == code, stderr
    assert "nothing was trained" in stderr and "Traceback" not in stderr
