"""An actor worker that emits fixed-length segments into a trajectory queue (IMPALA's actors)."""

from __future__ import annotations

import collections
import dataclasses
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from gorila.actors.rollout import RolloutWorker
from gorila.actors.tally import ExperienceTally
from gorila.envs.normalize import Normalization, Statistics, actor_runner
from gorila.envs.spec import EnvSpec, stored_action
from gorila.errors import WorkerTimeoutError
from gorila.nets.numpy_conv import NumpyNetwork
from gorila.nets.numpy_sampler import NumpySampler
from gorila.params import ParameterServer
from gorila.params.cache import CachedSource
from gorila.reply import Pending, ServiceEndpoint
from gorila.trajectory import RemoteQueue
from gorila.types import Segment, Transitions

# How long one step waits at the server for the end of a round before it says it is blocked: short,
# so a chunk whose learner has stopped (the run's end) comes back soon, and long enough that a
# round's wait is a few calls, each answered the moment the version exists.
ROUND_WAIT_S = 0.25


class SegmentActor:
    """A worker: each ``step()`` acts ``unroll_length`` steps of its envs with actions sampled from
    its own actor-critic copy, and sends the :class:`~gorila.types.Segment` to its queue::

        factory = functools.partial(SegmentActor, envs=EnvSpec("CartPole-v1", 8), network_fn=network_fn,
                                    queues=[RemoteQueue(e) for e in endpoints], unroll_length=20,
                                    refresh_every=1, gamma=0.99, seed=0)
        worker = factory(worker_id, server); worker.step(); worker.report()

    It pulls the parameters every ``refresh_every`` segments (a large value holds the policy lag
    high) from ``server.source(worker_id)``: its node's cache with ``--param-cache node``. Actor k
    writes to queue ``k % len(queues)``. At most one add is in flight; a full queue answers None,
    the segment is sent again (same number: it is never queued twice) and the step says it is
    blocked (the runtime backs off); refused for longer than the server's timeout, it is a
    :class:`WorkerTimeoutError` naming the queue. Once refused, it asks the queue for room (a small
    call) before it sends the segment again. Env ``i`` of actor ``k`` is seeded
    ``seed + 1000 k + i``, and so is the generator that samples its actions. Given its policy's
    ``numpy_policy`` twin (:func:`gorila.nets.numpy_policy.numpy_policy`, unset), it acts in numpy
    and its process never imports torch; else it builds ``network_fn()`` and acts through torch.

    With an ``inference`` endpoint (``--inference central``) it holds no network: a
    :class:`~gorila.actors.rollout.RolloutWorker` steps its envs in two groups that alternate, the
    inference server samples the actions and returns their log-probabilities, and each step carries
    the ``policy_version`` the server acted with (``refresh_every`` is then the server's business).

    With ``round_versions`` R (synchronous PPO on Ray, where actors are processes of their own),
    the actor acts in rounds: before each segment after its first, it waits until the server's
    version is R past its last segment's (the learner has taken the batch that segment went into
    and pushed its R updates), then pulls (from its node's cache once that has the version), so
    every batch is acted on the learner's own version.

    With a recurrent network (``--core lstm``) each env's core state is carried from step to step
    (its sampler's, or with ``inference`` the server's, whose one env's shape ``state_shape``
    gives), zeroed where an episode begins, and each segment carries the state its envs started
    it with and where their episodes began (``core_state``, ``starts``): what the learner
    unrolls the network from.

    With ``normalize`` (``--normalize-obs``, ``--normalize-reward``) its envs' observations and
    rewards are normalised before the network sees them and the segment stores them
    (:mod:`gorila.envs.normalize`); its report carries what its statistics gathered since the last,
    and :meth:`normalize_with` hands it the run's merged statistics.
    The wait blocks at the shards (:meth:`~gorila.params.ParameterClient.wait_version`) for at
    most ``ROUND_WAIT_S`` a step; a step that ends waiting says it is blocked, and one waiting for
    longer than the server's timeout is a :class:`WorkerTimeoutError` naming the version.

    Its report says where its CPU went, in microseconds of its thread's CPU time per env step
    (``gorila bench pipeline`` sets them beside each part's cost alone; time spent blocked costs
    none): ``act_us`` (its network's forward pass and the draw; without ``inference`` only),
    ``env_us`` (stepping the envs; with ``inference``, also taking a group's actions from the
    server), ``pull_us`` (loading parameters) and ``send_us`` (handing segments to the queue and
    reading its answers).
    """

    def __init__(self, worker_id: int, server: ParameterServer, *, envs: EnvSpec,
                 network_fn: Callable[[], Any] | None, queues: list[RemoteQueue], unroll_length: int,
                 refresh_every: int, gamma: float, seed: int, inference: ServiceEndpoint | None = None,
                 round_versions: int | None = None, normalize: Normalization | None = None,
                 numpy_policy: NumpyNetwork | None = None, state_shape: tuple[int, ...] = ()):
        actor_seed = seed + 1000 * worker_id
        self.timeout_s = server.timeout_s
        self.recurrent, self.state_shape = bool(state_shape), state_shape
        self.acted_starts = np.zeros(0, bool)  # a recurrent policy's: the starts of the step just taken
        self.rollout = (None if inference is None else
                        RolloutWorker(envs, inference, seed=actor_seed, timeout_s=self.timeout_s, index=worker_id,
                                      normalize=normalize, state_shape=state_shape))
        self.runner: Any = None
        self.normalizer = None if self.rollout is None else self.rollout.normalizer
        if self.rollout is None:
            self.runner, self.normalizer = actor_runner(envs, actor_seed, normalize)
        self.flat: Any = None  # FlatParams of the network, where it acts in torch
        self.sampler: Any = None  # what draws its actions (none with an inference server)
        if self.rollout is None:
            self.sampler, self.flat = _sampler(network_fn, numpy_policy, actor_seed, self.runner.num_envs)
        self.source = server.source(worker_id) if self.rollout is None else None
        self.envs: Any = self.runner if self.rollout is None else self.rollout  # both count and close alike
        self.action_shape, self.action_dtype = stored_action(self.envs.action_space)
        self.queue_index = worker_id % len(queues)
        self.queue = queues[self.queue_index]
        self.unroll_length, self.refresh_every, self.gamma = unroll_length, refresh_every, gamma
        self.writer = f"actor{worker_id}-{uuid.uuid4().hex}"  # a restarted actor is a new writer
        self.seq = 0
        self.version = -1
        self.segments_since_refresh = refresh_every  # the first step pulls
        self.unsent: collections.deque[tuple[Segment, int]] = collections.deque()
        self.in_flight: tuple[Pending[int | None], tuple[Segment, int]] | None = None
        self.refused_since: float | None = None
        self.tally = ExperienceTally()
        self.queued = 0
        self.round_versions = round_versions
        self.rounds = None if round_versions is None else server.client(worker_id)  # its version alone
        self.waiting_since: float | None = None
        self.round_target = -1  # the version the last round waited for: its segment is acted on it
        self.spent = dict.fromkeys(("act", "env", "pull", "send"), 0.0)  # seconds, by part

    def step(self) -> bool:
        """Act and send; False while the queue is full (the segment waits to be sent again) or,
        in rounds, while the learner has not yet updated on the last segment."""
        waiting = not self.unsent and not self._round_over()  # the previous add travels meanwhile
        if not self.unsent and not waiting:
            self.unsent.append((self.collect(), self.seq))  # acts while the previous add travels
            self.seq += 1
        began = time.thread_time()
        self._collect_reply()
        # A refused segment is resent while waiting too (the round needs it), once the queue has
        # room: asking costs a small call, sending it whole to be refused again a copy of it.
        if self.unsent and (self.refused_since is None or self._queue_has_room()):
            segment, seq = sent = self.unsent.popleft()
            self.in_flight = (self.queue.add(segment, self.writer, seq), sent)
        self.spent["send"] += time.thread_time() - began
        return self.refused_since is None and not waiting

    def _round_over(self) -> bool:
        """Whether the server's version is ``round_versions`` past the last segment's (always
        without rounds, and before the first segment)."""
        if self.rounds is None or self.round_versions is None or self.version < 0:
            return True
        target = self.version + self.round_versions
        if self.rounds.wait_version(target, ROUND_WAIT_S) >= target:
            self.waiting_since, self.round_target = None, target
            return True
        now = time.monotonic()
        if self.waiting_since is None:
            self.waiting_since = now
        if now - self.waiting_since > self.timeout_s:
            raise WorkerTimeoutError(
                f"actor waited {self.timeout_s:.0f} s for version {target}: its last segment (version "
                f"{self.version}) went into a batch whose {self.round_versions} updates never all came; "
                "the learner stopped pushing")
        return False

    def collect(self) -> Segment:
        """One segment of ``unroll_length`` steps of every env (pulling first when it is due)."""
        if self.sampler is not None and self.source is not None and self.segments_since_refresh >= self.refresh_every:
            # A round's segment is acted on the version the round waited for: a node cache that has
            # not yet got it is passed over for the server.
            source, began = self.source, time.thread_time()
            params = source.pull(self.round_target) if isinstance(source, CachedSource) else source.pull()
            self._load(params)
            self.spent["pull"] += time.thread_time() - began
            self.version = self.source.version
            self.segments_since_refresh = 0
        self.segments_since_refresh += 1
        T, N, space = self.unroll_length, self.envs.num_envs, self.envs.observation_space
        obs = np.zeros((T, N, *space.shape), space.dtype)
        cut_at: list[tuple[int, int, np.ndarray]] = []  # (time, env, the observation a truncated step was cut at)
        actions = np.zeros((T, N, *self.action_shape), self.action_dtype)
        rewards = np.zeros((T, N), np.float32)
        discounts = np.zeros((T, N), np.float32)
        truncated = np.zeros((T, N), bool)
        valid = np.zeros((T, N), bool)
        log_probs = np.zeros((T, N), np.float32)
        versions = np.full((T, N), self.version, np.int64)
        starts = np.zeros((T, N), bool) if self.recurrent else None
        core_state = None
        if self.recurrent:  # with an inference server, its states are read a group at a time
            core_state = self.sampler.state if self.rollout is None else np.zeros((N, *self.state_shape), np.float32)
        for t, step, logp, dropped in self._steps():
            if starts is not None and core_state is not None:
                acted, starts[t, acted] = self._acted()
                if t == 0 and self.rollout is not None:
                    core_state[acted] = self.rollout.core_state
            valid[:, dropped] = False  # an env that failed: its steps in this segment go
            rows = step.env_index
            obs[t, rows] = step.obs
            actions[t, rows] = step.action
            rewards[t, rows] = step.reward
            discounts[t, rows] = self.gamma * (1.0 - step.terminated)
            truncated[t, rows] = step.truncated
            if step.truncated.any():
                cut = np.flatnonzero(step.truncated)
                cut_at += [(t, rows[k], step.next_obs[k].copy()) for k in cut]  # the runner reuses its arrays
            log_probs[t, rows] = logp
            versions[t, rows] = step.policy_version
            valid[t, rows] = True
        versions[~valid] = self.version  # slots with no step: the newest version, never an old one
        runners = [self.runner] if self.rollout is None else self.rollout.runners
        self.tally.add(int(valid.sum()), self.envs.pop_episodes())
        return Segment(obs=obs, actions=actions, rewards=rewards, discounts=discounts, truncated=truncated,
                       final_obs=_in_order(cut_at, obs.shape[2:], obs.dtype), valid=valid, log_probs=log_probs,
                       policy_version=versions,
                       last_obs=np.concatenate([runner.observations for runner in runners]),
                       core_state=core_state, starts=starts)

    def _acted(self) -> tuple[Any, np.ndarray]:
        """``(envs, starts)`` of the step just taken: which envs acted in it (all, or with an
        inference server one group), and whether each one's observation began an episode."""
        if self.rollout is None:
            return slice(None), self.acted_starts
        return self.rollout.acted, self.rollout.acted_starts

    def _steps(self) -> Iterator[tuple[int, Transitions, np.ndarray, list[int]]]:
        """``(t, transitions, log_probs, dropped)``: ``unroll_length`` steps of every env, each row
        tagged with its ``policy_version`` and the log-probability of its action, and the envs that
        failed in that step."""
        if self.rollout is not None:
            filled = [0] * len(self.rollout.runners)
            for _ in range(self.unroll_length * len(filled)):  # the groups alternate
                began = time.thread_time()
                step, group = self.rollout.step()
                self.spent["env"] += time.thread_time() - began
                self.version = self.rollout.version
                yield filled[group], step, self.rollout.log_probs, self.rollout.dropped
                filled[group] += 1
            return
        assert self.runner is not None and self.sampler is not None
        for t in range(self.unroll_length):
            began = time.thread_time()
            # a Box action unclipped, as its log-probability is of it
            if self.recurrent:
                self.acted_starts = self.runner.starts
                chosen, chosen_logp = self.sampler.sample_with_log_prob(self.runner.observations, self.acted_starts)
            else:
                chosen, chosen_logp = self.sampler.sample_with_log_prob(self.runner.observations)
            acted = time.thread_time()
            step = self.runner.step(chosen)
            self.spent["act"] += acted - began
            self.spent["env"] += time.thread_time() - acted
            step = dataclasses.replace(step, policy_version=np.full(len(step), self.version, np.int64))
            yield t, step, chosen_logp[step.env_index], self.runner.dropped

    def _load(self, params: np.ndarray) -> None:
        """The pulled parameters, where the draws read them: the torch network, its numpy twin, or both."""
        if self.flat is not None:
            self.flat.set(params)
        self.sampler.set(params)  # a PolicySampler without a twin ignores it

    def _collect_reply(self) -> None:
        if self.in_flight is None:
            return
        (pending, sent), self.in_flight = self.in_flight, None
        if pending.result(self.timeout_s) is not None:
            self.queued += 1
            self.refused_since = None
            return
        self.unsent.appendleft(sent)  # segments of a writer arrive in order: this one goes first
        if self.refused_since is None:
            self.refused_since = time.monotonic()
        self._check_refused()

    def _queue_has_room(self) -> bool:
        if self.queue.room().result(self.timeout_s) > 0:
            return True
        self._check_refused()
        return False

    def _check_refused(self) -> None:
        if self.refused_since is not None and time.monotonic() - self.refused_since > self.timeout_s:
            raise WorkerTimeoutError(f"trajectory queue {self.queue_index} stayed full for {self.timeout_s:.0f} s: "
                                     "no learner takes its segments")

    def close(self) -> None:
        self.envs.close()

    def normalize_with(self, statistics: Statistics) -> None:
        """Normalise by the run's merged ``statistics`` from now on (the driver's, between chunks)."""
        if self.normalizer is not None:
            self.normalizer.load(statistics)

    def report(self) -> dict[str, Any]:
        frames = max(self.tally.env_steps, 1)
        spent = {f"{part}_us": seconds / frames * 1e6 for part, seconds in self.spent.items()
                 if part != "act" or self.rollout is None}  # with an inference server, acting is its
        return {**self.tally.report(), **spent, "env_failures": self.envs.env_failures, "segments_queued": self.queued,
                "version": self.version, **(self.source.counters() if isinstance(self.source, CachedSource) else {}),
                **(self.normalizer.report() if self.normalizer is not None else {})}


def _sampler(network_fn: Callable[[], Any] | None, numpy_policy: NumpyNetwork | None,
             seed: int, num_envs: int) -> tuple[Any, Any]:
    """``(sampler, flat)``: a :class:`~gorila.nets.numpy_sampler.NumpySampler` on the policy's numpy
    twin and no FlatParams, so the actor's process never imports torch (seconds of its start, and
    torch's per-call cost on a few observations); else the torch network's sampler (a recurrent
    one's carries its ``num_envs`` envs' core state) and its FlatParams."""
    if numpy_policy is not None:
        return NumpySampler(numpy_policy, seed), None
    from gorila.nets.flat import FlatParams  # torch: imported only by an actor whose network runs in it
    from gorila.nets.numpy_policy import PolicySampler
    from gorila.nets.recurrent import RecurrentActorCritic, RecurrentSampler

    if network_fn is None:
        raise ValueError("a segment actor acting on its own needs network_fn or its policy's numpy twin")
    net = network_fn()
    if isinstance(net, RecurrentActorCritic):
        return RecurrentSampler(net, seed, num_envs), FlatParams(net)
    return PolicySampler(net, seed), FlatParams(net)


def _in_order(cut_at: list[tuple[int, int, np.ndarray]], shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The truncated steps' final observations (each of ``shape`` and ``dtype``) in ``np.nonzero(truncated)``
    order: by time, then env (with central inference a time step's envs come in two groups)."""
    cut_at.sort(key=lambda entry: (entry[0], entry[1]))
    return np.array([o for _, _, o in cut_at], dtype).reshape(len(cut_at), *shape)
