"""The synchronous server spread over its workers: rounds in shared memory are gradient descent on
the mean, exactly as the shards in their own processes compute it."""

import copy
import pickle
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from gorila.errors import ConfigError, GradientError, NonFiniteError, WorkerTimeoutError
from gorila.params import LocalEndpoint, ServerSpec, UpdateRule, split_shard_state
from gorila.runtime.allreduce import SpreadShards

pytestmark = pytest.mark.timeout(60)

SIZE = 10


def spread(num_workers=2, shards=3, optimizer="adam"):
    spec = ServerSpec(UpdateRule.synchronous(num_workers), num_shards=shards, optimizer=optimizer, lr=0.1)
    return spec, SpreadShards(spec, np.linspace(-1, 1, SIZE, dtype=np.float32), num_workers, timeout_s=10)


def rounds(server, grads):
    """Each worker (a thread, with its own copy of the endpoints as a process would have) pushes
    its gradient of every round; returns each worker's parameters after each round."""
    def worker(k):
        client = pickle.loads(pickle.dumps(server)).client(worker_id=k)
        client.params()
        out = []
        for round_grads in grads:
            client.push(round_grads[k])
            out.append(client.params().copy())
        return out
    with ThreadPoolExecutor(len(grads[0])) as pool:
        return [f.result(timeout=30) for f in [pool.submit(worker, k) for k in range(len(grads[0]))]]


def test_rounds_are_the_mean_applied_by_the_same_optimizer_as_a_shard_process():
    spec, shards = spread()
    try:
        rng = np.random.default_rng(0)
        grads = [[rng.standard_normal(SIZE).astype(np.float32) for _ in range(2)] for _ in range(5)]
        seen = rounds(shards.server, grads)
        reference = spec.build(np.linspace(-1, 1, SIZE, dtype=np.float32))  # in-process shards, same spec
        for r, round_grads in enumerate(grads):
            for shard, part in zip(reference, spec.layout(SIZE).slices):
                for g in round_grads:
                    shard.push(g[part], r, 0)
            want = np.concatenate([s.pull()[0] for s in reference])
            for worker in seen:  # every worker holds exactly the new parameters after every round
                np.testing.assert_allclose(worker[r], want, rtol=1e-6, atol=1e-7)
        stats = shards.stats()
        assert [s.updates for s in stats] == [5, 5, 5] and all(s.pushes_counted == 10 for s in stats)
        restored = copy.deepcopy(shards.state_dict())
        assert restored["shard0.counters"][0] == 5 and "shard0.optim.m" in restored
    finally:
        shards.close()


def test_a_nonfinite_gradient_is_rejected_and_the_round_waits_for_a_good_one():
    _, shards = spread(num_workers=1, shards=1, optimizer="sgd")
    try:
        client = shards.server.client(worker_id=0)
        before = client.params().copy()
        push = client.push(np.full(SIZE, np.nan, np.float32))
        assert push.outcomes == ("rejected",) and shards.stats()[0].pushes_rejected_nonfinite == 1
        np.testing.assert_array_equal(client.params(), before)
        assert client.push(np.ones(SIZE, np.float32)).applied
        np.testing.assert_allclose(client.params(), before - 0.1)
    finally:
        shards.close()


def test_stale_and_nonfinite_pushes_are_judged_and_counted_exactly_as_a_shard_process_does():
    """The same pushes, one by one, to the spread server and to a shard of the same spec: the same
    replies, and after each the same parameters, version, optimizer state and counters."""
    spec = ServerSpec(UpdateRule.synchronous(1), optimizer="adam", lr=0.1, nonfinite_limit=3)
    start = np.linspace(-1, 1, SIZE, dtype=np.float32)
    spread = SpreadShards(spec, start, num_workers=1, timeout_s=10)
    shard = spec.build(start)[0]
    try:
        endpoints = {"spread": spread.server.endpoints[0], "shard": LocalEndpoint(shard)}
        good, bad = np.full(SIZE, 0.5, np.float32), np.full(SIZE, np.nan, np.float32)
        pushes = [(good, 0, "counted", None), (good, 0, "rejected", "stale"), (bad, 1, "rejected", "nonfinite"),
                  (good * 2, 1, "counted", None), (bad, 2, "rejected", "nonfinite"), (bad, 2, "rejected", "nonfinite")]
        for grad, version, outcome, reason in pushes:
            replies = {name: e.push(grad, version, worker_id=0).result(10) for name, e in endpoints.items()}
            for reply in replies.values():
                assert (reply.outcome, reply.reason) == (outcome, reason)
            assert replies["spread"].staleness == replies["shard"].staleness
            assert (replies["spread"].params is None) == (replies["shard"].params is None)
            spread_state = split_shard_state(spread.state_dict(), 1)[0]
            for key, value in spread_state.items():
                assert value.tobytes() == shard.state_dict()[key].tobytes(), key
            assert spread.stats()[0].as_dict() == shard.stats.as_dict()
        assert shard.version == 2
        assert (shard.stats.pushes_rejected_stale, shard.stats.pushes_rejected_nonfinite) == (1, 3)
        # Worker 0's third non-finite gradient in a row stops it on both paths, with nothing applied;
        # a gradient of the wrong shape is an error naming both shapes.
        before = shard.pull()[0]
        for endpoint in endpoints.values():
            with pytest.raises(NonFiniteError, match="worker 0 pushed 3 non-finite gradients in a row"):
                endpoint.push(bad, 2, worker_id=0)
            with pytest.raises(GradientError, match=r"expected float32 of shape \(10,\), got float32 of shape \(9,\)"):
                endpoint.push(good[:9], 2, worker_id=0)
        for params, version in (spread.pull(), shard.pull()):
            assert params.tobytes() == before.tobytes() and np.all(np.array(version) == 2)
    finally:
        spread.close()


def test_a_round_that_never_completes_times_out_naming_the_barrier():
    spec = ServerSpec(UpdateRule.synchronous(2), optimizer="sgd", lr=0.1)
    shards = SpreadShards(spec, np.zeros(SIZE, np.float32), 2, timeout_s=0.2)
    try:
        client = shards.server.client(worker_id=1)  # worker 0 owns the shard and never comes
        client.params()
        with pytest.raises(WorkerTimeoutError, match="barrier of version 1"):
            client.push(np.ones(SIZE, np.float32))
    finally:
        shards.close()


def test_only_the_synchronous_rule_can_be_spread():
    spec = ServerSpec(UpdateRule.asynchronous(), optimizer="sgd", lr=0.1)
    with pytest.raises(ConfigError, match="sync"):
        SpreadShards(spec, np.zeros(SIZE, np.float32), 2, timeout_s=1)
