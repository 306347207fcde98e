"""Segments, the trajectory queue, and the actor that feeds it, in one process (CountingEnv)."""

import functools
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch

from gorila.actors.segment_actor import SegmentActor
from gorila.envs.spec import EnvSpec
from gorila.errors import WorkerTimeoutError
from gorila.nets.actor_critic_env import make_network
from gorila.nets.flat import FlatParams
from gorila.nets.numpy_policy import numpy_policy
from gorila.params import LocalEndpoint, ParameterServer, ServerSpec, UpdateRule
from gorila.runtime.local import LocalService
from gorila.trajectory import RemoteQueue, TrajectoryQueue
from gorila.types import Segment

COUNTING = "gorila/Counting-v0"  # 5-step episodes whose observation is the step index


def segment(version: int, T: int = 3, N: int = 2, fill: float = 0.0) -> Segment:
    return Segment(obs=np.full((T, N, 1), fill, np.float32), actions=np.zeros((T, N), np.int64),
                   rewards=np.ones((T, N), np.float32), discounts=np.full((T, N), 0.9, np.float32),
                   truncated=np.zeros((T, N), bool), final_obs=np.zeros((0, 1), np.float32),
                   valid=np.ones((T, N), bool), log_probs=np.zeros((T, N), np.float32),
                   policy_version=np.full((T, N), version, np.int64), last_obs=np.zeros((N, 1), np.float32))


def took(segments: list[Segment] | None) -> list[Segment]:
    """What a take handed out (None: it had none to give)."""
    assert segments is not None
    return segments


def test_the_queue_is_fifo_and_a_full_queue_refuses_adds():
    queue = TrajectoryQueue(0, capacity=2)
    assert queue.take(1) is None  # empty
    assert queue.add(segment(0, fill=1), "a", 0) == 1
    assert queue.add(segment(0, fill=2), "a", 1) == 1
    assert queue.add(segment(0, fill=3), "a", 2) is None  # full: held back
    taken = took(queue.take(5))
    assert [s.obs[0, 0, 0] for s in taken] == [1, 2]
    assert queue.add(segment(0, fill=3), "a", 2) == 1  # sent again once there is room
    assert queue.stats()["refused"] == 1 and queue.stats()["added"] == 3


def test_a_redelivered_segment_is_queued_once():
    queue = TrajectoryQueue(0, capacity=4)
    queue.add(segment(0), "a", 0)
    assert queue.add(segment(0), "a", 0) == 1
    queue.add(segment(0), "b", 0)  # another writer's number 0 is its own
    assert queue.size() == 2 and queue.stats()["duplicates"] == 1


def test_segments_beyond_the_max_policy_lag_are_dropped_and_counted():
    queue = TrajectoryQueue(0, capacity=8, max_policy_lag=3)
    for seq, version in enumerate([1, 5, 7, 2]):
        queue.add(segment(version), "a", seq)
    taken = took(queue.take(4, learner_version=8))  # lags 7, 3, 1, 6: the first and last go
    assert [s.oldest_version for s in taken] == [5, 7]
    assert queue.stats()["dropped_stale"] == 2
    queue.add(segment(0), "a", 4)
    assert queue.take(1, learner_version=8) is None  # only a stale one left: none to give


def test_segments_of_several_actors_are_batched_side_by_side():
    batch = Segment.concatenate([segment(1, N=2), segment(2, N=3)])
    assert batch.obs.shape == (3, 5, 1) and batch.last_obs.shape == (5, 1)
    assert batch.policy_version[0].tolist() == [1, 1, 2, 2, 2]
    with pytest.raises(ValueError, match="lengths"):
        Segment.concatenate([segment(1, T=3), segment(1, T=4)])


def _server(timeout_s=30.0):
    network_fn = functools.partial(make_network, COUNTING, (8,), False, 0)
    params = FlatParams(network_fn()).get()
    spec = ServerSpec(rule=UpdateRule.asynchronous(), optimizer="sgd", lr=0.1)
    shards = spec.build(params)
    return network_fn, shards, ParameterServer(tuple(LocalEndpoint(s) for s in shards), spec.layout(params.size),
                                               spec.rule, timeout_s=timeout_s)


def _actor(server, network_fn, queue, unroll=7, refresh_every=1, env=COUNTING, twin=False):
    return SegmentActor(0, server, envs=EnvSpec(env, 2), network_fn=network_fn,
                        queues=[RemoteQueue(LocalService(queue))], unroll_length=unroll,
                        refresh_every=refresh_every, gamma=0.5, seed=0,
                        numpy_policy=numpy_policy(network_fn()) if twin else None)


@pytest.mark.parametrize("twin", [False, True], ids=["through torch", "numpy twin"])
def test_a_segment_carries_the_steps_their_discounts_and_the_behaviour_log_probs(twin):
    network_fn, _, server = _server()
    queue = TrajectoryQueue(0, capacity=4)
    actor = _actor(server, network_fn, queue, twin=twin)
    assert (actor.flat is None) == twin  # with the twin, no torch network at all
    assert actor.step()
    (seg,) = took(queue.take(1))
    # Counting-v0 ends after 5 steps (obs 0..4), and the next episode starts at once
    assert seg.obs[:, 0, 0].tolist() == [0, 1, 2, 3, 4, 0, 1]
    assert seg.valid.all()
    assert seg.discounts[:, 0].tolist() == [0.5, 0.5, 0.5, 0.5, 0.0, 0.5, 0.5]  # terminated at step 4
    assert seg.last_obs[0, 0] == 2.0
    assert (seg.policy_version == 0).all() and seg.steps == 14
    with torch.no_grad():
        logits, _ = network_fn()(torch.as_tensor(seg.obs))
    expected = torch.log_softmax(logits, -1).gather(-1, torch.as_tensor(seg.actions).unsqueeze(-1)).squeeze(-1)
    np.testing.assert_allclose(seg.log_probs[seg.valid], expected.numpy()[seg.valid], rtol=1e-5)
    assert actor.report()["env_steps"] == 14


def test_a_full_queue_holds_the_actor_back_its_segments_arrive_in_order_and_a_long_wait_is_an_error(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr("gorila.actors.segment_actor.time.monotonic", lambda: clock[0])
    network_fn, _, server = _server(timeout_s=10.0)
    queue = TrajectoryQueue(0, capacity=1)
    actor = _actor(server, network_fn, queue, unroll=2)
    blocked = [not actor.step() for _ in range(10)]
    assert blocked[-1] and not blocked[0]
    # one segment queued, one refused and resent, one acted while it travelled: no more
    assert actor.report()["env_steps"] == 3 * 2 * 2
    starts = []
    for _ in range(10):
        starts += [int(s.obs[0, 0, 0]) for s in queue.take(1) or []]
        actor.step()
    # segment k starts at step 2k of the 5-step episodes: none lost, none twice, in order
    assert starts == [(2 * k) % 5 for k in range(len(starts))] and len(starts) >= 4
    while actor.step():
        pass
    clock[0] = 10.5
    with pytest.raises(WorkerTimeoutError, match="queue 0 stayed full"):
        actor.step()


def test_the_actor_pulls_only_every_refresh_every_segments():
    network_fn, shards, server = _server()
    queue = TrajectoryQueue(0, capacity=8)
    actor = _actor(server, network_fn, queue, unroll=2, refresh_every=3)
    pusher = server.client(1)
    for _ in range(4):
        pusher.params()
        pusher.push(np.ones(pusher.layout.size, np.float32))
        actor.step()
    versions = [int(s.policy_version[0, 0]) for s in took(queue.take(8))]
    assert versions == [1, 1, 1, 4]


def test_an_actor_in_rounds_waits_for_the_updates_on_its_last_segment_then_acts_on_them(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr("gorila.actors.segment_actor.time.monotonic", lambda: clock[0])
    network_fn, _, server = _server(timeout_s=10.0)
    queue = TrajectoryQueue(0, capacity=8)
    actor = SegmentActor(0, server, envs=EnvSpec(COUNTING, 2), network_fn=network_fn,
                         queues=[RemoteQueue(LocalService(queue))], unroll_length=2, refresh_every=1,
                         gamma=0.5, seed=0, round_versions=2)
    pusher = server.client(1)

    def update():
        pusher.params()
        pusher.push(np.ones(pusher.layout.size, np.float32))

    assert actor.step()  # the first segment at once
    assert not actor.step()  # in-process shards answer at once: blocked until version 0 + 2
    update()
    assert not actor.step() and actor.report()["env_steps"] == 4
    update()
    assert actor.step()
    assert [int(s.policy_version[0, 0]) for s in took(queue.take(8))] == [0, 2]
    assert not actor.step()  # now waiting for version 4
    clock[0] = 10.5
    with pytest.raises(WorkerTimeoutError, match="version 4"):
        actor.step()


def test_an_actor_waiting_for_its_round_resends_a_refused_segment():
    network_fn, _, server = _server()
    queue = TrajectoryQueue(0, capacity=1)
    queue.add(segment(0), "another", 0)  # full
    actor = SegmentActor(0, server, envs=EnvSpec(COUNTING, 2), network_fn=network_fn,
                         queues=[RemoteQueue(LocalService(queue))], unroll_length=2, refresh_every=1,
                         gamma=0.5, seed=0, round_versions=1)
    assert actor.step()  # acted; its add is in flight
    assert not actor.step()  # refused and sent again
    queue.take(1)
    assert not actor.step()  # still waiting for version 1, but the segment went in
    (seg,) = took(queue.take(1))
    assert seg.obs.shape == (2, 2, 1) and queue.stats()["added"] == 2


def test_side_by_side_segments_keep_each_cut_steps_final_observation_with_its_step():
    """Only the truncated steps' final observations travel, in (time, env) order; batched side by side,
    each must still be the one its own step was cut at."""
    def cut(T, N, steps, label):
        truncated = np.zeros((T, N), bool)
        for t, n in steps:
            truncated[t, n] = True
        final = np.array([[label + 10 * t + n] for t, n in sorted(steps)], np.float32).reshape(len(steps), 1)
        return Segment(**{**segment(0, T, N).__dict__, "truncated": truncated, "final_obs": final})

    a, b = cut(3, 2, [(2, 0), (0, 1)], 100.0), cut(3, 3, [(1, 2), (0, 0)], 200.0)
    batch = Segment.concatenate([a, b])
    t, n = np.nonzero(batch.truncated)
    expected = [100 + 10 * ti + ni if ni < 2 else 200 + 10 * ti + (ni - 2) for ti, ni in zip(t, n)]
    assert batch.final_obs[:, 0].tolist() == expected
    only_late = np.zeros_like(batch.truncated)
    only_late[1:] = True
    assert batch.final_values_at(only_late)[:, 0].tolist() == [212.0, 120.0]
    with pytest.raises(ValueError, match="final_obs"):
        Segment(**{**a.__dict__, "final_obs": np.zeros((3, 1), np.float32)})


def test_an_actors_segment_carries_the_observation_each_truncated_step_was_cut_at():
    import gymnasium as gym

    cut_id = "gorila-test/CountingCut-v0"  # 3-step episodes ended by a time limit: truncated, not terminated
    if cut_id not in gym.registry:
        gym.register(cut_id, entry_point="gorila.envs.fake:CountingEnv", kwargs={"episode_length": 3, "truncate": True})
    network_fn, _, server = _server()
    queue = TrajectoryQueue(0, capacity=4)
    actor = _actor(server, network_fn, queue, env=cut_id)
    assert actor.step()
    (seg,) = took(queue.take(1))
    assert seg.obs[:, 0, 0].tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert list(zip(*np.nonzero(seg.truncated))) == [(2, 0), (2, 1), (5, 0), (5, 1)]
    assert seg.final_obs[:, 0].tolist() == [3.0, 3.0, 3.0, 3.0]  # the step after index 2: where it was cut


def test_a_refused_segment_is_sent_again_only_once_the_queue_has_room():
    """Sending a refused segment again while the queue is still full would copy it all to be
    refused again (an RL segment is hundreds of kilobytes): the actor asks for room first."""
    network_fn, _, server = _server()
    queue = TrajectoryQueue(0, capacity=1)
    queue.add(segment(0), "another", 0)  # full
    actor = _actor(server, network_fn, queue, unroll=2)
    assert actor.step()  # acted; its add is in flight
    for _ in range(5):
        assert not actor.step()
    assert queue.stats()["refused"] == 1  # refused once, then held back while there was no room
    queue.take(1)
    actor.step()  # room now: sent again, and taken
    assert queue.stats()["refused"] == 1 and queue.stats()["added"] == 2


ACTS_WITHOUT_TORCH = """
import pickle, sys
from gorila.actors.segment_actor import SegmentActor
from gorila.envs.spec import EnvSpec
from gorila.params import LocalEndpoint, ParameterServer, ServerSpec, UpdateRule
from gorila.runtime.local import LocalService
from gorila.trajectory import RemoteQueue, TrajectoryQueue
twin, params = pickle.load(sys.stdin.buffer)
spec = ServerSpec(rule=UpdateRule.asynchronous(), num_shards=8)  # short slices: a numpy optimizer
shards = spec.build(params)
server = ParameterServer(tuple(LocalEndpoint(s) for s in shards), spec.layout(params.size), spec.rule, timeout_s=30)
queue = TrajectoryQueue(0, capacity=4)
actor = SegmentActor(0, server, envs=EnvSpec("MinAtar/Breakout-v1", 2), network_fn=None, unroll_length=5,
                     queues=[RemoteQueue(LocalService(queue))], refresh_every=1, gamma=0.99, seed=0, numpy_policy=twin)
actor.step()
(seg,) = queue.take(1)
print(seg.steps, bool((seg.log_probs < 0).all()), 'torch' in sys.modules)
"""


def test_an_actor_given_its_policys_numpy_twin_acts_in_a_process_without_torch():
    net = make_network("MinAtar/Breakout-v1", (64, 64), False, 0)
    shipped = pickle.dumps((numpy_policy(net), FlatParams(net).get()))
    done = subprocess.run([sys.executable, "-c", ACTS_WITHOUT_TORCH], input=shipped, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().split() == ["10", "True", "False"]  # 5 steps of 2 envs, each drawn; no torch
