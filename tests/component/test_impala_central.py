"""IMPALA and PPO with ``--inference central`` on the local runtime: segment actors hold no network,
the inference server samples their actions and returns each one's log-probability, which the
segments carry as the behaviour policy's ``log mu(a|x)``."""

import functools

import numpy as np
import torch

from gorila.actors.segment_actor import SegmentActor
from gorila.agents.impala.builder import make_plan as impala_plan
from gorila.agents.impala.config import ImpalaConfig
from gorila.agents.ppo.builder import make_plan as ppo_plan
from gorila.agents.ppo.config import PPOConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig
from gorila.driver.loop import run
from gorila.envs.spec import EnvSpec
from gorila.inference.batching import BatchingRule
from gorila.inference.policies import SampledPolicy
from gorila.inference.server import InferenceServer
from gorila.nets.actor_critic_env import make_network
from gorila.nets.flat import FlatParams
from gorila.params import LocalEndpoint, ParameterServer, ServerSpec, UpdateRule
from gorila.runtime.local import LocalService
from gorila.trajectory import RemoteQueue, TrajectoryQueue

COUNTING = "gorila/Counting-v0"  # 5-step episodes whose observation is the step index
MAX_ENV_STEPS = 400_000  # most seeds reach the target in 10-120 k steps; one in twenty needed over 200 k


def _parameter_server(network_fn):
    params = FlatParams(network_fn()).get()
    spec = ServerSpec(rule=UpdateRule.asynchronous(), optimizer="sgd", lr=0.1)
    shards = spec.build(params)
    return ParameterServer(tuple(LocalEndpoint(s) for s in shards), spec.layout(params.size), spec.rule,
                           timeout_s=10.0)


def test_segments_carry_the_servers_log_probability_of_each_chosen_action():
    network_fn = functools.partial(make_network, COUNTING, (8,), False, 0)
    server = _parameter_server(network_fn)
    inference = InferenceServer(0, server, policy=functools.partial(SampledPolicy, network_fn, seed=3),
                                rule=BatchingRule(64, 0.0), refresh_every=1)
    queue = TrajectoryQueue(0, capacity=4)
    actor = SegmentActor(0, server, envs=EnvSpec(COUNTING, 5), network_fn=network_fn,
                         queues=[RemoteQueue(LocalService(queue))], unroll_length=7, refresh_every=1, gamma=0.5,
                         seed=0, inference=LocalService(inference))
    try:
        assert actor.step()
        (seg,) = queue.take(1)
    finally:
        actor.close()
        inference.close()
    assert actor.sampler is None  # the server chose every action
    assert seg.obs.shape == (7, 5, 1) and seg.valid.all() and seg.steps == 35
    # both groups (envs 0-2 and 3-4) step once per time index: every env counts 0..4 then restarts
    assert seg.obs[:, :, 0].T.tolist() == [[0, 1, 2, 3, 4, 0, 1]] * 5
    assert (seg.policy_version == 0).all() and seg.last_obs[:, 0].tolist() == [2.0] * 5
    with torch.no_grad():
        logits, _ = network_fn()(torch.as_tensor(seg.obs))
    expected = torch.log_softmax(logits, -1).gather(-1, torch.as_tensor(seg.actions).unsqueeze(-1)).squeeze(-1)
    assert (seg.log_probs < 0).all()  # a sampled action's, not a placeholder's
    np.testing.assert_allclose(seg.log_probs, expected.numpy(), rtol=1e-5)


def test_impala_with_central_inference_learns_cartpole(tmp_path):
    run_config = RunConfig(algo="impala", runtime="local", seed=0, run_dir=tmp_path)
    # Judged at 200, ten times a random policy's return: the threads of the local runtime make each
    # run differ, and a run under load could wander below 475 for 400 k steps or collapse on the way.
    rl = RLConfig(total_steps=MAX_ENV_STEPS, eval_every_s=0.5, inference="central", inference_wait_ms=1.0,
                  target_return=200)
    summary = run(run_config, impala_plan(run_config, ImpalaConfig(), rl))
    assert summary["reached_target"] and summary["best_eval_return"] >= 200, summary["evaluations"][-3:]
    assert summary["env_steps"] < MAX_ENV_STEPS
    assert summary["inference_mean_batch"] >= 1  # the server chose the actions
    lag = {int(k): v for k, v in summary["learner_policy_lag_histogram"].items()}
    assert sum(lag.values()) > 0


def test_ppo_with_central_inference_trains(tmp_path):
    run_config = RunConfig(algo="ppo", runtime="local", mode="sync", seed=0, run_dir=tmp_path)
    rl = RLConfig(total_steps=4000, eval_every_s=60, eval_episodes=1, stop_at_target=False, inference="central",
                  inference_wait_ms=1.0)
    summary = run(run_config, ppo_plan(run_config, PPOConfig(actors=2), rl))
    assert summary["env_steps"] >= 4000 and summary["updates"] > 0
    assert summary["inference_mean_batch"] >= 1  # the server chose the actions
