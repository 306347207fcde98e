"""``gorila train --preset pong-cpu``: the setting that learns Pong on a CPU, run end to end for a few
hundred steps (its learning is measured in docs/environments.md, never in tests)."""

import json

import pytest

from gorila.cli import main

pytestmark = pytest.mark.smoke


def test_the_pong_cpu_preset_runs_its_small_network_on_one_segment_per_update(tmp_path):
    assert main(["train", "--preset", "pong-cpu", "--runtime", "local", "--total-steps", "400",
                 "--eval-episodes", "1", "--eval-noop-max", "5", "--run-dir", str(tmp_path)]) == 0
    config = json.loads((tmp_path / "config.json").read_text())
    impala = config["impala"]
    assert (impala["env"], impala["encoder"], impala["batch_size"]) == ("ALE/Pong-v5", "mnih2013", 1)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["env_steps"] >= 400 and summary["stop_reason"] == "budget"
    lag = {int(k): v for k, v in summary["learner_policy_lag_histogram"].items()}
    # each update learns from one actor's segment: 5 steps of its 16 envs
    assert summary["updates"] > 0 and sum(lag.values()) == summary["updates"] * 5 * 16
    assert summary["final_eval_return"] == int(summary["final_eval_return"])  # whole game points
