"""Gorila DQN with a global replay: actors write to replay shards, learners sample every shard.

Actors and learners talk to the parameter server, and learners to replay, never to each other::

    actor k ──add_batch──► replay shard k % S ◄──sample (prefetched)── learner j
       ▲ pull                                                             │ push
       └─────────────────────── parameter server ◄────────────────────────┘

:func:`global_replay_plan` describes this to the RL driver (``gorila train --algo dqn --replay global``).
"""

from __future__ import annotations

import functools
import math
import uuid
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
import psutil
import torch
from torch import nn

from gorila.algos.dqn.agent import QActor, QLearner, greedy_policy
from gorila.algos.dqn.config import DQNConfig
from gorila.config import RunConfig
from gorila.envs.vector import make_env_runner
from gorila.params import ParameterClient, Pending, ServerSpec, ShardEndpoint, ShardLayout
from gorila.replay import Batch, check_replay_memory
from gorila.replay.service import ReplayShard
from gorila.rl.driver import RLPlan, WorkerSpec
from gorila.runtime.base import ServiceEndpoint

# Driver calls per chunk: actor and learner steps each take a few milliseconds, so a chunk
# lasts a few tenths of a second and the driver's bookkeeping stays out of the way.
STEPS_PER_CALL = 50


def replay_route(actor: int, num_shards: int) -> tuple[int, int]:
    """``(shard, slot)``: actor ``actor`` writes to ``shard``, as that shard's ``slot``-th actor.

    Replay is sharded by actor group (as in Menger): actors ``s, s + S, s + 2S, ...`` share shard ``s``.
    """
    return actor % num_shards, actor // num_shards


def make_replay_shard(shard_id: int, endpoints: list[ShardEndpoint], *, num_shards: int, actors: int,
                      envs_per_actor: int, capacity: int, obs_shape: tuple[int, ...], obs_dtype,
                      seed: int) -> ReplayShard:
    """Replay shard ``shard_id`` with one stream per environment of each actor routed to it."""
    routed = sum(replay_route(k, num_shards)[0] == shard_id for k in range(actors))
    return ReplayShard(shard_id, capacity, obs_shape, obs_dtype, num_streams=routed * envs_per_actor, seed=seed)


class DQNActorWorker:
    """An Actor that feeds its replay shard: each ``step()`` refreshes the parameters, takes
    ``actor_refresh`` steps of every env and sends them in one ``add_batch`` call::

        actor = DQNActorWorker(k, param_endpoints, replay=replay_endpoints, env_id="CartPole-v1",
                               cfg=DQNConfig(replay="global"), seed=0, network_fn=..., timeout_s=60)
        actor.step(); actor.report()

    At most one call is in flight: its reply is collected before the next one is sent, so a
    slow replay shard slows its actors down instead of queueing their transitions.
    """

    def __init__(self, worker_id: int, endpoints: list[ShardEndpoint], *, replay: list[ServiceEndpoint],
                 env_id: str, cfg: DQNConfig, seed: int, network_fn: Callable[[], nn.Module], timeout_s: float):
        torch.set_num_threads(1)
        self.worker_id, self.cfg, self.timeout_s = worker_id, cfg, timeout_s
        self.actor = QActor(env_id, cfg, seed + 1000 * worker_id, network_fn)
        self.client = ParameterClient(endpoints, ShardLayout(self.actor.flat.size, len(endpoints)),
                                      worker_id=worker_id, timeout_s=timeout_s)
        shard, slot = replay_route(worker_id, len(replay))
        self.replay = replay[shard]
        self.first_stream = slot * cfg.envs_per_actor
        # A restarted actor is a new writer: its batches must not be taken for redeliveries.
        self.writer = f"actor{worker_id}-{uuid.uuid4().hex}"
        self.seq = 0
        self.in_flight: Pending[int] | None = None
        self.stored = 0

    def step(self) -> None:
        self.actor.load(self.client.pull())
        epsilon = self.cfg.epsilon(self.worker_id, max(self.client.version, 0))
        parts = [self.actor.act(epsilon) for _ in range(self.cfg.actor_refresh)]
        rows = [np.concatenate([getattr(t, name) for t in parts])
                for name in ("obs", "action", "reward", "next_obs", "terminated", "env_index")]
        rows[-1] = rows[-1] + self.first_stream
        self._collect()
        self.in_flight = self.replay.call("add_batch", *rows, self.writer, self.seq)
        self.seq += 1

    def _collect(self) -> None:
        if self.in_flight is not None:
            pending, self.in_flight = self.in_flight, None
            self.stored += pending.result(self.timeout_s)

    def report(self) -> dict[str, Any]:
        return {"env_steps": self.actor.env_steps, "episodes": self.actor.episodes,
                "recent_returns": list(self.actor.recent_returns), "transitions_stored": self.stored,
                "version": self.client.version,
                "epsilon": self.cfg.epsilon(self.worker_id, max(self.client.version, 0))}


class DQNLearnerWorker:
    """A Learner fed by the replay shards: each ``step()`` is one double-Q gradient pushed to the
    parameter server::

        learner = DQNLearnerWorker(j, param_endpoints, replay=replay_endpoints, cfg=DQNConfig(replay="global"),
                                   network_fn=..., barrier=False, timeout_s=60)
        learner.step(); learner.report()

    The next minibatch is requested (from the shards in turn) before the gradient of the current
    one is computed, so sampling overlaps computing. Until every shard holds its share of
    ``learning_starts`` a step only asks the shards whether to start; they give every learner the
    same answer for the same step, so learners under a synchronous rule start in the same round.
    """

    def __init__(self, worker_id: int, endpoints: list[ShardEndpoint], *, replay: list[ServiceEndpoint],
                 cfg: DQNConfig, network_fn: Callable[[], nn.Module], barrier: bool, timeout_s: float,
                 device: str = "cpu"):
        torch.set_num_threads(1)
        self.cfg, self.replay, self.timeout_s = cfg, replay, timeout_s
        self.learner = QLearner(network_fn, cfg, device)
        self.client = ParameterClient(endpoints, ShardLayout(self.learner.flat.size, len(endpoints)),
                                      worker_id=worker_id, barrier=barrier, timeout_s=timeout_s)
        self.min_shard_size = math.ceil(max(cfg.learning_starts, cfg.batch_size) / len(replay))
        self.next_shard = worker_id % len(replay)  # learners start on different shards
        self.prefetched: Pending[Batch] | None = None
        self.steps = 0
        self.pushes = 0
        self.last_info: dict[str, float] = {}

    def step(self) -> None:
        step, self.steps = self.steps, self.steps + 1
        if self.prefetched is None:
            if not self._replay_ready(step):
                return
            self.prefetched = self._request()
        # A reply from another process may hold read-only arrays, which torch refuses to wrap.
        batch = Batch(*(np.require(x, requirements="W") for x in self.prefetched.result(self.timeout_s)))
        self.prefetched = self._request()
        grad, self.last_info = self.learner.gradient(self.client.params(), self.client.version, batch)
        if grad is not None:
            # Under asynchronous rules the reply travels while the next minibatch is computed on.
            self.client.push(grad, wait=self.client.barrier)
            self.pushes += 1

    def _replay_ready(self, step: int) -> bool:
        pending = [shard.call("ready", step, self.min_shard_size) for shard in self.replay]
        return all([p.result(self.timeout_s) for p in pending])

    def _request(self) -> Pending[Batch]:
        shard = self.replay[self.next_shard]
        self.next_shard = (self.next_shard + 1) % len(self.replay)
        return shard.call("sample", self.cfg.batch_size)

    def report(self) -> dict[str, Any]:
        return {"updates_pushed": self.pushes, "pushes_rejected_outlier": self.learner.skipped_outliers,
                "loss": self.last_info.get("loss"), "version": self.client.version,
                "learning": self.prefetched is not None}


def global_replay_plan(run: RunConfig, cfg: DQNConfig, spec: ServerSpec, network_fn: Callable[[], nn.Module],
                       device: str, timeout_s: float) -> RLPlan:
    """Actors, replay shards and learners of one Gorila DQN run with ``--replay global``::

        plan = global_replay_plan(run, DQNConfig(replay="global", replay_shards=2), spec, network_fn, "cpu", 60)
        run_rl(run, train, plan)

    The replay's size is checked first against this machine's free memory, shared by the shards
    (an embedded Ray places them all here); each shard checks its own machine again when built.
    """
    runner = make_env_runner(run.env, 1, seed=run.seed, training=True,
                             terminal_on_life_loss=cfg.terminal_on_life_loss, backend=cfg.env_backend)
    space = runner.observation_space
    runner.close()
    check_replay_memory(cfg.replay_capacity, space.shape, space.dtype,
                        available_bytes=psutil.virtual_memory().available // cfg.replay_shards)
    replay = WorkerSpec("replay", functools.partial(
        make_replay_shard, num_shards=cfg.replay_shards, actors=cfg.actors, envs_per_actor=cfg.envs_per_actor,
        capacity=cfg.replay_capacity, obs_shape=tuple(space.shape), obs_dtype=space.dtype, seed=run.seed),
        cfg.replay_shards)

    def workers(services: dict[str, list]) -> list[WorkerSpec]:
        endpoints = services["replay"]
        actor = functools.partial(DQNActorWorker, replay=endpoints, env_id=run.env, cfg=cfg, seed=run.seed,
                                  network_fn=network_fn, timeout_s=timeout_s)
        learner = functools.partial(DQNLearnerWorker, replay=endpoints, cfg=cfg, network_fn=network_fn,
                                    barrier=spec.rule.barrier, timeout_s=timeout_s, device=device)
        return [WorkerSpec("actor", actor, cfg.actors), WorkerSpec("learner", learner, cfg.num_learners)]

    return RLPlan(algo="dqn", env_id=run.env, network_fn=network_fn, policy_fn=greedy_policy, spec=spec,
                  workers=workers, processes=cfg.actors + cfg.num_learners + cfg.replay_shards,
                  services=(replay,), steps_per_call=STEPS_PER_CALL, config=asdict(cfg))
