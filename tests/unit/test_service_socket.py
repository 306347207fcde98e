"""Calls to a service over its Unix socket: results in order, the service's errors raised as
themselves, a lost or silent service said at once and the channel closed."""

import multiprocessing
import threading
import time

import numpy as np
import pytest

from gorila.errors import ConfigError, GorilaError, WorkerTimeoutError
from gorila.runtime.service_socket import ServiceSocket, ServiceSocketServer, SocketLost
from gorila.trajectory import TrajectoryQueue


class _Unpicklable(Exception):
    def __init__(self, a, b):  # pickle rebuilds an exception from its args: one of two cannot be
        super().__init__(a)


class _Service:
    """A counter whose calls say which thread ran them; one call waits until released."""

    def __init__(self):
        self.count = 0
        self.release = threading.Event()

    def add(self, n):
        self.count += n
        return self.count, threading.current_thread().name

    def refuse(self):
        raise ConfigError("lr", "must be > 0, got -1")

    def odd(self):
        raise _Unpicklable("odd", 2)

    def wait(self):
        self.release.wait(timeout=10)
        return "released"

    def echo(self, value):
        return value


@pytest.fixture
def served():
    service = _Service()
    server = ServiceSocketServer(lambda method, *args: getattr(service, method)(*args))
    path = server.start()
    assert path is not None
    channel = ServiceSocket(path, timeout_s=10)
    yield service, server, channel
    channel.close()
    server.close()


def test_calls_sent_before_their_replies_are_read_each_get_their_own_result(served):
    service, _, channel = served
    replies = [channel.call("add", (n,)) for n in (1, 10, 100)]
    assert [replies[k].result(timeout_s=10)[0] for k in (2, 0, 1)] == [111, 1, 11]
    assert service.count == 111
    assert replies[0].ready()


def test_a_call_runs_on_the_service_s_socket_thread(served):
    _, _, channel = served
    assert channel.call("add", (1,)).result(timeout_s=10)[1] == "service-call"


def test_arrays_and_segments_cross_whole():
    queue = TrajectoryQueue(0, capacity=2)
    server = ServiceSocketServer(lambda method, *args: getattr(queue, method)(*args))
    path = server.start()
    assert path is not None
    channel = ServiceSocket(path, timeout_s=10)
    try:
        big = np.arange(300_000, dtype=np.float32)  # larger than one write of the socket's buffer
        assert channel.call("add", (big, "actor-0", 0)).result(timeout_s=10) == 1
        assert channel.call("add", (big, "actor-0", 0)).result(timeout_s=10) == 1  # a duplicate: not queued
        (taken,) = channel.call("take", (4,)).result(timeout_s=10)
        assert np.array_equal(taken, big) and channel.call("size", ()).result(timeout_s=10) == 0
    finally:
        channel.close()
        server.close()


def test_the_service_s_error_is_raised_as_itself_and_the_channel_goes_on(served):
    _, _, channel = served
    with pytest.raises(ConfigError, match="lr"):
        channel.call("refuse", ()).result(timeout_s=10)
    with pytest.raises(GorilaError, match="_Unpicklable|odd"):
        channel.call("odd", ()).result(timeout_s=10)
    assert channel.call("add", (2,)).result(timeout_s=10)[0] == 2


def test_a_reply_not_in_time_is_a_timeout_and_closes_the_channel(served):
    service, _, channel = served
    reply = channel.call("wait", ())
    with pytest.raises(WorkerTimeoutError):
        reply.result(timeout_s=0.2)
    service.release.set()
    assert channel.closed
    with pytest.raises(SocketLost):
        channel.call("add", (1,))


def _serve_a_counter(pipe):
    service = _Service()
    server = ServiceSocketServer(lambda method, *args: getattr(service, method)(*args))
    pipe.send(server.start())
    pipe.recv()  # until killed


def test_a_service_process_that_dies_is_a_lost_connection_at_once():
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    process = context.Process(target=_serve_a_counter, args=(theirs,), daemon=True)
    process.start()
    try:
        assert ours.poll(60)
        channel = ServiceSocket(ours.recv(), timeout_s=10)
        assert channel.call("add", (1,)).result(timeout_s=10)[0] == 1
        waiting = channel.call("wait", ())
        process.kill()
        started = time.monotonic()
        with pytest.raises(SocketLost):
            waiting.result(timeout_s=10)
        assert time.monotonic() - started < 5 and channel.closed
    finally:
        process.kill()
        process.join(timeout=10)


def test_threads_sharing_a_channel_each_get_their_own_reply_at_once(served):
    """A node's actors add to one replay shard over one channel. Each thread's calls must come back
    as its own (a whole message each way, a reply never taken by another thread) and in time: two
    threads used to read each other's replies, one then waiting out its timeout for a reply gone."""
    _, _, channel = served
    threads, calls = 16, 60
    failures: list[str] = []
    started = threading.Barrier(threads)

    def caller(k):
        started.wait(timeout=30)
        for i in range(calls):
            sent = np.full(1 + (k * 977 + i * 131) % 40_000, k * 1000 + i, np.int32)  # some in two writes
            try:
                back = channel.call("echo", (sent,)).result(timeout_s=10)
            except Exception as err:
                failures.append(f"thread {k} call {i}: {type(err).__name__}: {err}")
                return
            if not np.array_equal(back, sent):
                failures.append(f"thread {k} call {i}: another call's reply")
                return

    workers = [threading.Thread(target=caller, args=(k,)) for k in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert not any(worker.is_alive() for worker in workers)
    assert failures == [] and not channel.closed, failures[:3]

