"""The same-node fast path without Ray: a FastPathServer on its threads, channels in this one."""

import os
import threading
from typing import TypeVar

import numpy as np
import pytest

from gorila.errors import GorilaError, VersionError, WorkerTimeoutError
from gorila.params import ParameterShard, PushTag, UpdateRule
from gorila.runtime.shard_host import ShardHost
from gorila.runtime.shm import FastPathChannel, FastPathServer, FastPending
from gorila.transport.shm import supported

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(not supported(), reason="needs memfd and Unix seqpacket sockets")]

N = 1000
R = TypeVar("R")


def sent(pending: FastPending[R] | None) -> FastPending[R]:
    """A request the channel took (None: the caller would go another way)."""
    assert pending is not None
    return pending


class Served:
    """A shard behind a ShardHost and a FastPathServer, as in a shard process."""

    def __init__(self, rule: UpdateRule):
        self.shard = ParameterShard(np.zeros(N, np.float32), rule, "sgd", lr=0.5)
        self.host = ShardHost(self.shard, barrier_timeout_s=10)
        self.release = threading.Event()  # hold() clears it: pushes then wait for release()
        self.release.set()
        self.server = FastPathServer(self._push, self.host.pull, N, publish=self.host.publish)
        path = self.server.start()
        assert path is not None  # the module is skipped where the fast path is unsupported
        self.path = path

    def _push(self, grad, version, worker_id, out=None, tag=None):
        assert self.release.wait(timeout=30)
        return self.host.push(grad, version, worker_id, out=out, tag=tag)

    def hold(self) -> None:
        self.release.clear()

    def close(self) -> None:
        self.release.set()
        self.server.close()


@pytest.fixture
def served():
    s = Served(UpdateRule.asynchronous())
    yield s
    s.close()


@pytest.mark.parametrize("reply_params", [True, False])  # False: a pusher that reads its node's cache
def test_push_and_pull_match_the_shard_itself(served, reply_params):
    reference = ParameterShard(np.zeros(N, np.float32), UpdateRule.asynchronous(), "sgd", lr=0.5)
    channel = FastPathChannel(served.path, N, 0, timeout_s=10)
    rng = np.random.default_rng(0)
    for version in (0, 0, 1):  # the last two are behind: their replies carry fresh params, if asked for
        grad = rng.standard_normal(N).astype(np.float32)
        got = sent(channel.push(grad, version, 3, PushTag(reply_params=reply_params))).result(10)
        want = reference.push(grad, version, 3, tag=PushTag(reply_params=reply_params))
        assert (got.outcome, got.applied, got.version, got.staleness, got.reason) == \
               (want.outcome, want.applied, want.version, want.staleness, want.reason)
        assert (got.params is None) == (want.params is None)
        assert got.params is None or reply_params
        if want.params is not None:
            assert got.params is not None
            assert np.array_equal(got.params, want.params) and not got.params.flags.writeable
    params, version = sent(channel.pull()).result(10)
    assert version == reference.version and params is not None and np.array_equal(params, reference.pull()[0])
    assert served.shard.stats == reference.stats
    channel.close()


def test_a_nonfinite_gradient_is_rejected_and_changes_nothing(served):
    channel = FastPathChannel(served.path, N, 0, timeout_s=10)
    sent(channel.push(np.ones(N, np.float32), 0, 0)).result(10)
    before = served.shard.state_dict()
    grad = np.ones(N, np.float32)
    grad[7] = np.inf
    result = sent(channel.push(grad, 1, 0)).result(10)
    assert (result.outcome, result.reason, result.applied, result.version) == ("rejected", "nonfinite", False, 1)
    for key, value in served.shard.state_dict().items():
        if key not in ("stats", "staleness"):  # counters move; nothing else may
            assert np.array_equal(value, before[key]), key
    assert served.shard.stats.pushes_rejected_nonfinite == 1
    channel.close()


def test_shard_errors_arrive_typed_and_the_channel_stays_usable(served):
    channel = FastPathChannel(served.path, N, 0, timeout_s=10)
    with pytest.raises(VersionError, match="from the future"):
        sent(channel.push(np.ones(N, np.float32), 5, 0)).result(10)
    assert sent(channel.push(np.ones(N, np.float32), 0, 0)).result(10).applied


def test_other_gradients_and_a_second_request_in_flight_are_left_to_the_caller(served):
    channel = FastPathChannel(served.path, N, 0, timeout_s=10)
    assert channel.push(np.ones(N, np.float64), 0, 0) is None
    assert channel.push(np.ones(N + 1, np.float32), 0, 0) is None
    served.hold()
    pending = channel.push(np.ones(N, np.float32), 0, 0)
    assert pending is not None and not pending.ready()
    assert channel.push(np.ones(N, np.float32), 0, 0) is None and channel.pull() is None
    served.release.set()
    assert pending.result(10).applied
    assert channel.pull() is not None


def test_a_closed_channel_leaves_every_request_to_the_caller(served):
    channel = FastPathChannel(served.path, N, 0, timeout_s=10)
    channel.close()
    assert channel.closed
    assert channel.push(np.ones(N, np.float32), 0, 0) is None
    assert channel.publish({"params": np.ones(N, np.float32)}) is None
    assert channel.pull() is None


def test_a_reply_that_does_not_come_is_a_timeout_and_closes_the_channel(served):
    channel = FastPathChannel(served.path, N, 0, timeout_s=10)
    served.hold()
    pending = sent(channel.push(np.ones(N, np.float32), 0, 0))
    with pytest.raises(WorkerTimeoutError, match="shard 0 push did not answer"):
        pending.result(timeout_s=0.2)
    assert channel.closed
    served.release.set()


def test_a_client_of_the_wrong_size_is_refused(served):
    with pytest.raises(OSError):
        FastPathChannel(served.path, N + 1, 0, timeout_s=10)
    assert sent(FastPathChannel(served.path, N, 0, timeout_s=10).pull()).result(10)[1] == 0


def test_close_ends_connections_and_removes_the_socket():
    s = Served(UpdateRule.asynchronous())
    channel = FastPathChannel(s.path, N, 0, timeout_s=10)
    s.hold()
    pending = sent(channel.push(np.ones(N, np.float32), 0, 0))
    s.server.close(timeout_s=0)  # a push that is still inside the shard does not hold close up
    assert not os.path.exists(os.path.dirname(s.path))
    with pytest.raises(GorilaError, match="closed the connection before answering push"):
        pending.result(10)
    assert channel.closed and channel.pull() is None  # the caller goes another way
    s.release.set()


def test_close_ends_the_threads_of_idle_connections():
    before = set(threading.enumerate())
    s = Served(UpdateRule.asynchronous())
    channels = [FastPathChannel(s.path, N, k, timeout_s=10) for k in range(3)]
    assert all(sent(c.pull()).result(10)[1] == 0 for c in channels)
    assert len([t for t in threading.enumerate() if t.name == "gorila-fast-path" and t not in before]) == 4
    s.close()
    assert not [t for t in threading.enumerate() if t.name == "gorila-fast-path" and t not in before]


def test_dirs_of_killed_shards_are_removed_and_live_ones_kept(served):
    import socket
    import tempfile

    dead = tempfile.mkdtemp(prefix="gorila-shard-")
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as gone:  # as a killed shard leaves it
        gone.bind(os.path.join(dead, "shard.sock"))
        gone.listen()
    other = Served(UpdateRule.asynchronous())  # starting a server sweeps the temp dir
    try:
        assert not os.path.exists(dead)
        assert os.path.exists(served.path) and os.path.exists(other.path)
        assert sent(FastPathChannel(served.path, N, 0, timeout_s=10).pull()).result(10)[1] == 0
    finally:
        other.close()


def test_a_publication_through_the_slot_is_the_owning_learners_state(served):
    """What an owning learner publishes (``--server learner``) lands in the store as its
    ``publish`` would take it through Ray: parameters, version, counters and optimizer state; a
    state too large for a message is refused here (the caller sends it through Ray)."""
    owner = ParameterShard(np.zeros(N, np.float32), UpdateRule.asynchronous(), "sgd", lr=0.5)
    rng = np.random.default_rng(1)
    for version in range(3):
        owner.push(rng.standard_normal(N).astype(np.float32), version, 0)
    channel = FastPathChannel(served.path, N, 0, timeout_s=10)
    too_large = {**owner.state_dict(pending=False), "optim.slot": np.zeros(20_000, np.float32)}
    assert channel.publish(too_large) is None
    assert sent(channel.publish(owner.state_dict(pending=False))).result(10) is None
    params, version = sent(channel.pull()).result(10)
    assert version == owner.version == 3 and params is not None and np.array_equal(params, owner.pull()[0])
    assert served.shard.stats.pushes_counted == owner.stats.pushes_counted == 3
    assert served.shard.stats.bytes_in == 4 * N  # the store counts what it took in, not the owner's pushes
    assert served.host.version == 3
