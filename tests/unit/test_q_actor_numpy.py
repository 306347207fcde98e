"""A Q-actor given its network's numpy twin: the same greedy actions as the torch network, the
initial priorities of the torch formula, and a process that never imports torch."""

import functools
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch

from gorila.actors import ExplorationSchedule, QActorSpec
from gorila.actors.nstep import NStepReturns
from gorila.envs.spec import EnvSpec
from gorila.nets import FlatParams
from gorila.nets.q import TorchQNetwork, build_q_network, numpy_q_network
from gorila.types import Transitions

GREEDY = ExplorationSchedule.annealed(0.0, 0.0, 1)  # ε = 0: every action is the network's


def network(env_id: str, dueling: bool) -> functools.partial:
    return functools.partial(build_q_network, env_id, (32, 32), 0, dueling)


def random_params(network_fn, seed: int = 0) -> np.ndarray:
    """Random parameters throughout (an initialised network's output layer is near zero)."""
    return np.random.default_rng(seed).normal(0, 0.3, FlatParams(network_fn()).size).astype(np.float32)


def torch_priorities(net: torch.nn.Module, rows: Transitions) -> np.ndarray:
    """The initial priorities as the torch actor computed them, ``|R + discount · max Q' − Q|``."""
    with torch.inference_mode():
        q = net(torch.as_tensor(rows.obs).float())
        q_next = net(torch.as_tensor(rows.next_obs).float()).max(1).values
        taken = q.gather(1, torch.as_tensor(rows.action).long().unsqueeze(1)).squeeze(1)
        target = torch.as_tensor(rows.reward) + torch.as_tensor(rows.discount) * q_next
        return (target - taken).abs().numpy()


def random_rows(shape: tuple[int, ...], n_actions: int, n: int = 64) -> Transitions:
    rng = np.random.default_rng(2)
    obs = rng.random((2 * n, *shape)) < 0.3 if len(shape) == 3 else rng.normal(size=(2 * n, *shape)).astype(np.float32)
    return Transitions(obs=obs[:n], action=rng.integers(0, n_actions, n), reward=rng.normal(size=n).astype(np.float32),
                       next_obs=obs[n:], terminated=np.zeros(n, bool), truncated=np.zeros(n, bool),
                       env_index=np.arange(n), discount=(0.99 ** 3 * (rng.random(n) < 0.8)).astype(np.float32),
                       steps=np.full(n, 3))


CASES = [("CartPole-v1", False), ("CartPole-v1", True), ("MinAtar/Breakout-v1", False),
         ("MinAtar/Breakout-v1", True)]


@pytest.mark.parametrize("env_id, dueling", CASES)
def test_priorities_are_the_torch_formulas_on_the_twin_and_on_the_torch_network(env_id, dueling):
    network_fn = network(env_id, dueling)
    params = random_params(network_fn)
    reference = network_fn()
    FlatParams(reference).set(params)
    envs = EnvSpec(env_id, 2)
    twin = QActorSpec(envs, None, GREEDY, NStepReturns(3, 0.99), numpy_network=numpy_q_network(reference)).build(0)
    in_torch = QActorSpec(envs, network_fn, GREEDY, NStepReturns(3, 0.99)).build(0)
    assert isinstance(in_torch.network, TorchQNetwork) and not isinstance(twin.network, TorchQNetwork)
    for actor in (twin, in_torch):
        actor.load(params, version=1)
    shape = twin.observation_space.shape
    assert shape is not None
    rows = random_rows(shape, twin.n_actions)
    expected = torch_priorities(reference, rows)
    assert expected.std() > 0.1  # rows that differ: a formula reading the wrong entries shows
    for actor in (twin, in_torch):
        priorities = actor.priorities(rows)
        assert priorities.dtype == np.float32 and priorities.shape == (64,)
        np.testing.assert_allclose(priorities, expected, rtol=1e-4, atol=1e-5)
        actor.close()


# seeds of parameters whose greedy actions vary over the first steps
@pytest.mark.parametrize("env_id, dueling, seed", [("CartPole-v1", True, 4), ("MinAtar/Breakout-v1", True, 0),
                                                   ("MinAtar/Breakout-v1", False, 0)])
def test_a_greedy_actor_on_the_twin_takes_the_torch_actors_steps(env_id, dueling, seed):
    network_fn = network(env_id, dueling)
    params = random_params(network_fn, seed=seed)
    twin_spec = QActorSpec(EnvSpec(env_id, 4), None, GREEDY, NStepReturns(1, 0.99), seed=5,
                           numpy_network=numpy_q_network(network_fn()))
    torch_spec = QActorSpec(EnvSpec(env_id, 4), network_fn, GREEDY, NStepReturns(1, 0.99), seed=5)
    played = []
    for spec in (twin_spec, torch_spec):
        actor = spec.build(index=1)
        actor.load(params, version=7)
        rows = [actor.act() for _ in range(30)]
        played.append(Transitions.concatenate([r for r in rows if r is not None]))
        actor.close()
    in_numpy, in_torch = played
    assert len(np.unique(in_torch.action)) > 1  # the network's choices, not one action throughout
    np.testing.assert_array_equal(in_numpy.action, in_torch.action)
    np.testing.assert_array_equal(in_numpy.obs, in_torch.obs)


ACTS_WITHOUT_TORCH = """
import pickle, sys
from gorila.actors.exploration import ExplorationSchedule
from gorila.actors.nstep import NStepReturns
from gorila.actors.q_actor import QActorSpec
from gorila.envs.spec import EnvSpec
env_id, twin, params = pickle.load(sys.stdin.buffer)
spec = QActorSpec(EnvSpec(env_id, 2), None, ExplorationSchedule.per_actor(1), NStepReturns(2, 0.99), numpy_network=twin)
actor = spec.build(index=0)
actor.load(params, version=0)
rows = [actor.act() for _ in range(5)]
rows = [r for r in rows if r is not None]
priorities = [actor.priorities(r) for r in rows]
print(sum(map(len, rows)), all((p >= 0).all() for p in priorities), 'torch' in sys.modules)
"""


@pytest.mark.parametrize("env_id, dueling", [("CartPole-v1", False), ("MinAtar/Breakout-v1", True)])
def test_an_actor_given_its_networks_twin_acts_in_a_process_without_torch(env_id, dueling):
    net = network(env_id, dueling)()
    shipped = pickle.dumps((env_id, numpy_q_network(net), FlatParams(net).get()))
    done = subprocess.run([sys.executable, "-c", ACTS_WITHOUT_TORCH], input=shipped, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    # 5 steps of 2 envs, 2-step rows: the first step completes none; no torch in the process
    assert done.stdout.decode().split() == ["8", "True", "False"]
