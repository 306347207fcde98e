"""Actors that only step environments: the run's inference server chooses their actions.

A :class:`RolloutWorker` runs its K envs as two groups that alternate (Sample Factory's double
buffering): while one group's observations wait at the inference server, the other group steps.
:class:`CentralQActor` is the Q-learning :class:`~gorila.core.Actor` built on it, used by
``--inference central`` exactly where a :class:`~gorila.actors.q_actor.QActor` is used otherwise.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from gorila.actors.exploration import ExplorationSchedule, epsilon_greedy
from gorila.actors.nstep import NStepReturns
from gorila.actors.tally import ExperienceTally
from gorila.envs.normalize import Normalization, NormalizedRunner, Normalizer
from gorila.envs.spec import EnvSpec, stored_action
from gorila.inference.channel import SlotLayout
from gorila.inference.client import InferenceClient
from gorila.reply import ServiceEndpoint
from gorila.types import Episode, Transitions


class RolloutWorker:
    """K envs in two alternating groups, acting on the inference server's actions::

        rollout = RolloutWorker(EnvSpec("ALE/Pong-v5", 8), endpoint, seed=s, timeout_s=30)
        t, group = rollout.step()       # one step of one group, tagged with the policy_version used
        rollout.pop_episodes()

    Env ``i`` is seeded ``seed + i`` (as a :class:`~gorila.actors.q_actor.QActor`'s) and keeps index
    ``i`` in the transitions, whichever group it is in. Both groups' first observations are sent at
    once; after that a group's next observations are sent as soon as it has stepped, before its
    transitions are handed back, so the server works while the caller stores them. With an
    ``exploration`` schedule each action is replaced by a random one with probability
    ``exploration.epsilon(index, policy_version)`` (ε-greedy on the server's greedy action).
    With ``normalize`` its envs' observations and rewards are normalised by one
    :class:`~gorila.envs.normalize.Normalizer` (``normalizer``) before they go to the server.
    Without one, ``log_probs`` holds, row by row, the log-probability of each action of the last
    step's transitions under the server's policy (a sampling one's ``log mu(a|x)``).

    With a recurrent policy (``state_shape``, one env's core state) the server keeps each env's
    state; each request says which of the group's observations begin an episode, and after a step
    ``acted`` (the group's env indices), ``acted_starts`` (those flags) and ``core_state`` (the
    states the server carried into that step, before its resets) say what the actions came from.
    """

    def __init__(self, envs: EnvSpec, endpoint: ServiceEndpoint, *, seed: int, timeout_s: float,
                 exploration: ExplorationSchedule | None = None, index: int = 0,
                 normalize: Normalization | None = None, state_shape: tuple[int, ...] = ()):
        k = envs.num_envs
        sizes = (k - k // 2, k // 2) if k > 1 else (1,)
        self.offsets = np.cumsum((0, *sizes[:-1]))
        runners = [dataclasses.replace(envs, num_envs=n).runner(seed + int(offset))
                   for n, offset in zip(sizes, self.offsets)]
        # Normalised here, before they travel: the server acts on what the segments store.
        self.normalizer = None if normalize is None else Normalizer(normalize, runners[0].observation_space)
        self.runners: list[Any] = (runners if self.normalizer is None else
                                   [NormalizedRunner(runner, self.normalizer) for runner in runners])
        space, actions = self.runners[0].observation_space, self.runners[0].action_space
        action_shape, action_dtype = stored_action(actions)
        assert space.shape is not None  # a space without one (Dict, Text) has no slot layout
        self.client = InferenceClient(endpoint, SlotLayout(tuple(space.shape), np.dtype(space.dtype).str, sizes,
                                                           action_shape, np.dtype(action_dtype).str,
                                                           tuple(state_shape)), timeout_s)
        self.recurrent = bool(state_shape)
        self.exploration, self.index = exploration, index
        self.rng = np.random.default_rng(seed)
        self.version = -1
        self.next_group = 0
        self.dropped: list[int] = []  # envs (worker indices) that failed in the last step
        self.log_probs = np.zeros(0, np.float32)  # per row of the last step's transitions
        self.acted = np.zeros(0, np.int64)
        self.acted_starts = np.zeros(0, bool)
        self.core_state = np.zeros((0, *state_shape), np.float32)
        self.requested_starts: list[np.ndarray] = [runner.starts for runner in self.runners]
        for group, runner in enumerate(self.runners):
            self._request(group)

    @property
    def observation_space(self) -> gym.Space:
        return self.runners[0].observation_space

    @property
    def action_space(self) -> gym.Space:
        return self.runners[0].action_space

    @property
    def num_envs(self) -> int:
        return sum(runner.num_envs for runner in self.runners)

    @property
    def epsilon(self) -> float:
        return 0.0 if self.exploration is None else self.exploration.epsilon(self.index, self.version)

    def step(self) -> tuple[Transitions, int]:
        """One step of the next group; its transitions (env indices of the worker) and the group."""
        group = self.next_group
        self.next_group = (group + 1) % len(self.runners)
        actions, log_probs, self.version = self.client.sampled(group)
        runner = self.runners[group]
        if self.recurrent:
            self.acted = np.arange(runner.num_envs) + self.offsets[group]
            self.acted_starts, self.core_state = self.requested_starts[group], self.client.core_state(group)
        if self.exploration is not None:
            actions = epsilon_greedy(actions, self.epsilon, int(runner.action_space.n), self.rng)
        t = runner.step(actions)
        self.dropped = [int(self.offsets[group]) + i for i in runner.dropped]
        self.log_probs = log_probs[t.env_index]  # the runner's rows are indexed within the group
        self._request(group)
        t = dataclasses.replace(t, env_index=t.env_index + self.offsets[group],
                                policy_version=np.full(len(t), self.version, np.int64))
        return t, group

    def _request(self, group: int) -> None:
        """Ask for the actions of ``group``'s observations (a recurrent policy's: and where they begin episodes)."""
        runner = self.runners[group]
        if not self.recurrent:
            self.client.request(group, runner.observations)
            return
        self.requested_starts[group] = runner.starts
        self.client.request(group, runner.observations, runner.starts)

    @property
    def env_failures(self) -> int:
        return sum(runner.env_failures for runner in self.runners)

    def pop_episodes(self) -> list[Episode]:
        return [episode._replace(env_index=episode.env_index + int(offset))
                for runner, offset in zip(self.runners, self.offsets) for episode in runner.pop_episodes()]

    def close(self) -> None:
        self.client.close()
        for runner in self.runners:
            runner.close()


class CentralQActor:
    """The Q-learning :class:`~gorila.core.Actor` of ``--inference central``: a :class:`RolloutWorker`
    with ε-greedy exploration on the server's greedy actions and n-step rows::

        actor = CentralQActorSpec(EnvSpec("CartPole-v1", 8), endpoint, schedule, seed=0).build(index=3)
        rows = actor.act()       # one step of one group: the replay rows it completed, or None

    It holds no parameters (:meth:`load` does nothing: the inference server refreshes its own), and
    computes no initial priorities: its rows enter a prioritized replay with the largest priority
    seen so far, as in prioritized replay's original rule.
    """

    def __init__(self, rollout: RolloutWorker, returns: NStepReturns):
        self.rollout = rollout
        self.nstep = returns.builder()
        self.tally = ExperienceTally()

    @property
    def observation_space(self) -> gym.Space:
        return self.rollout.observation_space

    @property
    def epsilon(self) -> float:
        return self.rollout.epsilon

    @property
    def version(self) -> int:
        return self.rollout.version

    @property
    def env_failures(self) -> int:
        return self.rollout.env_failures

    def load(self, params: np.ndarray, version: int) -> None:
        """Nothing to load: the inference server holds the parameters."""

    def act(self) -> Transitions | None:
        t, _ = self.rollout.step()
        for env in self.rollout.dropped:  # an env that failed: its episode's pending rows go with it
            self.nstep.drop(env)
        self.tally.add(len(t), self.rollout.pop_episodes())
        return self.nstep.add(t)

    def priorities(self, rows: Transitions) -> None:
        """None: with no network to judge them, its rows take the shard's largest priority so far."""
        return None

    def close(self) -> None:
        self.rollout.close()


@dataclass(frozen=True)
class CentralQActorSpec:
    """How to build central actor ``index`` in its own process (small and picklable; the same
    ``build(index)`` and ``envs`` as a :class:`~gorila.actors.q_actor.QActorSpec`)."""

    envs: EnvSpec
    inference: ServiceEndpoint
    exploration: ExplorationSchedule
    returns: NStepReturns = NStepReturns()
    seed: int = 0
    timeout_s: float = 60.0

    def build(self, index: int) -> CentralQActor:
        seed = self.seed + 1000 * index
        return CentralQActor(RolloutWorker(self.envs, self.inference, seed=seed, timeout_s=self.timeout_s,
                                           exploration=self.exploration, index=index), self.returns)
