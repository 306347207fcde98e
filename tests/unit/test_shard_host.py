"""ShardHost: one shard shared by threads, with the synchronous barrier."""

import threading
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np
import pytest

from gorila.errors import WorkerTimeoutError
from gorila.params import ParameterShard, PushTag, UpdateRule
from gorila.runtime.shard_host import ShardHost

pytestmark = pytest.mark.timeout(60)

D = 4


class CountingShard(ParameterShard):
    """A shard that releases a semaphore once it has taken each push: the test knows a push joined."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.taken = threading.Semaphore(0)

    def push(self, *args, **kwargs):
        result = super().push(*args, **kwargs)
        self.taken.release()
        return result


def host(rule, barrier_timeout_s=10.0, on_advance=None):
    shard = CountingShard(np.zeros(D, np.float32), rule, "sgd", lr=0.5)
    return ShardHost(shard, barrier_timeout_s, on_advance)


def test_a_barrier_push_returns_once_every_worker_joined_with_the_new_parameters():
    advances: list[int] = []
    h: ShardHost = host(UpdateRule.synchronous(num_workers=3), on_advance=lambda: advances.append(h.version))
    shard = h.shard
    assert isinstance(shard, CountingShard)
    grads = [np.full(D, k, np.float32) for k in (1, 2, 3)]
    with ThreadPoolExecutor(3) as pool:
        first = [pool.submit(h.push, grads[k], 0, k) for k in range(2)]
        assert shard.taken.acquire(timeout=10) and shard.taken.acquire(timeout=10)  # both joined
        done, _ = wait(first, timeout=0.2)
        assert not done  # two of three joined: nobody may go on yet
        last = pool.submit(h.push, grads[2], 0, 2)
        results = [f.result(timeout=10) for f in (*first, last)]
    want = -0.5 * np.mean(grads, axis=0)
    for r in results:
        assert r.version == 1 and r.params is not None and np.array_equal(r.params, want)
    assert [r.applied for r in results] == [False, False, True]
    assert advances == [1]


def test_a_barrier_that_is_never_completed_times_out_naming_the_version():
    h = host(UpdateRule.synchronous(num_workers=2), barrier_timeout_s=0.05)
    with pytest.raises(WorkerTimeoutError, match="worker 1 waited .* barrier of version 1"):
        h.push(np.ones(D, np.float32), 0, 1)


def test_without_wait_a_barrier_push_returns_and_says_it_must_wait():
    h = host(UpdateRule.synchronous(num_workers=2))
    result = h.push(np.ones(D, np.float32), 0, 0, wait=False)
    assert h.must_wait(result, 0) and result.params is None
    h.push(np.ones(D, np.float32), 0, 1)
    refreshed = h.refreshed(result)
    assert refreshed.version == 1 and np.array_equal(refreshed.params, np.full(D, -0.5, np.float32))


def test_a_pusher_that_reads_a_cache_gets_the_new_version_without_the_parameters():
    h = host(UpdateRule.synchronous(num_workers=2))
    cached = PushTag(client=1, seq=0, reply_params=False)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(h.push, np.ones(D, np.float32), 0, 0, tag=cached)
        assert h.shard.taken.acquire(timeout=10)
        h.push(np.ones(D, np.float32), 0, 1)
        result = first.result(timeout=10)
    assert result.version == 1 and result.params is None  # it waited at the barrier all the same
    restarted = h.push(np.ones(D, np.float32), 1, 0, tag=PushTag(epoch=1, client=1, seq=1, reply_params=False))
    assert restarted.reason == "restarted" and restarted.params is not None  # the way to the new epoch


def test_stale_and_asynchronous_pushes_never_wait():
    h = host(UpdateRule.synchronous(num_workers=1))
    h.push(np.ones(D, np.float32), 0, 0)
    stale = h.push(np.ones(D, np.float32), 0, 0)  # version 0 is gone: rejected, with fresh params
    assert stale.outcome == "rejected" and not h.must_wait(stale, 0) and stale.params is not None
    a = host(UpdateRule.asynchronous())
    assert not a.must_wait(a.push(np.ones(D, np.float32), 0, 0), 0)
