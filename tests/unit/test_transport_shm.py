"""The shared-memory transport both same-node paths use: a block handed over once, then shared."""

import os
import stat
import struct
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from gorila.transport.shm import Listener, accept_block, connect, supported

pytestmark = [pytest.mark.timeout(30),
              pytest.mark.skipif(not supported(), reason="needs memfd and Unix seqpacket sockets")]

HEADER = struct.Struct("<q")


def _parse(header: bytes) -> tuple[int, int]:
    (n,) = HEADER.unpack(header)
    if n > 64:
        raise ValueError("too large")
    return n, 8 * n


def _accept_one(listener: Listener):
    conn, _ = listener.socket.accept()
    try:
        return conn, accept_block(conn, _parse)
    except ValueError:
        conn.close()
        return None, None


def test_the_block_is_one_memory_in_both_processes_and_the_socket_is_private():
    listener = Listener("gorila-test-transport-", "test.sock")
    try:
        assert stat.S_IMODE(os.stat(listener.dir).st_mode) == 0o700
        with ThreadPoolExecutor(1) as pool:
            server = pool.submit(_accept_one, listener)
            sock, client_block = connect(listener.path, 8 * 4, HEADER.pack(4), "gorila-test", timeout_s=10)
            conn, (n, server_block) = server.result(timeout=10)
        assert n == 4
        client = np.frombuffer(client_block, np.int64, 4)
        served = np.frombuffer(server_block, np.int64, 4)
        client[:] = [1, 2, 3, 4]  # written on one side, read on the other: no copy in between
        assert served.tolist() == [1, 2, 3, 4]
        served[0] = 42
        assert client[0] == 42
        sock.close()
        conn.close()
    finally:
        listener.close()
    assert not os.path.exists(listener.dir)


def test_a_header_the_server_refuses_fails_the_client_and_the_listener_serves_the_next():
    listener = Listener("gorila-test-transport-", "test.sock")
    try:
        with ThreadPoolExecutor(1) as pool:
            refused = pool.submit(_accept_one, listener)
            with pytest.raises(OSError):
                connect(listener.path, 8 * 100, HEADER.pack(100), "gorila-test", timeout_s=10)
            assert refused.result(timeout=10) == (None, None)
            accepted = pool.submit(_accept_one, listener)
            sock, _ = connect(listener.path, 8, HEADER.pack(1), "gorila-test", timeout_s=10)
            conn, (n, _) = accepted.result(timeout=10)
        assert n == 1
        sock.close()
        conn.close()
    finally:
        listener.close()


def test_shutdown_wakes_a_thread_waiting_for_a_connection():
    listener = Listener("gorila-test-transport-", "test.sock")
    woke = threading.Event()

    def wait():
        try:
            listener.socket.accept()
        except OSError:
            woke.set()

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    listener.shutdown()
    thread.join(timeout=10)
    listener.close()
    assert woke.is_set()
