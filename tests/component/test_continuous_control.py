"""Box actions end to end on the local runtime: a3c, impala and ppo train on Pendulum-v1 (local and
central inference), a saved Gaussian policy plays its mean action, and dqn refuses Box actions."""

import json

import numpy as np
import pytest
import torch

import gorila
from gorila.cli import main
from gorila.errors import ConfigError

QUICK = dict(env="Pendulum-v1", runtime="local", total_steps=2_000, stop_at_target=False, eval_episodes=2,
             eval_every_s=0.2)


@pytest.mark.parametrize("algo,inference", [("a3c", "local"), ("impala", "local"), ("ppo", "local"),
                                            ("ppo", "central")])
def test_each_policy_gradient_algorithm_trains_on_box_actions(algo, inference, tmp_path):
    summary = gorila.train(algo, run_dir=tmp_path / "run", inference=inference, **QUICK)
    assert summary["env_steps"] >= 2_000 and summary["updates"] > 0
    assert np.isfinite(summary["final_eval_return"]) and summary["final_eval_return"] < 0  # Pendulum's costs
    if inference == "central":
        assert summary["inference_mean_batch"] >= 1  # the server sampled the Gaussian's actions


def test_a_saved_gaussian_policy_plays_its_clipped_mean(tmp_path, capsys):
    gorila.train("ppo", run_dir=tmp_path / "run", **QUICK)
    policy = gorila.load_policy(tmp_path / "run", checkpoint="last")
    obs = np.stack([policy.make_env(seed=s).reset(seed=s)[0] for s in range(3)])
    with torch.no_grad():
        out, _ = policy.network(torch.as_tensor(obs))
    np.testing.assert_array_equal(policy(obs), out[:, :1].numpy())  # the mean, not a sample
    assert main(["eval", str(tmp_path / "run"), "--episodes", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["scores"]) == 2 and all(-2_000 < s < 0 for s in report["scores"])


@pytest.mark.parametrize("algo", ["dqn", "apex"])
def test_q_learning_refuses_box_actions_naming_the_algorithms_that_take_them(algo, tmp_path):
    with pytest.raises(ConfigError, match="a3c, impala, ppo") as e:
        gorila.train(algo, env="Pendulum-v1", runtime="local", run_dir=tmp_path / "run")
    assert e.value.field == "env"
