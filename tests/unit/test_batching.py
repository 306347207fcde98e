"""The batching rule: a batch closes at max size or max wait, never later (a fake clock, no sleeps)."""

import pytest

from gorila.errors import ConfigError
from gorila.inference.batching import BatchingRule, BatchQueue


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_a_full_batch_closes_at_once():
    clock = FakeClock()
    queue = BatchQueue(BatchingRule(max_batch=8, max_wait_s=1.0), clock)
    queue.add("a", 4)
    assert not queue.ready()
    queue.add("b", 4)
    assert queue.ready() and queue.timeout() == 0.0
    assert queue.take() == ["a", "b"] and len(queue) == 0


def test_a_partial_batch_closes_exactly_when_its_oldest_request_has_waited_max_wait():
    clock = FakeClock()
    queue = BatchQueue(BatchingRule(max_batch=100, max_wait_s=0.010), clock)
    queue.add("a", 4)
    clock.now += 0.004
    queue.add("b", 4)
    # The server may block this long, and no longer: the oldest request's deadline.
    assert queue.timeout() == pytest.approx(0.006)
    clock.now += 0.0059
    assert not queue.ready()
    clock.now += 0.0001
    assert queue.ready() and queue.timeout() == 0.0
    assert queue.take() == ["a", "b"]


def test_the_wait_counts_from_the_oldest_request_not_the_newest():
    clock = FakeClock()
    queue = BatchQueue(BatchingRule(max_batch=100, max_wait_s=0.010), clock)
    queue.add("a", 1)
    for _ in range(9):
        clock.now += 0.001
        queue.add("more", 1)  # later arrivals never push the deadline back
    clock.now += 0.001
    assert queue.ready()


def test_a_batch_takes_at_most_max_batch_observations_in_arrival_order():
    clock = FakeClock()
    queue = BatchQueue(BatchingRule(max_batch=8, max_wait_s=1.0), clock)
    for name in "abc":
        queue.add(name, 4)
    assert queue.take() == ["a", "b"]
    assert len(queue) == 4 and not queue.ready()
    clock.now += 1.0
    assert queue.take() == ["c"]


def test_a_request_larger_than_max_batch_still_goes_alone():
    queue = BatchQueue(BatchingRule(max_batch=2, max_wait_s=1.0), FakeClock())
    queue.add("big", 5)
    queue.add("next", 1)
    assert queue.take() == ["big"] and queue.take() == ["next"]


def test_zero_wait_serves_whatever_is_queued():
    queue = BatchQueue(BatchingRule(max_batch=64, max_wait_s=0.0), FakeClock())
    assert queue.timeout() is None and not queue.ready()
    queue.add("a", 1)
    assert queue.ready()


def test_dropped_requests_leave_the_queue_and_its_count():
    clock = FakeClock()
    queue = BatchQueue(BatchingRule(max_batch=8, max_wait_s=1.0), clock)
    queue.add(("gone", 0), 4)
    queue.add(("kept", 0), 2)
    queue.add(("gone", 1), 4)
    assert queue.drop(lambda request: request[0] == "gone") == 8
    assert len(queue) == 2 and not queue.ready()
    clock.now += 1.0
    assert queue.take() == [("kept", 0)]


@pytest.mark.parametrize("batch, wait_ms, field", [(0, 1.0, "inference_batch"), (4, -1.0, "inference_wait_ms")])
def test_bad_flags_are_refused_by_name(batch, wait_ms, field):
    with pytest.raises(ConfigError) as err:
        BatchingRule.from_flags(batch, wait_ms)
    assert err.value.field == field
