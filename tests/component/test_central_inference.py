"""``--inference central`` on the local runtime: the same commands as local inference, with the
actors' actions chosen by the inference server (its thread, in this process)."""

import pytest

from gorila.agents.apex.builder import make_plan as apex_plan
from gorila.agents.apex.config import ApexConfig
from gorila.agents.dqn.builder import make_plan as dqn_plan
from gorila.agents.dqn.config import DQNConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig
from gorila.driver.loop import run
from gorila.errors import ConfigError

ENV = "gorila/Counting-v0"   # observation = step index in a 5-step episode


def rl(steps, inference="central"):
    return RLConfig(env=ENV, total_steps=steps, eval_every_s=60, eval_episodes=1, stop_at_target=False,
                    inference=inference, inference_wait_ms=1.0)


def test_apex_with_central_inference_trains_and_reports_batches_and_policy_lag(tmp_path):
    cfg = ApexConfig(actors=2, envs_per_actor=4, learning_starts=200, batch_size=16, prefetch=2,
                     replay_capacity=2000, hidden=(8,), add_every=4, actor_refresh=5)
    run_config = RunConfig(algo="apex", runtime="local", run_dir=tmp_path)
    summary = run(run_config, apex_plan(run_config, cfg, rl(3000)))
    assert summary["workers"] == {"actor": 2, "learner": 1}
    assert summary["env_steps"] >= 3000 and summary["updates"] > 20
    # each request is one group (2 envs): batches hold one or more of them
    assert summary["inference_mean_batch"] >= 2
    # the rows carry the version the server acted with: the learner's lag is measured on them
    lag = {int(k): v for k, v in summary["learner_policy_lag_histogram"].items()}
    assert sum(lag.values()) == summary["updates"] * 16


@pytest.mark.parametrize("replay", ["local", "global"])
def test_dqn_with_central_inference_runs_in_both_replay_modes(tmp_path, replay):
    cfg = DQNConfig(actors=2, envs_per_actor=2, replay=replay, learning_starts=100, batch_size=16,
                    replay_capacity=1000, hidden=(8,))
    run_config = RunConfig(algo="dqn", runtime="local", run_dir=tmp_path)
    summary = run(run_config, dqn_plan(run_config, cfg, rl(1500)))
    assert summary["env_steps"] >= 1500 and summary["updates"] > 0
    assert summary["inference_mean_batch"] >= 1  # the server chose the actions
    group = "bundle" if replay == "local" else "learner"
    lag = {int(k): v for k, v in summary[f"{group}_policy_lag_histogram"].items()}
    # every sampled row is counted; a push still on its way at the end may not be an update yet
    assert abs(sum(lag.values()) - summary["updates"] * 16) <= 16 * cfg.actors


def test_auto_inference_is_central_for_images_on_a_gpu_only():
    import gymnasium as gym
    import numpy as np

    image = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    vector = gym.spaces.Box(-1, 1, (4,), np.float32)
    assert RLConfig().central_inference(image, gpu=True)
    assert not RLConfig().central_inference(image, gpu=False)
    assert not RLConfig().central_inference(vector, gpu=True)
    assert not RLConfig(inference_device="cpu").central_inference(image)  # the server is asked to use the CPU
    assert not RLConfig(inference="local").central_inference(image, gpu=True)
    assert RLConfig(inference="central").central_inference(vector, gpu=False)


def test_bad_inference_flags_are_refused_by_name():
    for kwargs, field in [({"inference": "gpu"}, "inference"), ({"inference_batch": 0}, "inference_batch"),
                          ({"inference_wait_ms": -1.0}, "inference_wait_ms")]:
        with pytest.raises(ConfigError) as err:
            RLConfig(**kwargs)
        assert err.value.field == field


@pytest.mark.parametrize("inference", ["local", "central"])
def test_a3c_reports_its_policy_lag_in_either_mode(tmp_path, inference):
    from gorila.agents.a3c.builder import make_plan as a3c_plan
    from gorila.agents.a3c.config import A3CConfig

    cfg = A3CConfig(workers=2, envs_per_actor=4, unroll_length=5, hidden=(8,))
    run_config = RunConfig(algo="a3c", runtime="local", run_dir=tmp_path)
    summary = run(run_config, a3c_plan(run_config, cfg, rl(2000, inference)))
    lag = {int(k): v for k, v in summary["worker_policy_lag_histogram"].items()}
    assert sum(lag.values()) == summary["env_steps"]  # every env step is counted once
    if inference == "local":
        assert lag.keys() == {0}  # a worker acts with the very parameters its gradient is computed on
    assert summary["worker_policy_lag_mean"] is not None and summary["updates"] > 0


@pytest.mark.parametrize("inference", ["local", "central"])
def test_a3c_rollouts_to_the_episode_s_end_in_either_mode(tmp_path, inference):
    from gorila.agents.a3c.builder import make_plan as a3c_plan
    from gorila.agents.a3c.config import A3CConfig

    cfg = A3CConfig(workers=1, envs_per_actor=4, unroll_length=0, hidden=(8,))
    run_config = RunConfig(algo="a3c", runtime="local", run_dir=tmp_path)
    summary = run(run_config, a3c_plan(run_config, cfg, rl(400, inference)))
    pushes = summary["pushes_counted"] + summary["pushes_accepted"] + summary["pushes_rejected"]
    # Every env starts in step with the others and every episode lasts 5 steps: a rollout is one episode each.
    assert pushes > 0 and summary["env_steps"] == pushes * 4 * 5
