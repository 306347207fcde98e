"""Row 15 of the fault matrix, the fast path's side: what arrives on a shard's Unix socket is
never unpickled, and a client that sends anything else only loses its own connection."""

import os
import pickle
import socket
import stat

import numpy as np
import pytest

from gorila.params import ParameterShard, UpdateRule
from gorila.runtime.shard_host import ShardHost
from gorila.runtime.shm import FastPathChannel, FastPathServer
from gorila.transport.shm import supported

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(not supported(), reason="needs memfd and Unix seqpacket sockets")]


class _Planted:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_row15_a_pickle_sent_to_the_shard_socket_is_never_loaded_and_others_are_served(tmp_path):
    """Row 15: the socket's directory is private (0700); a pickle sent as the first message, or as a
    request after attaching, is refused without being loaded; a proper client is served after."""
    host = ShardHost(ParameterShard(np.zeros(4, np.float32), UpdateRule.asynchronous()), barrier_timeout_s=5)
    server = FastPathServer(host.push, host.pull, 4)
    path = server.start()
    assert path is not None  # the module is skipped where the fast path is unsupported
    try:
        assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
        marker = tmp_path / "unpickled"
        payload = pickle.dumps(_Planted(marker))
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as raw:
            raw.settimeout(5)
            raw.connect(path)
            raw.send(payload)  # instead of the slot's descriptor
            assert raw.recv(64) == b""  # dropped
        attached = FastPathChannel(path, 4, 0, timeout_s=5)
        attached._sock.send(payload)  # a request that is a pickle
        reply = attached._sock.recv(1024)
        assert reply[0] == 1 and b"unpack requires a buffer" in reply  # refused as a malformed request
        assert not marker.exists()
        channel = FastPathChannel(path, 4, 0, timeout_s=5)
        pending = channel.push(np.ones(4, np.float32), 0, 0)
        assert pending is not None and pending.result(5).applied
        channel.close()
        attached.close()
    finally:
        server.close()
