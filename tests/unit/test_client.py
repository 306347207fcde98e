"""The worker-side client over in-process shards."""

import numpy as np

from gorila.params import LocalEndpoint, ParameterClient, ServerSpec, UpdateRule


def make(rule, size=10, shards=3, workers=2):
    spec = ServerSpec(rule=rule, num_shards=shards, optimizer="sgd", lr=1.0)
    built = spec.build(np.zeros(size, np.float32))
    endpoints = [LocalEndpoint(s) for s in built]
    clients = [ParameterClient(endpoints, spec.layout(size), worker_id=k, barrier=rule.barrier)
               for k in range(workers)]
    return built, clients


def test_shards_cover_the_vector_and_push_lands_in_the_right_slices():
    shards, (client, _) = make(UpdateRule.asynchronous())
    assert [s.size for s in shards] == [3, 4, 3]
    grad = np.arange(10, dtype=np.float32)
    client.params()
    push = client.push(grad)
    assert push.applied and push.refreshed and push.outcomes == ("counted",) * 3
    np.testing.assert_array_equal(client.params(), -grad)
    assert client.versions == [1, 1, 1]


def test_barrier_client_is_behind_until_all_workers_pushed():
    shards, (a, b) = make(UpdateRule.synchronous(2))
    a.params(), b.params()
    assert not a.push(np.ones(10, np.float32)).applied
    assert a.versions == [-1, -1, -1]  # will pull before computing again
    assert b.push(np.full(10, 3.0, np.float32)).applied
    np.testing.assert_array_equal(a.params(), np.full(10, -2.0, np.float32))
    assert a.version == 1


def test_push_without_wait_is_collected_before_the_next_push():
    shards, (client, _) = make(UpdateRule.asynchronous())
    client.params()
    assert client.push(np.ones(10, np.float32), wait=False) is None
    assert client.versions == [0, 0, 0]  # reply not read yet
    second = client.push(np.ones(10, np.float32), wait=False)
    assert second is None and client.versions == [1, 1, 1]  # the first reply landed first
    done = client.complete()
    assert done.applied and client.versions == [2, 2, 2]
    np.testing.assert_array_equal(client.params(), np.full(10, -2.0, np.float32))
    assert client.complete() is None


def test_a_pipelined_push_is_labelled_with_the_version_it_was_computed_on():
    # Both gradients are computed on version 0; the second arrives when the shard is at 1.
    shards, (client, _) = make(UpdateRule.asynchronous(), shards=1)
    client.params()
    client.push(np.ones(10, np.float32), wait=False)
    client.push(np.ones(10, np.float32), wait=False)
    client.complete()
    assert dict(shards[0].stats.staleness) == {0: 1, 1: 1}


def test_a_pipelined_push_older_than_the_bound_is_rejected():
    shards, (client, _) = make(UpdateRule.asynchronous(max_staleness=0), shards=1)
    client.params()
    client.push(np.ones(10, np.float32), wait=False)
    client.push(np.ones(10, np.float32), wait=False)
    assert client.complete().outcomes == ("rejected",)
    assert shards[0].version == 1 and shards[0].stats.pushes_rejected_stale == 1


def test_params_collects_a_reply_that_already_arrived():
    # In-process replies are there at once: the next gradient is computed on version 1, not 0.
    shards, (client, _) = make(UpdateRule.asynchronous(max_staleness=0), shards=1)
    client.params()
    client.push(np.ones(10, np.float32), wait=False)
    client.params()
    client.push(np.ones(10, np.float32), wait=False)
    assert client.complete().outcomes == ("counted",)
    assert dict(shards[0].stats.staleness) == {0: 2}
