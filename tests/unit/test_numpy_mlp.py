"""The evaluator's numpy copy of a plain MLP Q-network, or of an MLP actor-critic's policy: the same
outputs and greedy actions as the torch network on the same flat parameters, found only for MLPs
(and MinAtar's networks: test_numpy_minatar.py), and no torch in the evaluator's process, as every
RL builder makes it for CartPole; the sampler actors draw with."""

import pickle
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

from gorila.agents.registry import ALGORITHMS
from gorila.config import RunConfig
from gorila.driver.policy_evaluation import PolicyEvaluation
from gorila.nets import FlatParams
from gorila.nets.actor_critic import ActorCritic, ConvActorCritic
from gorila.nets.actor_critic_env import GreedyPolicy, make_network
from gorila.nets.minatar import MinAtarActorCritic
from gorila.nets.numpy_mlp import NumpyMLP
from gorila.nets.numpy_policy import PolicySampler, numpy_policy
from gorila.nets.q import VectorQNetwork, greedy_policy, make_q_network, mlp_widths


@pytest.mark.parametrize("hidden", [(64, 64), (8,), (16, 32, 8)])
def test_the_numpy_copy_computes_the_networks_q_values_and_actions(hidden):
    net = VectorQNetwork(4, hidden, 3)
    flat = FlatParams(net).get() + np.random.default_rng(0).normal(0, 0.5, FlatParams(net).size).astype(np.float32)
    FlatParams(net).set(flat)
    widths = mlp_widths(net)
    assert widths is not None
    copy = NumpyMLP(widths)
    copy.set(flat)
    obs = np.random.default_rng(1).normal(size=(256, 4)).astype(np.float64)  # cast as the network casts
    with torch.no_grad():
        q = net(torch.as_tensor(obs)).numpy()
    np.testing.assert_allclose(copy(obs), q, rtol=1e-4, atol=1e-5)
    assert (copy.greedy(obs) == greedy_policy(net)(obs)).mean() > 0.99  # a near-tie may round either way


def test_only_plain_mlps_have_widths():
    box = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    assert mlp_widths(make_q_network(box, 2, (64, 64))) == (4, 64, 64, 2)
    assert mlp_widths(make_q_network(box, 2, (64, 64), dueling=True)) is None
    assert mlp_widths(make_q_network(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), 6)) is None


def test_a_vector_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match="expected 19 parameters"):
        NumpyMLP((4, 3, 1)).set(np.zeros(20, np.float32))


def test_an_evaluator_of_a_plain_mlp_plays_without_torch():
    code = """
import functools, sys
from gorila.driver.policy_evaluation import PolicyEvaluation
from gorila.params import ServerSpec, UpdateRule
from gorila.runtime import LocalRuntime
import numpy as np
widths = (4, 8, 2)
from gorila.nets.numpy_mlp import NumpyMLP
evaluation = PolicyEvaluation("CartPole-v1", None, None, episodes=2, epsilon=0.0, seed=0, noop_max=0, every_s=0.0,
                              target=None, numpy_policy=NumpyMLP(widths))
runtime = LocalRuntime()
shards = runtime.start_shards(ServerSpec(rule=UpdateRule.asynchronous()), np.zeros(58, np.float32))
evaluator = evaluation.factory(0, shards.server)
evaluator.step()
print(len(evaluator.report()["eval_returns"]), 'torch' in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "False"]  # both episodes played, and torch never loaded


def _twin_on_random_parameters(net, obs_dim: int, rows: int):
    """``(policy, flat, obs, out)``: ``net`` on random parameters throughout, its numpy policy loaded
    with the same vector, random observations, and the torch network's policy output on them."""
    flat = np.random.default_rng(0).normal(0, 0.5, FlatParams(net).size).astype(np.float32)
    FlatParams(net).set(flat)
    policy = numpy_policy(net)
    assert policy is not None
    policy.set(flat)
    obs = np.random.default_rng(1).normal(0, 2.0, size=(rows, obs_dim))
    with torch.no_grad():
        out, _ = net(torch.as_tensor(obs, dtype=torch.float32))
    return policy, flat, obs, out


@pytest.mark.parametrize("hidden, shared", [((64, 64), False), ((16, 8, 4), False), ((32,), True), ((), True)])
def test_the_numpy_policy_computes_the_actor_critics_logits_and_greedy_actions(hidden, shared):
    """On random parameters throughout (the policy head is not left near zero, where a copy reading
    the wrong entries could still agree on most argmaxes), whole vector in, value network and all."""
    net = ActorCritic(4, 3, hidden, shared=shared)
    policy, _, obs, logits = _twin_on_random_parameters(net, obs_dim=4, rows=512)
    np.testing.assert_allclose(policy(obs), logits.numpy(), rtol=1e-4, atol=1e-5)
    actions = policy.greedy(obs)
    assert len(np.unique(actions)) == 3  # every action is chosen somewhere: the comparison means something
    assert (actions == GreedyPolicy(net)(obs)).mean() > 0.99  # a near-tie may round either way


@pytest.mark.parametrize("hidden, shared, size", [((64, 64), False, 1), ((16, 8), False, 3), ((32,), True, 2)])
def test_a_gaussian_policys_numpy_twin_is_the_torch_policy(hidden, shared, size):
    """Mean and log-std equal torch's output on random parameters (the log-std away from its start,
    so a twin reading the wrong entries fails), the greedy action is the mean, and a draw's
    log-probability is torch's Normal log-density of the action drawn."""
    net = ActorCritic(5, size, hidden, shared=shared, continuous=True)
    policy, flat, obs, out = _twin_on_random_parameters(net, obs_dim=5, rows=256)
    np.testing.assert_allclose(policy(obs), out.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(policy.greedy(obs), GreedyPolicy(net)(obs), rtol=1e-4, atol=1e-5)
    actions, log_probs = policy.draw(obs, np.random.default_rng(2))
    assert actions.dtype == log_probs.dtype == np.float32 and actions.shape == (256, size)
    normal = torch.distributions.Normal(out[:, :size], out[:, size:].exp())
    np.testing.assert_allclose(log_probs, normal.log_prob(torch.as_tensor(actions)).sum(-1).numpy(), rtol=1e-4,
                               atol=1e-4)
    spread = (actions - policy.greedy(obs)) / np.exp(policy.log_std)
    assert spread.std() == pytest.approx(1.0, rel=0.1)  # noise of the Gaussian's own width
    sampler = PolicySampler(net, seed=0)  # what actors and A3C's workers act through
    sampler.set(flat)
    assert sampler.in_numpy and sampler.sample_with_log_prob(obs)[0].shape == (256, size)


def test_only_mlp_and_minatar_actor_critics_have_a_numpy_policy():
    net = make_network("CartPole-v1", (64, 64), False, seed=0)
    policy = numpy_policy(net)
    assert isinstance(policy, NumpyMLP)
    assert (policy.widths, policy.activation, policy.total) == ((4, 64, 64, 2), "tanh", FlatParams(net).size)
    assert numpy_policy(ConvActorCritic(6)) is None
    assert numpy_policy(MinAtarActorCritic(6, 4, (10, 10))) is not None
    assert numpy_policy(VectorQNetwork(4, (8,), 2)) is None


def test_a_vector_of_another_networks_length_is_refused_by_the_policy():
    policy = numpy_policy(ActorCritic(4, 2, (8,)))
    assert isinstance(policy, NumpyMLP)
    with pytest.raises(ValueError, match=f"expected {policy.total} parameters"):
        policy.set(np.zeros(policy.size, np.float32))  # the policy's own entries only: not the network's vector


EVALUATOR = """
import pickle, sys
from gorila.params import ServerSpec, UpdateRule
from gorila.runtime import LocalRuntime
factory, params = pickle.load(sys.stdin.buffer)
runtime = LocalRuntime()
# Shards in this process too: slices short enough that their optimizer steps in numpy, not torch.
shards = runtime.start_shards(ServerSpec(rule=UpdateRule.asynchronous(), num_shards=8), params)
evaluator = factory(0, shards.server)
evaluator.step()
print(len(evaluator.report()["eval_returns"]), 'torch' in sys.modules)
"""


@pytest.mark.parametrize("algo, env", [(algo, "CartPole-v1") for algo in ("a3c", "impala", "ppo", "dqn", "apex")]
                         + [("impala", "MinAtar/Breakout-v1"), ("dqn", "MinAtar/Breakout-v1"), ("ppo", "Pendulum-v1")])
def test_the_evaluator_a_builder_makes_plays_without_torch(tmp_path, algo, env):
    """The plan's evaluator factory, pickled as a runtime sends it to the evaluator's process, is
    built and plays there; torch is never loaded in that process."""
    algorithm = ALGORITHMS[algo]
    run = RunConfig(algo=algo, runtime="local", run_dir=tmp_path / "run")
    configs = [cls() for cls in algorithm.config_classes()]
    configs[-1] = type(configs[-1])(env=env, eval_episodes=2)
    plan = algorithm.plan_fn()(run, *configs)
    assert isinstance(plan.evaluation, PolicyEvaluation)
    shipped = pickle.dumps((plan.evaluation.factory, plan.initial_params()))
    done = subprocess.run([sys.executable, "-c", EVALUATOR], input=shipped, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().split() == ["2", "False"]  # both episodes played, and torch never loaded


@pytest.mark.parametrize("net, obs_shape", [(ActorCritic(4, 3, (8,)), (4,)),
                                            (MinAtarActorCritic(3, in_channels=2, image_size=(5, 5)), (2, 5, 5)),
                                            (ConvActorCritic(3, in_channels=1, image_size=(36, 36)), (1, 36, 36))],
                         ids=["mlp, in numpy", "minatar, in numpy", "nature cnn, through torch"])
def test_the_sampler_draws_from_pi(net, obs_shape):
    with torch.no_grad():  # logits (0, 1, 2) whatever the observation: pi = (0.09, 0.24, 0.67), far from uniform
        out = net.policy if isinstance(net.policy, torch.nn.Linear) else net.policy[-1]
        out.weight.zero_()
        out.bias.copy_(torch.tensor([0.0, 1.0, 2.0]))
    sampler = PolicySampler(net, seed=0)
    sampler.set(FlatParams(net).get())
    obs = np.random.default_rng(1).uniform(0, 1, size=(4000, *obs_shape)).astype(np.float32)
    assert sampler.in_numpy == (not isinstance(net, ConvActorCritic))
    pi = np.exp([0.0, 1.0, 2.0]) / np.exp([0.0, 1.0, 2.0]).sum()
    frequencies = np.bincount(sampler.sample(obs), minlength=3) / len(obs)
    np.testing.assert_allclose(frequencies, pi, atol=0.03)  # 4 standard deviations of 4,000 draws at most
    actions, log_probs = sampler.sample_with_log_prob(obs)
    np.testing.assert_allclose(np.bincount(actions, minlength=3) / len(obs), pi, atol=0.03)
    assert log_probs.dtype == np.float32
    np.testing.assert_allclose(log_probs, np.log(pi)[actions], rtol=1e-5)  # each the log-probability of its own action
