"""``gorila train --algo impala --env ALE/Pong-v5``: the Nature-CNN actor-critic end to end on CPU,
segments of frames through the trajectory queue to the V-trace learner."""

import json

import pytest

from gorila.cli import main

pytestmark = pytest.mark.smoke


def test_impala_on_pong_runs_end_to_end(tmp_path):
    assert main(["train", "--algo", "impala", "--env", "ALE/Pong-v5", "--runtime", "local", "--actors", "2",
                 "--envs-per-actor", "2", "--unroll-length", "10", "--total-steps", "300", "--lr", "6e-4",
                 "--eval-episodes", "1", "--eval-every-s", "1000", "--eval-noop-max", "5",
                 "--run-dir", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["env_steps"] >= 300 and summary["updates"] > 0 and summary["stop_reason"] == "budget"
    assert summary["final_eval_return"] == int(summary["final_eval_return"])  # whole game points
    lag = {int(k): v for k, v in summary["learner_policy_lag_histogram"].items()}
    assert sum(lag.values()) == summary["updates"] * 10 * 2  # one 10-step segment of 2 envs per gradient
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["impala"]["unroll_length"] == 10
