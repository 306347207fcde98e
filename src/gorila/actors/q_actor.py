"""The Q-learning actor: ε-greedy steps of its environments with a copy of the parameters."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from gorila.actors.exploration import ExplorationSchedule, epsilon_greedy
from gorila.actors.nstep import NStepReturns
from gorila.actors.tally import ExperienceTally
from gorila.envs.spec import EnvSpec
from gorila.envs.vector import Transitions
from gorila.nets import FlatParams
from gorila.nets.inputs import module_device
from gorila.nets.q import greedy_policy


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
    """

    def __init__(self, envs: EnvSpec, network_fn: Callable[[], nn.Module], exploration: ExplorationSchedule,
                 returns: NStepReturns = NStepReturns(), *, index: int = 0, seed: int = 0):
        self.runner = envs.runner(seed)
        self.nstep = returns.builder()
        self.net = network_fn().eval()
        self.flat = FlatParams(self.net)
        self.policy = greedy_policy(self.net)
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
        self.flat.set(params)
        self.version = version

    def act(self) -> Transitions | None:
        actions = epsilon_greedy(self.policy(self.runner.observations), self.epsilon, self.n_actions, self.rng)
        transitions = self.runner.step(actions)
        for env in self.runner.dropped:  # an env that failed: its episode's pending rows go with it
            self.nstep.drop(env)
        self.tally.add(len(transitions), self.runner.pop_episodes())
        return self.nstep.add(transitions, policy_version=self.version)

    def priorities(self, rows: Transitions) -> np.ndarray:
        """``|R + discount · max_a Q(next_obs, a) − Q(obs, action)|`` of each row, by this actor's
        network (Ape-X's initial priorities: the learner's double-Q with online = target)."""
        device = module_device(self.net)
        with torch.inference_mode():
            q = self.net(torch.as_tensor(rows.obs, device=device))
            q_next = self.net(torch.as_tensor(rows.next_obs, device=device)).max(1).values
            taken = q.gather(1, torch.as_tensor(rows.action, device=device).long().unsqueeze(1)).squeeze(1)
            reward = torch.as_tensor(rows.reward, device=device)
            target = reward + torch.as_tensor(rows.discount, device=device) * q_next
            return (target - taken).abs().cpu().numpy()

    def close(self) -> None:
        self.runner.close()


@dataclass(frozen=True)
class QActorSpec:
    """How to build actor ``index`` of a run inside its own process (small and picklable)::

        spec = QActorSpec(EnvSpec("CartPole-v1", 4), network_fn, schedule, NStepReturns(3, 0.99), seed=0)
        actor = spec.build(index=3)        # envs seeded seed + 1000·index + i
    """

    envs: EnvSpec
    network_fn: Callable[[], nn.Module]
    exploration: ExplorationSchedule
    returns: NStepReturns = NStepReturns()
    seed: int = 0

    def build(self, index: int) -> QActor:
        return QActor(self.envs, self.network_fn, self.exploration, self.returns, index=index,
                      seed=self.seed + 1000 * index)
