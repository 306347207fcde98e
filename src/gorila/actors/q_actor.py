"""The Q-learning actor: ε-greedy steps of its environments with a copy of the parameters."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from torch import nn

from gorila.actors.exploration import ExplorationSchedule
from gorila.envs.spec import EnvSpec
from gorila.envs.vector import Transitions
from gorila.nets import FlatParams
from gorila.nets.q import greedy_policy

RECENT_EPISODES = 20


class QActor:
    """Steps its envs ε-greedily with the parameters it was last given (an :class:`~gorila.core.Actor`)::

        actor = QActor(EnvSpec("CartPole-v1", num_envs=4), network_fn, schedule, index=k, seed=s)
        actor.load(source.params(), source.version)
        t = actor.act()            # one step of every env; t.policy_version is the loaded version

    Its ε is ``schedule.epsilon(index, version)``: the version of the loaded parameters counts the
    global updates. EnvPool's hidden reset steps yield no rows. ``env_steps``, ``episodes`` and
    ``recent_returns`` (unclipped scores of the last 20 episodes) count what it has played.
    """

    def __init__(self, envs: EnvSpec, network_fn: Callable[[], nn.Module], exploration: ExplorationSchedule, *,
                 index: int = 0, seed: int = 0):
        self.runner = envs.runner(seed)
        self.net = network_fn().eval()
        self.flat = FlatParams(self.net)
        self.policy = greedy_policy(self.net)
        self.exploration, self.index = exploration, index
        self.n_actions = int(self.runner.action_space.n)
        self.rng = np.random.default_rng(seed)
        self.version = -1
        self.env_steps = 0
        self.episodes = 0
        self.recent_returns: collections.deque[float] = collections.deque(maxlen=RECENT_EPISODES)

    @property
    def epsilon(self) -> float:
        return self.exploration.epsilon(self.index, self.version)

    def load(self, params: np.ndarray, version: int) -> None:
        self.flat.set(params)
        self.version = version

    def act(self) -> Transitions:
        actions = self.policy(self.runner.observations)
        explore = self.rng.random(len(actions)) < self.epsilon
        actions[explore] = self.rng.integers(self.n_actions, size=int(explore.sum()))
        transitions = dataclasses.replace(self.runner.step(actions), policy_version=self.version)
        self.env_steps += len(transitions)
        for episode in self.runner.pop_episodes():
            self.episodes += 1
            self.recent_returns.append(episode.score)
        return transitions

    def close(self) -> None:
        self.runner.close()


@dataclass(frozen=True)
class QActorSpec:
    """How to build actor ``index`` of a run inside its own process (small and picklable)::

        spec = QActorSpec(EnvSpec("CartPole-v1", 4), network_fn, schedule, seed=0)
        actor = spec.build(index=3)        # envs seeded seed + 1000·index + i
    """

    envs: EnvSpec
    network_fn: Callable[[], nn.Module]
    exploration: ExplorationSchedule
    seed: int = 0

    def build(self, index: int) -> QActor:
        return QActor(self.envs, self.network_fn, self.exploration, index=index, seed=self.seed + 1000 * index)
