"""The evaluator's numpy copy of a plain MLP Q-network: the same Q-values and greedy actions as the
torch network on the same flat parameters, found only for plain MLPs, and no torch in its process."""

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

from gorila.nets import FlatParams
from gorila.nets.numpy_mlp import NumpyMLP
from gorila.nets.q import VectorQNetwork, greedy_policy, make_q_network, mlp_widths


@pytest.mark.parametrize("hidden", [(64, 64), (8,), (16, 32, 8)])
def test_the_numpy_copy_computes_the_networks_q_values_and_actions(hidden):
    net = VectorQNetwork(4, hidden, 3)
    flat = FlatParams(net).get() + np.random.default_rng(0).normal(0, 0.5, FlatParams(net).size).astype(np.float32)
    FlatParams(net).set(flat)
    copy = NumpyMLP(mlp_widths(net))
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
evaluation = PolicyEvaluation("CartPole-v1", None, None, episodes=2, epsilon=0.0, seed=0, noop_max=0, every_s=0.0,
                              target=None, mlp_widths=widths)
runtime = LocalRuntime()
shards = runtime.start_shards(ServerSpec(rule=UpdateRule.asynchronous()), np.zeros(58, np.float32))
evaluator = evaluation.factory(0, shards.server)
evaluator.step()
print(len(evaluator.report()["eval_returns"]), 'torch' in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "False"]  # both episodes played, and torch never loaded
