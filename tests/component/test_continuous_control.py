"""Box actions end to end on the local runtime: a3c, impala and ppo train on Pendulum-v1 (local and
central inference), IMPALA's central inference server hands its actors the unclipped Gaussian
samples with their exact log-probabilities, a saved Gaussian policy plays its mean action, and dqn
refuses Box actions."""

import json

import numpy as np
import pytest
import torch

import gorila
from gorila.agents.impala.config import ImpalaConfig
from gorila.agents.kit import QUEUES
from gorila.agents.rl_config import RLConfig
from gorila.cli import main
from gorila.config import RunConfig
from gorila.errors import ConfigError
from gorila.nets.actor_critic_env import make_network

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


# The inference server pulls the parameters once at its start and then every 2 x unroll x
# --actor-refresh batches: a refresh this large keeps it on version 0, the network's initial weights,
# so a test can recompute every stored log-probability from make_network alone.
# A queue long enough that segments wait there between chunks for segments_taken to take them.
CENTRAL_PENDULUM = ImpalaConfig(actors=2, envs_per_actor=4, unroll_length=16, hidden=(16,), actor_refresh=10**6,
                                queue_capacity=16)
PENDULUM_HIGH = 2.0  # Pendulum-v1's torque bound


def central_impala_on_pendulum(runtime: str, run_dir) -> tuple[RunConfig, ImpalaConfig, RLConfig]:
    """The configs of an IMPALA run on Pendulum-v1 with ``--inference central`` (for ``train``)."""
    run = RunConfig(algo="impala", runtime=runtime, seed=4, run_dir=run_dir, checkpoint_every_s=600)
    rl = RLConfig(env="Pendulum-v1", total_steps=200_000, stop_at_target=False, eval_every_s=600, eval_episodes=1,
                  inference="central")
    return run, CENTRAL_PENDULUM, rl


def segments_taken(wanted: int):
    """``(on_chunk, taken)``: after every chunk ``on_chunk`` takes what the trajectory queues hold
    (their learner never sees those segments) into ``taken``, and stops the run once it holds ``wanted``."""
    taken: list = []

    def on_chunk(placed):
        for segments in placed.services[QUEUES].call("take", wanted):
            taken.extend(segments or ())
        return len(taken) < wanted
    return on_chunk, taken


def assert_unclipped_samples_with_exact_log_probs(segments, seed: int) -> None:
    """Every step of ``segments`` (an IMPALA run's on Pendulum-v1, acted on version 0) stores a float
    action, some of them beyond the env's bounds (the sample, not what the env was sent), and the
    behaviour log-probability of exactly that sample under the initial network's Gaussian."""
    net = make_network("Pendulum-v1", CENTRAL_PENDULUM.hidden, CENTRAL_PENDULUM.shared_torso, seed, algo="impala")
    actions, log_probs, outs = [], [], []
    for seg in segments:
        assert seg.actions.dtype == np.float32 and seg.actions.shape == (*seg.valid.shape, 1)
        assert (seg.policy_version[seg.valid] == 0).all()
        with torch.no_grad():
            out, _ = net(torch.as_tensor(seg.obs[seg.valid]))
        actions.append(seg.actions[seg.valid])
        log_probs.append(seg.log_probs[seg.valid])
        outs.append(out)
    sampled, stored, out = np.concatenate(actions), np.concatenate(log_probs), torch.cat(outs)
    # the initial mean is near 0 and its std 1: about 1 sample in 20 falls beyond the bound of 2
    assert (np.abs(sampled) > PENDULUM_HIGH).any() and (np.abs(sampled) < PENDULUM_HIGH).any()
    np.testing.assert_allclose(stored, net.head.log_prob(out, torch.as_tensor(sampled)).numpy(), rtol=1e-5,
                               atol=1e-5)


def test_impala_with_central_inference_stores_the_unclipped_sample_and_its_log_probability(tmp_path, train):
    on_chunk, taken = segments_taken(wanted=4)
    summary = train(*central_impala_on_pendulum("local", tmp_path), on_chunk=on_chunk)
    assert summary["stop_reason"] == "on_chunk" and summary["inference_mean_batch"] >= 1
    assert len(taken) >= 4
    assert_unclipped_samples_with_exact_log_probs(taken, seed=4)


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
