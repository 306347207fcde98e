"""An actor worker that emits fixed-length segments into a trajectory queue (IMPALA's actors)."""

from __future__ import annotations

import collections
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from gorila.actors.tally import ExperienceTally
from gorila.reply import Pending
from gorila.envs.spec import EnvSpec
from gorila.errors import WorkerTimeoutError
from gorila.nets.flat import FlatParams
from gorila.params import ParameterServer
from gorila.trajectory import RemoteQueue, Segment


class SegmentActor:
    """A worker: each ``step()`` acts ``unroll_length`` steps of its envs with actions sampled from
    its own actor-critic copy, and sends the :class:`~gorila.trajectory.Segment` to its queue::

        factory = functools.partial(SegmentActor, envs=EnvSpec("CartPole-v1", 8), network_fn=network_fn,
                                    queues=[RemoteQueue(e) for e in endpoints], unroll_length=20,
                                    refresh_every=1, gamma=0.99, seed=0)
        worker = factory(worker_id, server); worker.step(); worker.report()

    It pulls the parameters every ``refresh_every`` segments (a large value holds the policy lag
    high). Actor k writes to queue ``k % len(queues)``. At most one add is in flight; a full queue
    answers None, the segment is sent again (same number: it is never queued twice) and the step
    says it is blocked (the runtime backs off); refused for longer than the server's timeout, it is a
    :class:`WorkerTimeoutError` naming the queue. Env ``i`` of actor ``k`` is seeded
    ``seed + 1000 k + i``, and so is the generator that samples its actions.
    """

    def __init__(self, worker_id: int, server: ParameterServer, *, envs: EnvSpec,
                 network_fn: Callable[[], nn.Module], queues: list[RemoteQueue], unroll_length: int,
                 refresh_every: int, gamma: float, seed: int):
        actor_seed = seed + 1000 * worker_id
        self.runner = envs.runner(actor_seed)
        self.net = network_fn()
        self.flat = FlatParams(self.net)
        self.source = server.source(worker_id)
        self.timeout_s = server.timeout_s
        self.queue_index = worker_id % len(queues)
        self.queue = queues[self.queue_index]
        self.unroll_length, self.refresh_every, self.gamma = unroll_length, refresh_every, gamma
        self.generator = torch.Generator().manual_seed(actor_seed)
        self.writer = f"actor{worker_id}-{uuid.uuid4().hex}"  # a restarted actor is a new writer
        self.seq = 0
        self.version = -1
        self.segments_since_refresh = refresh_every  # the first step pulls
        self.unsent: collections.deque[tuple[Segment, int]] = collections.deque()
        self.in_flight: tuple[Pending[int | None], tuple[Segment, int]] | None = None
        self.refused_since: float | None = None
        self.tally = ExperienceTally()
        self.queued = 0

    def step(self) -> bool:
        """Act and send; False while the queue is full (the segment waits to be sent again)."""
        if not self.unsent:
            self.unsent.append((self.collect(), self.seq))  # acts while the previous add travels
            self.seq += 1
        self._collect_reply()
        if self.unsent:
            segment, seq = sent = self.unsent.popleft()
            self.in_flight = (self.queue.add(segment, self.writer, seq), sent)
        return self.refused_since is None

    def collect(self) -> Segment:
        """One segment of ``unroll_length`` steps of every env (pulling first when it is due)."""
        if self.segments_since_refresh >= self.refresh_every:
            self.flat.set(self.source.pull())
            self.version = self.source.version
            self.segments_since_refresh = 0
        self.segments_since_refresh += 1
        T, N, space = self.unroll_length, self.runner.num_envs, self.runner.observation_space
        obs = np.zeros((T, N, *space.shape), space.dtype)
        final_obs = np.zeros((T, N, *space.shape), space.dtype)
        actions = np.zeros((T, N), np.int64)
        rewards = np.zeros((T, N), np.float32)
        discounts = np.zeros((T, N), np.float32)
        truncated = np.zeros((T, N), bool)
        valid = np.zeros((T, N), bool)
        log_probs = np.zeros((T, N), np.float32)
        for t in range(T):
            current = self.runner.observations
            with torch.no_grad():
                logits, _ = self.net(torch.as_tensor(current, dtype=torch.float32))
                logp = torch.log_softmax(logits, -1)
                chosen = torch.multinomial(logp.exp(), 1, generator=self.generator).squeeze(-1)
                chosen_logp = logp.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
            step = self.runner.step(chosen.numpy())
            valid[:, self.runner.dropped] = False  # an env that failed: its steps in this segment go
            rows = step.env_index
            obs[t, rows] = step.obs
            actions[t, rows] = step.action
            rewards[t, rows] = step.reward
            discounts[t, rows] = self.gamma * (1.0 - step.terminated)
            truncated[t, rows] = step.truncated
            final_obs[t, rows] = step.next_obs
            log_probs[t, rows] = chosen_logp.numpy()[rows]
            valid[t, rows] = True
        self.tally.add(int(valid.sum()), self.runner.pop_episodes())
        return Segment(obs=obs, actions=actions, rewards=rewards, discounts=discounts, truncated=truncated,
                       final_obs=final_obs, valid=valid, log_probs=log_probs,
                       policy_version=np.full((T, N), self.version, np.int64), last_obs=self.runner.observations.copy())

    def _collect_reply(self) -> None:
        if self.in_flight is None:
            return
        (pending, sent), self.in_flight = self.in_flight, None
        if pending.result(self.timeout_s) is not None:
            self.queued += 1
            self.refused_since = None
            return
        self.unsent.appendleft(sent)  # segments of a writer arrive in order: this one goes first
        now = time.monotonic()
        if self.refused_since is None:
            self.refused_since = now
        if now - self.refused_since > self.timeout_s:
            raise WorkerTimeoutError(f"trajectory queue {self.queue_index} stayed full for {self.timeout_s:.0f} s: "
                                     "no learner takes its segments")

    def close(self) -> None:
        self.runner.close()

    def report(self) -> dict[str, Any]:
        return {**self.tally.report(), "env_failures": self.runner.env_failures, "segments_queued": self.queued,
                "version": self.version}
