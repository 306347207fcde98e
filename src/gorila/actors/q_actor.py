"""The Q-learning actor: ε-greedy steps of its environments with a copy of the parameters.

Given its network's numpy twin (:func:`gorila.nets.q.numpy_q_network`) it acts and computes
priorities in numpy, and its process never imports torch: at a step's few observations torch's
per-call cost is most of a small network's forward pass, and a torch process slows the learner's.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import gymnasium as gym
import numpy as np

from gorila.actors.exploration import ExplorationSchedule, epsilon_greedy
from gorila.actors.nstep import NStepReturns
from gorila.actors.tally import ExperienceTally
from gorila.envs.spec import EnvSpec
from gorila.nets.numpy_conv import NumpyNetwork
from gorila.types import Transitions

if TYPE_CHECKING:
    from torch import nn


class QActor:
    """Steps its envs ε-greedily with the parameters it was last given (an :class:`~gorila.core.Actor`)::

        actor = QActor(EnvSpec("CartPole-v1", num_envs=4), network_fn, schedule, NStepReturns(3, 0.99),
                       index=k, seed=s)
        actor.load(source.params(), source.version)
        rows = actor.act()                  # one step of every env: the replay rows it completed, or None
        priorities = actor.priorities(rows) # |TD error| by the actor's own network

    Its ε is ``schedule.epsilon(index, version)``: the version of the loaded parameters counts the
    global updates. Rows are n-step (``returns``) and tagged with the ``policy_version`` that acted;
    EnvPool's hidden reset steps yield none, nor does an environment that failed (its episode's
    pending rows are dropped). ``tally`` counts what it has played, ``env_failures`` what failed.

    Given ``numpy_network``, the network's unset numpy twin, it plays a copy of that and never
    builds ``network_fn()`` (nor imports torch); else it plays the torch network
    (:class:`~gorila.nets.q.TorchQNetwork`). Either way ``network`` gives Q-values as numpy arrays,
    its greedy actions are their argmax (the first of equal maxima, as torch's), and the priorities
    are computed from them in numpy.
    """

    def __init__(self, envs: EnvSpec, network_fn: Callable[[], nn.Module] | None, exploration: ExplorationSchedule,
                 returns: NStepReturns = NStepReturns(), *, index: int = 0, seed: int = 0,
                 numpy_network: NumpyNetwork | None = None):
        self.runner = envs.runner(seed)
        self.nstep = returns.builder()
        self.network = _network(network_fn, numpy_network)
        self.exploration, self.index = exploration, index
        actions = self.runner.action_space
        assert isinstance(actions, gym.spaces.Discrete)  # build_q_network refuses other action spaces first
        self.n_actions = int(actions.n)
        self.rng = np.random.default_rng(seed)
        self.version = -1
        self.tally = ExperienceTally()

    @property
    def observation_space(self) -> gym.Space:
        return self.runner.observation_space

    @property
    def env_failures(self) -> int:
        return self.runner.env_failures

    @property
    def epsilon(self) -> float:
        return self.exploration.epsilon(self.index, self.version)

    def load(self, params: np.ndarray, version: int) -> None:
        self.network.set(params)
        self.version = version

    def act(self) -> Transitions | None:
        actions = epsilon_greedy(self.network.greedy(self.runner.observations), self.epsilon, self.n_actions,
                                 self.rng)
        transitions = self.runner.step(actions)
        for env in self.runner.dropped:  # an env that failed: its episode's pending rows go with it
            self.nstep.drop(env)
        self.tally.add(len(transitions), self.runner.pop_episodes())
        return self.nstep.add(transitions, policy_version=self.version)

    def priorities(self, rows: Transitions) -> np.ndarray:
        """``|R + discount · max_a Q(next_obs, a) − Q(obs, action)|`` of each row, float32, by this
        actor's network (Ape-X's initial priorities: the learner's double-Q with online = target)."""
        n = len(rows)
        q = self.network(np.concatenate([rows.obs, rows.next_obs]))  # one forward pass for both
        taken = q[np.arange(n), rows.action.astype(np.int64)]
        assert rows.discount is not None  # n-step rows carry their discount
        target = rows.reward.astype(np.float32) + rows.discount.astype(np.float32) * q[n:].max(axis=1)
        priorities: np.ndarray = np.abs(target - taken).astype(np.float32, copy=False)
        return priorities

    def close(self) -> None:
        self.runner.close()


@dataclass(frozen=True)
class QActorSpec:
    """How to build actor ``index`` of a run inside its own process (small and picklable)::

        spec = QActorSpec(EnvSpec("CartPole-v1", 4), network_fn, schedule, NStepReturns(3, 0.99), seed=0,
                          numpy_network=numpy_q_network(network_fn()))   # None: it acts through torch
        actor = spec.build(index=3)        # envs seeded seed + 1000·index + i
    """

    envs: EnvSpec
    network_fn: Callable[[], nn.Module] | None
    exploration: ExplorationSchedule
    returns: NStepReturns = NStepReturns()
    seed: int = 0
    numpy_network: NumpyNetwork | None = None

    def build(self, index: int) -> QActor:
        return QActor(self.envs, self.network_fn, self.exploration, self.returns, index=index,
                      seed=self.seed + 1000 * index, numpy_network=self.numpy_network)


def _network(network_fn: Callable[[], nn.Module] | None, numpy_network: NumpyNetwork | None) -> NumpyNetwork:
    """A copy of the numpy twin (one unset twin is handed to every actor of a process), or the torch
    network, whose module (and torch) is imported only here."""
    if numpy_network is not None:
        return copy.deepcopy(numpy_network)
    if network_fn is None:
        raise ValueError("a QActor needs a network_fn or a numpy_network")
    from gorila.nets.q import TorchQNetwork  # torch: only for a network without a numpy twin

    return TorchQNetwork(network_fn())
