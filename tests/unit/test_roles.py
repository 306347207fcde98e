"""The roles of :mod:`gorila.core`, played by the classes that claim them.

Besides running, this file is type-checked strictly (``make test`` runs mypy on it first, see
``[tool.mypy]`` in pyproject.toml): each component is held in a variable of its role's type, so a
class that stops playing its role (a method removed or its signature changed) fails the suite
there. The tests check that calls made through each role reach the component behind it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from gorila.actors import ExplorationSchedule, QActorSpec
from gorila.core import ActorSpec, Learner, ParamSource, ReplayClient
from gorila.envs.spec import EnvSpec
from gorila.learners.q_learner import QLearner
from gorila.learners.target import TargetUpdate
from gorila.nets import FlatParams
from gorila.nets.q import VectorQNetwork
from gorila.params import LocalEndpoint, ParameterServer, ServerSpec, UpdateRule
from gorila.replay import RateLimiter, RemoteReplay, ReplayShard
from gorila.reply import Done, Pending
from gorila.types import Batch, Transitions

TIMEOUT_S = 10.0
ENV = "gorila/Counting-v0"   # observation = step index in a 5-step episode, two actions


class ShardHere:
    """A service endpoint whose object lives in this process: the call is made at once."""

    def __init__(self, service: object):
        self.service = service

    def call(self, method: str, *args: Any) -> Pending[Any]:
        return Done(getattr(self.service, method)(*args))


def network() -> torch.nn.Module:
    torch.manual_seed(0)
    return VectorQNetwork(1, (8,), 2)


def rows(n: int) -> Transitions:
    """``n`` one-step replay rows of one stream: observation i, then i + 1."""
    obs = np.arange(n, dtype=np.float32).reshape(n, 1)
    return Transitions(obs=obs, action=np.zeros(n, np.int64), reward=np.ones(n, np.float32), next_obs=obs + 1,
                       terminated=np.zeros(n, bool), truncated=np.zeros(n, bool), env_index=np.zeros(n, np.int64),
                       policy_version=np.full(n, 2, np.int64), discount=np.full(n, 0.9, np.float32),
                       steps=np.ones(n, np.int64))


def test_a_replay_shard_answers_through_the_replay_client_role() -> None:
    shard = ReplayShard(0, 100, (1,), np.float32, limiter=RateLimiter.min_size(4))
    replay: ReplayClient = RemoteReplay(ShardHere(shard))

    assert replay.ready(0, 0, 4).result(TIMEOUT_S) is False          # empty: learner 0 may not start
    assert replay.add(rows(4), "actor-0", 0).result(TIMEOUT_S) == 4
    assert replay.add(rows(4), "actor-0", 0).result(TIMEOUT_S) == 0  # the same batch again: dropped
    assert replay.size().result(TIMEOUT_S) == 4
    assert replay.ready(0, 1, 4).result(TIMEOUT_S) is True
    batch = replay.sample(3).result(TIMEOUT_S)
    assert isinstance(batch, Batch) and set(batch.obs[:, 0]) <= {0.0, 1.0, 2.0, 3.0}
    np.testing.assert_array_equal(batch.next_obs, batch.obs + 1)
    replay.update_priorities(batch.indices, np.ones(3)).result(TIMEOUT_S)
    stats = replay.stats().result(TIMEOUT_S)
    assert (stats["added"], stats["duplicates"], stats["sampled"]) == (4, 1, 3)


def test_a_parameter_client_is_a_param_source_that_sees_new_versions() -> None:
    spec = ServerSpec(rule=UpdateRule.asynchronous(), num_shards=2, lr=0.5)
    initial = np.arange(6, dtype=np.float32)
    endpoints = tuple(LocalEndpoint(shard) for shard in spec.build(initial))
    server = ParameterServer(endpoints, spec.layout(initial.size), spec.rule)
    source: ParamSource = server.source(worker_id=0)

    np.testing.assert_array_equal(source.pull(), initial)
    assert source.version == 0
    learner = server.client(worker_id=1)
    learner.params()                                                  # the version its gradient is on
    learner.push(np.ones(6, np.float32))
    np.testing.assert_array_equal(source.params(), initial)          # the copy it holds, until it pulls
    np.testing.assert_allclose(source.pull(), initial - 0.5)
    assert source.version == 1


def test_a_q_actor_and_a_q_learner_play_their_roles() -> None:
    spec: ActorSpec = QActorSpec(EnvSpec(ENV, num_envs=2), network, ExplorationSchedule.per_actor(1), seed=0)
    actor = spec.build(index=0)
    params = FlatParams(network()).get()
    actor.load(params, version=3)
    experience = actor.act()
    assert experience is not None and len(experience) == 2               # one-step rows of both envs
    np.testing.assert_array_equal(experience.policy_version, [3, 3])
    assert actor.version == 3 and actor.tally.env_steps == 2 and actor.env_failures == 0
    priorities = actor.priorities(experience)
    assert priorities is not None and priorities.shape == (2,) and np.all(priorities >= 0)
    actor.close()

    learner: Learner = QLearner(network, loss="mse", target="double", target_update=TargetUpdate.hard(3),
                                outlier_k=None, max_grad_norm=None)
    shard = ReplayShard(0, 100, (1,), np.float32, limiter=RateLimiter.min_size(1))
    shard.add(experience, "actor-0", 0)
    batch = shard.sample(4)
    grad, info = learner.gradient(params, 3, batch)
    assert grad is not None and grad.shape == params.shape and np.all(np.isfinite(grad))
    assert info["loss"] > 0 and learner.skipped_outliers == 0

