"""Gorila DQN under faults: a killed bundle is restarted; a killed run resumes from its checkpoint."""

import json
import signal
import subprocess
import sys

import pytest

from gorila.agents.dqn.config import DQNConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.mark.heavy
def test_killed_bundle_restarts_pulls_fresh_params_and_the_run_reaches_its_target(ray_local, tmp_path, train):
    run = RunConfig(algo="dqn", mode="async", runtime="ray", run_dir=tmp_path, seed=1, checkpoint_every_s=600)
    cfg = DQNConfig(actors=2, learning_starts=500)
    rl = RLConfig(env="CartPole-v1", total_steps=60_000, target_return=120.0, eval_episodes=5)
    killed = {}

    def kill_once(placed):
        bundles = placed.groups["bundle"]
        first = bundles.reports()[0]
        if not killed and first["version"] > 300:
            killed.update(version=first["version"], pid=first["pid"])
            bundles.kill(0)
        elif killed and "after" not in killed and first["pid"] != killed["pid"]:
            killed["after"] = first

    summary = train(run, cfg, rl, on_chunk=kill_once)
    assert killed, "the run ended before the kill"
    assert summary["worker_restarts"] >= 1
    assert killed["after"]["restarted"]
    # The new process pulled the server's parameters before its first step, not the initial ones.
    assert killed["after"]["version"] >= killed["version"]
    assert summary["time_to_target_s"] is not None, summary["best_eval_return"]


def test_killed_run_resumes_from_the_saved_versions(tmp_path):
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "gorila.cli", "train", "--algo", "dqn", "--env", "CartPole-v1", "--runtime", "local",
           "--actors", "1", "--learning-starts", "200", "--checkpoint-every-s", "0.5", "--total-steps", "1000000",
           "--no-stop-at-target", "--run-dir", str(run_dir)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    saved_updates = None
    try:
        for line in proc.stdout:  # the run prints a line per checkpoint; bounded by the test timeout
            if "checkpoint" in line and " 0 updates" not in line:
                saved_updates = int(line.split(" updates")[0].rsplit(" ", 1)[1])
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert saved_updates, "no checkpoint with updates was written"
    resumed = subprocess.run([sys.executable, "-m", "gorila.cli", "train", "--resume", str(run_dir),
                              "--total-steps", "1"], capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["updates"] >= saved_updates  # the server continued from the saved versions
    assert summary["env_steps"] > 0
    config = json.loads((run_dir / "config.json").read_text())
    assert config["dqn"]["learning_starts"] == 200  # the resumed run kept its configuration
