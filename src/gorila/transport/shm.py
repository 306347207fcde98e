"""Shared memory between processes of one node: a client's block, handed over a Unix socket once.

A client creates an anonymous shared-memory block (``memfd``) and hands its descriptor, with a
small header saying what the block holds, to a server listening on a ``SOCK_SEQPACKET`` Unix
socket in a private temp dir (mode 0700: only this user connects; nothing listens on a network).
The server maps the block and acknowledges; from then on the two speak their own small messages
over the socket while the arrays travel through the block. The block has no name, so nothing can
leak: the kernel frees it once neither process maps it (or both died). A killed process takes its
socket with it, so the other side sees the connection close::

    listener = Listener("gorila-shard-", "shard.sock")        # server: listener.path, listener.socket
    conn, _ = listener.socket.accept()
    size, block = accept_block(conn, parse=lambda header: (int(header), 4 * int(header)))

    sock, block = connect(listener.path, 4 * size, header=str(size).encode(), name="gorila-shard-0", timeout_s=30)

Users: the parameter shards' fast path (:mod:`gorila.runtime.shm`) and central inference
(:mod:`gorila.inference.channel`). A :class:`Listener` of ``SOCK_STREAM`` serves calls whose
arguments travel in the messages themselves (:mod:`gorila.runtime.service_socket`).
"""

from __future__ import annotations

import glob
import mmap
import os
import shutil
import socket
import tempfile
from collections.abc import Callable
from typing import TypeVar

#: The largest handshake message (a header) either side reads.
HANDSHAKE_MAX = 4096
_ACK = b"\x00"
T = TypeVar("T")


def supported() -> bool:
    """Whether this platform has what the transport needs (Linux: memfd and seqpacket sockets)."""
    return hasattr(os, "memfd_create") and hasattr(socket, "SOCK_SEQPACKET") and hasattr(socket, "send_fds")


class Listener:
    """A server's listening socket, in a fresh private temp dir named ``prefix`` + random::

        listener = Listener("gorila-inference-", "inference.sock")
        listener.path              # what clients connect to
        listener.socket.accept()
        listener.close()           # the socket closed, its dir removed

    ``kind`` is the socket type (``SOCK_SEQPACKET`` for a block's small messages, ``SOCK_STREAM``
    for messages of any size). Dirs that killed processes of the same ``prefix`` left behind are removed first. An
    ``OSError`` (e.g. a temp dir path too long for a Unix socket) leaves nothing behind.
    """

    def __init__(self, prefix: str, socket_name: str, kind: int = socket.SOCK_SEQPACKET):
        tmp = tempfile.gettempdir()
        remove_stale_dirs(tmp, prefix, socket_name, kind)
        self.dir = tempfile.mkdtemp(prefix=prefix)  # mode 0700: only this user connects
        self.path = os.path.join(self.dir, socket_name)
        self.socket = socket.socket(socket.AF_UNIX, kind)
        try:
            # Bound under another name and renamed once listening, so that a socket at ``path``
            # refusing connections always means its process is gone (see remove_stale_dirs).
            self.socket.bind(self.path + ".new")
            self.socket.listen()
            os.rename(self.path + ".new", self.path)
        except OSError:
            self.close()
            raise

    def shutdown(self) -> None:
        """Wake a thread blocked in ``accept`` (it gets an ``OSError``) before :meth:`close`."""
        self.socket.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.socket.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def remove_stale_dirs(tmp: str, prefix: str, socket_name: str, kind: int = socket.SOCK_SEQPACKET) -> None:
    """Remove socket dirs left by processes (shards, inference servers) that were killed before
    they could close: their socket (of type ``kind``) refuses connections. A live one accepts the
    probe and drops it."""
    for path in glob.glob(os.path.join(tmp, prefix + "*", socket_name)):
        with socket.socket(socket.AF_UNIX, kind) as probe:
            try:
                probe.connect(path)
            except ConnectionRefusedError:
                shutil.rmtree(os.path.dirname(path), ignore_errors=True)
            except OSError:
                continue  # another user's, or gone meanwhile: not ours to judge


def connect(path: str, nbytes: int, header: bytes, name: str, timeout_s: float) -> tuple[socket.socket, mmap.mmap]:
    """Client side: connect to the server at ``path``, create a block of ``nbytes`` (``name``
    shows in ``/proc``), hand it over with ``header`` and wait for the server to acknowledge.
    The socket (its timeout ``timeout_s``) and this process's mapping of the block; any failure
    is an ``OSError`` (a refusal a ``ConnectionError``), the socket then closed."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.settimeout(timeout_s)
        sock.connect(path)
        fd = os.memfd_create(name, os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, nbytes)
            block = mmap.mmap(fd, nbytes)
            socket.send_fds(sock, [header], [fd])
        finally:
            os.close(fd)  # the mappings (this one, the server's) keep the block alive
        if sock.recv(HANDSHAKE_MAX) != _ACK:
            raise ConnectionError(f"the server at {path} refused the block")
    except OSError:  # TimeoutError included
        sock.close()
        raise
    return sock, block


def accept_block(conn: socket.socket, parse: Callable[[bytes], tuple[T, int]]) -> tuple[T, mmap.mmap]:
    """Server side, on a new connection: receive the client's header and block, map as many bytes
    of it as ``parse(header)`` says (it returns what the header means and that size, and raises
    ``ValueError`` for a header it refuses), acknowledge. The descriptor is closed once mapped.
    What the header means and the mapping; ``ValueError`` for a client that sent no block,
    ``OSError`` for a lost connection."""
    header, fds, _, _ = socket.recv_fds(conn, HANDSHAKE_MAX, 1)
    try:
        if len(fds) != 1:
            raise ValueError("a client attached without its shared-memory block")
        meaning, nbytes = parse(header)
        block = mmap.mmap(fds[0], nbytes)
    finally:
        for fd in fds:
            os.close(fd)
    conn.sendall(_ACK)
    return meaning, block
