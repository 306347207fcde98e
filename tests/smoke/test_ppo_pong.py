"""``gorila train --algo ppo --env ALE/Pong-v5``: the Nature-CNN actor-critic through PPO's epochs on CPU."""

import json

import pytest

from gorila.cli import main

pytestmark = pytest.mark.smoke


@pytest.mark.heavy
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_ppo_on_pong_runs_end_to_end(tmp_path, mode):
    assert main(["train", "--algo", "ppo", "--mode", mode, "--env", "ALE/Pong-v5", "--runtime", "local",
                 "--actors", "2", "--envs-per-actor", "2", "--unroll-length", "10", "--epochs", "2",
                 "--minibatches", "2", "--total-steps", "300", "--lr", "2.5e-4", "--eval-episodes", "1",
                 "--eval-every-s", "1000", "--eval-noop-max", "5", "--run-dir", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["env_steps"] >= 300 and summary["stop_reason"] == "budget"
    assert summary["updates"] > 0 and summary["updates"] % 4 == 0
    assert summary["final_eval_return"] == int(summary["final_eval_return"])
