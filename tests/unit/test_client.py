"""The worker-side client over in-process shards."""

import numpy as np

from gorila.params import LocalEndpoint, ParameterClient, ServerSpec, UpdateRule
from gorila.params.client import ShardEndpoint


def make(rule, size=10, shards=3, workers=2):
    spec = ServerSpec(rule=rule, num_shards=shards, optimizer="sgd", lr=1.0)
    built = spec.build(np.zeros(size, np.float32))
    endpoints: list[ShardEndpoint] = [LocalEndpoint(s) for s in built]
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


class InTransit:
    """A push reply still travelling: the push reaches the shard only when the client waits for it
    (or the test delivers it), so the shard judges it at the version it has by then."""

    def __init__(self, deliver):
        self._deliver = deliver
        self._result = None

    def arrive(self):
        if self._result is None:
            self._result = self._deliver()

    def ready(self):
        return False if self._result is None else True

    def result(self, timeout_s):
        self.arrive()
        return self._result


class SlowEndpoint(LocalEndpoint):
    """A shard behind a slow link: pushes travel until waited for; records every push's label."""

    def __init__(self, shard):
        super().__init__(shard)
        self.labels = []
        self.arrived = 0

    def push(self, grad, version, worker_id, tag=None):
        self.labels.append(version)

        def deliver():
            self.arrived += 1
            return LocalEndpoint.push(self, grad.copy(), version, worker_id, tag).value
        return InTransit(deliver)


def slow_pair(rule):
    spec = ServerSpec(rule=rule, num_shards=1, optimizer="sgd", lr=1.0)
    shard = spec.build(np.zeros(4, np.float32))[0]
    slow = SlowEndpoint(shard)
    a = ParameterClient([slow], spec.layout(4), worker_id=0, wait_when_behind=rule.waits_when_behind,
                        pipelined=rule.pipelined)
    b = ParameterClient([LocalEndpoint(shard)], spec.layout(4), worker_id=1)
    return shard, slow, a, b


def test_a_pipelined_semi_async_client_that_fell_behind_computes_its_next_gradient_on_the_fresh_version():
    shard, slow, a, b = slow_pair(UpdateRule.semi_async(aggregate=1, count_within=0, accept_within=1, pipelined=True))
    g = np.ones(4, np.float32)
    a.params(), b.params()
    for _ in range(2):                        # the shard goes to 2; a still holds 0
        b.params(), b.push(g)
    a.push(g, wait=False)                     # labelled 0: rejected, the reply carries version 2
    a.params()
    a.push(g, wait=False)                     # computed before the first reply was read: labelled 0
    assert a.behind and shard.version == 2    # the first reply said so; the second push travels
    b.params(), b.push(g)                     # the shard moves on to 3 while it travels
    a.params()                                # behind: waits for the reply, which brings version 3
    a.push(g, wait=False)
    assert slow.labels == [0, 0, 3]           # without the wait: [0, 0, 2], the first reply's copy


def test_a_semi_async_client_one_version_behind_receives_the_new_parameters_before_its_next_gradient():
    """The write-up's client: its push, counted one version behind, comes back with the server's
    parameters, and the client waits for them (it pushes as every learner does, the rule deciding)."""
    shard, slow, a, b = slow_pair(UpdateRule.semi_async(aggregate=1, count_within=1, accept_within=2))
    g = np.ones(4, np.float32)
    a.params(), b.params()
    b.push(g)                                 # the shard goes to 1; a still holds 0
    a.push(g, wait=a.blocks)                  # labelled 0, counted one behind: the shard goes to 2
    assert slow.arrived == 1 and a.versions == [2]  # waited for: the reply brought version 2
    np.testing.assert_array_equal(a.params(), np.full(4, -2.0, np.float32))
    a.push(g, wait=a.blocks)
    assert slow.labels == [0, 2] and a.outcomes["counted"] == 2


def test_a_pipelined_semi_async_client_whose_pushes_are_counted_keeps_pipelining():
    shard, slow, a, _ = slow_pair(UpdateRule.semi_async(aggregate=1, count_within=1, accept_within=2,
                                                        pipelined=True))
    g = np.ones(4, np.float32)
    a.params()
    a.push(g, wait=a.blocks)
    a.params()
    assert slow.arrived == 0                  # the reply is still on its way: not waited for
    a.push(g, wait=a.blocks)                  # the first reply collected here, counted
    assert not a.behind and slow.labels == [0, 0]


def test_only_pipelined_rules_that_bound_staleness_wait_when_behind():
    assert UpdateRule.semi_async(pipelined=True).waits_when_behind
    assert UpdateRule.asynchronous(max_staleness=3).waits_when_behind
    assert not UpdateRule.asynchronous().waits_when_behind
    assert not UpdateRule.synchronous(4).waits_when_behind
    assert not UpdateRule.semi_async().waits_when_behind  # it waits for every reply instead
    assert not UpdateRule.semi_async().pipelined and UpdateRule.asynchronous().pipelined


def test_a_version_wait_on_in_process_shards_answers_at_once_with_the_oldest_version():
    shards, (client, pusher) = make(UpdateRule.asynchronous())
    pusher.params()
    pusher.push(np.ones(10, np.float32))
    assert client.wait_version(1, wait_s=5.0) == 1 and client.wait_version(3, wait_s=5.0) == 1
    shards[1].push(np.ones(4, np.float32), 1, worker_id=1)  # one shard ahead
    assert client.wait_version(2, wait_s=5.0) == 1  # the server is where its oldest shard is
    assert client.versions == [-1, -1, -1]  # it pulled nothing
