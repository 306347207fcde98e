"""``gorila train --algo a3c --env ALE/Pong-v5``: the Nature-CNN actor-critic end to end on CPU, with
each actor's own network (local inference) and with the inference server (central)."""

import json

import pytest

from gorila.cli import main

pytestmark = pytest.mark.smoke


@pytest.mark.heavy
@pytest.mark.parametrize("inference", ["local", "central"])
def test_a3c_on_pong_runs_end_to_end_with_either_inference(tmp_path, inference):
    assert main(["train", "--algo", "a3c", "--env", "ALE/Pong-v5", "--runtime", "local", "--workers", "2",
                 "--envs-per-actor", "2", "--unroll-length", "5", "--total-steps", "200", "--lr-policy", "7e-4",
                 "--lr-value", "7e-4", "--inference", inference, "--eval-episodes", "1", "--eval-every-s", "1000",
                 "--eval-noop-max", "5", "--run-dir", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["env_steps"] >= 200 and summary["updates"] > 0 and summary["stop_reason"] == "budget"
    assert summary["final_eval_return"] == int(summary["final_eval_return"])  # whole game points
    lag = {int(k): v for k, v in summary["worker_policy_lag_histogram"].items()}
    assert sum(lag.values()) == summary["env_steps"]
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["a3c"]["inference"] == inference
