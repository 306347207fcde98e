"""How rollout workers and an inference server on one node exchange observations and actions.

A rollout worker owns an anonymous shared-memory block (``memfd``) with one *slot* per env group:
the group's observations and, once served, its actions. It hands the block's descriptor to the
server once, over a ``SOCK_SEQPACKET`` Unix socket in a private temp dir (the transport of
:mod:`gorila.runtime.shm`). Each step is then a copy of the observations into the slot and a
one-byte request; the server writes the actions into the same slot and replies with the group and
the ``policy_version`` that chose them: no serialization, no object store, no Ray call per step.
A killed process takes its socket with it, so the other side sees the connection close and the
kernel frees the block once neither maps it.

Client side (:class:`~gorila.inference.client.InferenceClient` wraps it with reconnection)::

    channel = InferenceChannel(path, SlotLayout((4, 84, 84), "uint8", (4, 4)), timeout_s=30)
    channel.send(0, obs_group0)                      # group 0's request is on its way
    actions, version = channel.receive(0)            # a copy of group 0's actions

Server side: :func:`attach` maps a connecting client's block and returns its :class:`Slots`.
"""

from __future__ import annotations

import json
import mmap
import os
import socket
import struct
import weakref
from dataclasses import dataclass

import numpy as np

from gorila.errors import GorilaError, WorkerTimeoutError
from gorila.runtime.shm import supported

REQUEST = struct.Struct("<B")     # the group whose observations are in its slot
REPLY = struct.Struct("<Bq")      # the group, and the policy_version its actions were chosen with
_OK = b"\x00"
_MAX_MESSAGE = 4096
SOCKET_NAME = "inference.sock"
DIR_PREFIX = "gorila-inference-"


@dataclass(frozen=True)
class SlotLayout:
    """One client's block: for each group of ``groups[g]`` envs, their observations then their
    int64 actions."""

    obs_shape: tuple[int, ...]
    obs_dtype: str
    groups: tuple[int, ...]

    @property
    def obs_nbytes(self) -> int:
        return int(np.prod(self.obs_shape, dtype=np.int64)) * np.dtype(self.obs_dtype).itemsize

    @property
    def nbytes(self) -> int:
        return sum(n * (self.obs_nbytes + 8) for n in self.groups)

    def encode(self) -> bytes:
        return json.dumps({"obs_shape": list(self.obs_shape), "obs_dtype": self.obs_dtype,
                           "groups": list(self.groups)}).encode()

    @classmethod
    def decode(cls, data: bytes) -> SlotLayout:
        fields = json.loads(data)
        return cls(tuple(fields["obs_shape"]), str(fields["obs_dtype"]), tuple(fields["groups"]))


class Slots:
    """Views of a mapped block: ``obs[g]`` and ``actions[g]`` for each group ``g``."""

    def __init__(self, buffer: mmap.mmap, layout: SlotLayout):
        self.buffer, self.layout = buffer, layout
        self.obs: list[np.ndarray] = []
        self.actions: list[np.ndarray] = []
        offset = 0
        for n in layout.groups:
            self.obs.append(np.frombuffer(buffer, layout.obs_dtype, n * int(np.prod(layout.obs_shape)), offset)
                            .reshape(n, *layout.obs_shape))
            offset += n * layout.obs_nbytes
            self.actions.append(np.frombuffer(buffer, np.int64, n, offset))
            offset += 8 * n


def attach(conn: socket.socket) -> Slots:
    """Server side: receive a client's layout and memfd, map it, acknowledge."""
    data, fds, _, _ = socket.recv_fds(conn, _MAX_MESSAGE, 1)
    try:
        if len(fds) != 1:
            raise ValueError("a client attached without its shared-memory block")
        layout = SlotLayout.decode(data)
        block = mmap.mmap(fds[0], layout.nbytes)
    finally:
        for fd in fds:
            os.close(fd)
    conn.sendall(_OK)
    return Slots(block, layout)


class InferenceChannel:
    """One rollout worker's connection to the inference server of its node (see the module doc).

    Any transport failure closes the channel and raises :class:`ChannelLost`; a reply that does not
    come within ``timeout_s`` is a :class:`WorkerTimeoutError`.
    """

    def __init__(self, path: str, layout: SlotLayout, timeout_s: float):
        if not supported():
            raise GorilaError("central inference needs Linux (memfd and seqpacket sockets)")
        self.layout, self.timeout_s = layout, timeout_s
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._close_socket = weakref.finalize(self, self._sock.close)
        try:
            self._sock.settimeout(timeout_s)
            self._sock.connect(path)
            fd = os.memfd_create("gorila-inference", os.MFD_CLOEXEC)
            try:
                os.ftruncate(fd, layout.nbytes)
                block = mmap.mmap(fd, layout.nbytes)
                socket.send_fds(self._sock, [layout.encode()], [fd])
            finally:
                os.close(fd)
            if self._sock.recv(_MAX_MESSAGE) != _OK:
                raise ConnectionError("the inference server refused the connection")
        except OSError as err:
            self._sock.close()
            raise ChannelLost(f"could not connect to the inference server at {path}: {err}") from err
        self.slots = Slots(block, layout)
        self._replies: dict[int, int] = {}  # replies read while waiting for another group's

    def send(self, group: int, obs: np.ndarray) -> None:
        np.copyto(self.slots.obs[group], obs)
        try:
            self._sock.send(REQUEST.pack(group))
        except OSError as err:
            self.close()
            raise ChannelLost(f"inference server gone: {err}") from err

    def receive(self, group: int) -> tuple[np.ndarray, int]:
        """Group ``group``'s actions (a copy) and the ``policy_version`` that chose them."""
        while group not in self._replies:
            try:
                reply = self._sock.recv(_MAX_MESSAGE)
            except TimeoutError as err:
                self.close()
                raise WorkerTimeoutError(f"the inference server did not answer within {self.timeout_s:g} s") from err
            except OSError as err:
                self.close()
                raise ChannelLost(f"inference server gone: {err}") from err
            if not reply:
                self.close()
                raise ChannelLost("the inference server closed the connection")
            answered, version = REPLY.unpack(reply)
            self._replies[answered] = version
        return self.slots.actions[group].copy(), self._replies.pop(group)

    @property
    def closed(self) -> bool:
        return self._sock.fileno() < 0

    def close(self) -> None:
        self._close_socket()


class ChannelLost(GorilaError):
    """The inference server's end of a channel went away (the server process died or closed)."""
