"""One A3C worker: pull the parameters, run a short rollout of its own environments, push the gradient."""

from __future__ import annotations

import copy
import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from torch import nn

from gorila.actors.rollout import RolloutWorker
from gorila.actors.tally import ExperienceTally
from gorila.agents.a3c.loss import A3CLoss, Rollout
from gorila.envs.normalize import Normalization, Statistics, actor_runner
from gorila.envs.spec import EnvSpec
from gorila.learners.replay_learner import lag_bins
from gorila.learners.straggler import Straggler
from gorila.nets.flat import FlatParams, soft_update
from gorila.nets.heads import ActionHead
from gorila.nets.numpy_policy import PolicySampler
from gorila.params import OUTCOMES, ParameterServer
from gorila.reply import ServiceEndpoint
from gorila.types import Transitions


class A3CWorker:
    """Section 12.3.2's worker, an actor and a learner in one; under the synchronous rule the
    server's mean makes it A2C::

        factory = functools.partial(A3CWorker, envs=EnvSpec("CartPole-v1", 8), network_fn=network_fn,
                                    loss=A3CLoss(gamma=0.99), rollout_steps=8, target_tau=1.0, seed=0)
        worker = factory(worker_id, server)   # builds its envs and networks in its own process
        worker.step()                         # one rollout, one gradient pushed
        worker.report()["recent_returns"]

    ``step`` is :meth:`refresh` (load the pulled parameters; soft-update the target value
    network by ``target_tau`` when their version changed), :meth:`collect` (``rollout_steps``
    steps of every environment, actions sampled from pi) and one push of the gradient of that
    rollout. Environment ``i`` of worker ``k`` is seeded ``seed + 1000 k + i``; actions come from a
    generator seeded the same way, so a worker's rollouts depend only on its seed and the
    parameters it pulls (:class:`~gorila.nets.numpy_policy.PolicySampler`: an MLP policy acts in
    numpy). Given ``inference`` (the endpoint of an inference server, with
    ``--inference central``), a :class:`~gorila.actors.rollout.RolloutWorker` steps the envs in two
    alternating groups and the server samples the actions with the parameters it last pulled; the
    gradient is still computed here, on the parameters this worker pulled. ``straggler > 1`` makes
    worker 0's steps take that many times as long (see :mod:`gorila.learners.straggler`).
    With ``normalize`` its observations and rewards are normalised as a
    :class:`~gorila.actors.segment_actor.SegmentActor`'s are (its report carries its statistics'
    growth; :meth:`normalize_with` hands it the run's).
    """

    def __init__(self, worker_id: int, server: ParameterServer, *, envs: EnvSpec,
                 network_fn: Callable[[], nn.Module], loss: A3CLoss, rollout_steps: int, target_tau: float,
                 seed: int, inference: ServiceEndpoint | None = None, timeout_s: float = 60.0,
                 straggler: float = 1.0, normalize: Normalization | None = None):
        self.loss, self.rollout_steps, self.target_tau = loss, rollout_steps, target_tau
        worker_seed = seed + 1000 * worker_id
        # Central inference: the run's inference server samples the actions, the envs step in two groups.
        self.rollout = (RolloutWorker(envs, inference, seed=worker_seed, timeout_s=timeout_s, normalize=normalize)
                        if inference is not None else None)
        self.runner: Any = None
        self.normalizer = None if self.rollout is None else self.rollout.normalizer
        if inference is None:
            self.runner, self.normalizer = actor_runner(envs, worker_seed, normalize)
        self.net = network_fn()
        self.target_net = copy.deepcopy(self.net)
        self.flat, self.target_flat = FlatParams(self.net), FlatParams(self.target_net)
        self.client = server.client(worker_id, cached=True)  # through the node's cache, where there is one
        self.sampler = PolicySampler(self.net, worker_seed)
        self.slow = Straggler.for_worker(worker_id, straggler)
        self._target: np.ndarray | None = None
        self._target_version = -1
        self.tally = ExperienceTally()
        self.updates_pushed = 0
        self.last_info: dict[str, float] = {}
        self.policy_lag: Counter = Counter()  # env steps by lag_bins of (gradient's version - policy_version)
        self.lag_sum = 0

    def refresh(self) -> None:
        """Load the client's parameters into the online network; move the target value network
        towards them (``w- <- tau w + (1 - tau) w-``) once per new version."""
        params = self.client.params()
        self.flat.set(params)
        self.sampler.set(params)
        version = self.client.version
        if version != self._target_version:
            # The first pull starts the target at the server's parameters, not at random weights.
            self._target = (params.copy() if self._target is None
                            else soft_update(self._target, params, self.target_tau))
            self.target_flat.set(self._target)
            self._target_version = version

    def collect(self) -> Rollout:
        """``rollout_steps`` steps of every environment with actions sampled from pi: by this
        worker's network, or (central inference) by the inference server, group after group.
        With ``rollout_steps=0`` the rollout goes on until every environment's episode has ended
        (the textbook's A3C: "repeat b steps or until the episode ends"); an environment whose episode ended
        first keeps stepping into its next one, which the rollout's end cuts and bootstraps from.

        A slot where an environment spent the step resetting (no row from the runner) is marked
        invalid; so is nothing else. ``final_obs`` holds the observation a truncated episode was
        cut at. Every real step counts in ``policy_lag``: the version the gradient is computed on
        minus the ``policy_version`` that chose its action (0 when this worker acts itself).
        """
        space = self.runner.observation_space if self.rollout is None else self.rollout.observation_space
        N = self.runner.num_envs if self.rollout is None else self.rollout.num_envs
        assert space.shape is not None  # a space without one (Dict, Text) has no rollout arrays
        head: ActionHead = getattr(self.net, "head")  # an actor-critic's; nn.Module does not declare it
        slots = _Slots(self.rollout_steps or _FIRST_CAPACITY, N, space.shape, space.dtype, head)
        ended = np.zeros(N, bool)  # envs whose episode ended in this rollout (--unroll-length 0 waits for all)
        steps = 0
        for t, step, dropped in self._steps(ended):
            slots.valid[:, dropped] = False  # an env that failed: its steps in this rollout go
            slots.fill(t, step)
            ended[step.env_index] |= step.terminated | step.truncated
            steps += len(step)
            assert step.policy_version is not None  # _steps tags every step
            lag = np.maximum(self._target_version - step.policy_version, 0)
            self.lag_sum += int(lag.sum())
            self.policy_lag.update(lag_bins(lag).tolist())
        episodes = self.runner.pop_episodes() if self.rollout is None else self.rollout.pop_episodes()
        self.tally.add(steps, episodes)
        runners = [self.runner] if self.rollout is None else self.rollout.runners
        last_obs = np.concatenate([runner.observations for runner in runners])
        return slots.rollout(last_obs)

    def _steps(self, ended: np.ndarray) -> Iterator[tuple[int, Transitions, list[int]]]:
        """``(t, transitions, dropped)``: ``rollout_steps`` steps of every env (with ``0``: steps until
        every env's episode has ended, as ``ended`` says), each tagged with its ``policy_version``, and
        the envs that failed in that step (their episode so far is dropped)."""
        def more(t: int) -> bool:
            return t < self.rollout_steps if self.rollout_steps else not ended.all()

        if self.rollout is not None:
            filled = [0] * len(self.rollout.runners)
            while more(min(filled)):  # the groups alternate: rounds of one step each, so all fill row t
                for _ in filled:
                    step, group = self.rollout.step()
                    offset = int(self.rollout.offsets[group])
                    yield filled[group], step, [offset + i for i in self.rollout.runners[group].dropped]
                    filled[group] += 1
            return
        t = 0
        while more(t):
            step = self.runner.step(self.sampler.sample(self.runner.observations))
            yield (t, dataclasses.replace(step, policy_version=np.full(len(step), self._target_version, np.int64)),
                   self.runner.dropped)
            t += 1

    def step(self) -> None:
        started = time.perf_counter()
        self.refresh()
        rollout = self.collect()
        grad, self.last_info = self.loss.gradients(self.net, self.target_net, rollout, self.flat)
        self.slow.stretch(started)
        # Under asynchronous rules the reply travels while the next rollout runs; a barrier, and the
        # semi-async client, wait for it.
        self.client.push(grad, wait=self.client.blocks)
        self.updates_pushed += 1

    def close(self) -> None:
        (self.runner if self.rollout is None else self.rollout).close()
        self.client.close()

    def normalize_with(self, statistics: Statistics) -> None:
        """Normalise by the run's merged ``statistics`` from now on (the driver's, between chunks)."""
        if self.normalizer is not None:
            self.normalizer.load(statistics)

    def report(self) -> dict[str, Any]:
        """Cumulative counters; push outcomes count once per push (averaged over shards, as
        :func:`gorila.params.merge_stats` does); ``loss``, ``entropy`` and ``version`` (of the
        parameters it was computed on) of the latest push."""
        shards = self.client.layout.num_shards
        return {
            **self.tally.report(),
            "env_failures": self.runner.env_failures if self.rollout is None else self.rollout.env_failures,
            "updates_pushed": self.updates_pushed,
            **{f"pushes_{k}": self.client.outcomes[k] // shards for k in OUTCOMES},
            "loss": self.last_info.get("loss"),
            "entropy": self.last_info.get("entropy"),
            "version": self._target_version,
            "policy_lag": dict(self.policy_lag),
            "policy_lag_mean": self.lag_sum / max(sum(self.policy_lag.values()), 1),
            **(self.client.reader.counters() if self.client.reader is not None else {}), **self.client.counters(),
            **(self.normalizer.report() if self.normalizer is not None else {}),
        }


_FIRST_CAPACITY = 64  # steps first allotted to a rollout that runs to the episodes' ends; doubled as needed


class _Slots:
    """A rollout's arrays, ``(T, N, ...)``, with room for more steps when ``T`` is not known ahead
    (``--unroll-length 0``); observations keep the space's dtype (frames stay bytes)."""

    def __init__(self, capacity: int, num_envs: int, shape: tuple[int, ...], dtype: Any, head: ActionHead):
        T, N = capacity, num_envs
        self.obs = np.zeros((T, N, *shape), dtype)
        self.final_obs = np.zeros((T, N, *shape), dtype)
        self.actions: np.ndarray = np.zeros((T, N, *head.action_shape), head.action_dtype)  # Box actions unclipped
        self.rewards = np.zeros((T, N), np.float32)
        self.terminated = np.zeros((T, N), bool)
        self.truncated = np.zeros((T, N), bool)
        self.valid = np.zeros((T, N), bool)
        self.length = 0

    _NAMES = ("obs", "final_obs", "actions", "rewards", "terminated", "truncated", "valid")

    def fill(self, t: int, step: Transitions) -> None:
        if t >= len(self.valid):
            for name in self._NAMES:
                array = getattr(self, name)
                setattr(self, name, np.concatenate([array, np.zeros_like(array)]))
        rows = step.env_index
        self.obs[t, rows] = step.obs
        self.actions[t, rows] = step.action
        self.rewards[t, rows] = step.reward
        self.terminated[t, rows] = step.terminated
        self.truncated[t, rows] = step.truncated
        self.final_obs[t, rows] = step.next_obs
        self.valid[t, rows] = True
        self.length = max(self.length, t + 1)

    def rollout(self, last_obs: np.ndarray) -> Rollout:
        T = self.length
        return Rollout(obs=self.obs[:T], actions=self.actions[:T], rewards=self.rewards[:T],
                       dones=self.terminated[:T] | self.truncated[:T], last_obs=last_obs,
                       truncated=self.truncated[:T], final_obs=self.final_obs[:T], valid=self.valid[:T])
