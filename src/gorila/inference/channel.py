"""How rollout workers and the run's inference server, on one node, exchange observations and actions.

A rollout worker owns an anonymous shared-memory block (``memfd``) with one *slot* per env group:
the group's observations and, once served, its actions. It hands the block's descriptor to the
server once, over a ``SOCK_SEQPACKET`` Unix socket in a private temp dir (the transport of
:mod:`gorila.transport.shm`). Each step is then a copy of the observations into the slot and a
one-byte request; the server writes the actions into the same slot and replies with the group and
the ``policy_version`` that chose them: no serialization, no object store, no Ray call per step.
A killed process takes its socket with it, so the other side sees the connection close and the
kernel frees the block once neither maps it.

Client side (:class:`~gorila.inference.client.InferenceClient` wraps it with reconnection)::

    channel = InferenceChannel(path, SlotLayout((4, 84, 84), "uint8", (4, 4)), timeout_s=30)
    channel.send(0, obs_group0)                      # group 0's request is on its way
    actions, version = channel.receive(0)            # a copy of group 0's actions
    actions, log_probs, version = channel.receive_sampled(1)  # ... with log pi(a|x) of each (float32)

A recurrent policy's layout has a ``state_shape``: each request also says which observations
begin an episode (``starts``), and the server keeps each env's core state, writing beside the
actions the state it carried into the step (``core_state``, before the starts' resets).

Server side: :func:`listen` opens the socket, :func:`attach` maps a connecting client's block and
returns its :class:`Slots`.
"""

from __future__ import annotations

import json
import mmap
import socket
import struct
import weakref
from dataclasses import dataclass

import numpy as np

from gorila.errors import GorilaError, WorkerTimeoutError
from gorila.transport.shm import Listener, accept_block, connect, supported

REQUEST = struct.Struct("<B")     # the group whose observations are in its slot
REPLY = struct.Struct("<Bq")      # the group, and the policy_version its actions were chosen with
_MAX_MESSAGE = 4096
_SOCKET_NAME = "inference.sock"
_DIR_PREFIX = "gorila-inference-"


@dataclass(frozen=True)
class SlotLayout:
    """One client's block: for each group of ``groups[g]`` envs, their observations, their actions
    (an int64 index each, or with ``action_shape`` a float32 vector each: a Gaussian policy's), then
    the float32 log-probability of each action under the policy that chose it; with ``state_shape``
    (a recurrent policy's, one env's core state) then a start flag (a byte) and a float32 core state
    for each env."""

    obs_shape: tuple[int, ...]
    obs_dtype: str
    groups: tuple[int, ...]
    action_shape: tuple[int, ...] = ()
    action_dtype: str = "<i8"
    state_shape: tuple[int, ...] = ()

    @property
    def state_nbytes(self) -> int:
        """An env's start flag and core state (none without ``state_shape``)."""
        return 1 + 4 * int(np.prod(self.state_shape, dtype=np.int64)) if self.state_shape else 0

    @property
    def obs_nbytes(self) -> int:
        return int(np.prod(self.obs_shape, dtype=np.int64)) * np.dtype(self.obs_dtype).itemsize

    @property
    def action_nbytes(self) -> int:
        return int(np.prod(self.action_shape, dtype=np.int64)) * np.dtype(self.action_dtype).itemsize

    @property
    def nbytes(self) -> int:
        return sum(n * (self.obs_nbytes + self.action_nbytes + 4 + self.state_nbytes) for n in self.groups)

    def encode(self) -> bytes:
        return json.dumps({"obs_shape": list(self.obs_shape), "obs_dtype": self.obs_dtype,
                           "groups": list(self.groups), "action_shape": list(self.action_shape),
                           "action_dtype": self.action_dtype, "state_shape": list(self.state_shape)}).encode()

    @classmethod
    def decode(cls, data: bytes) -> SlotLayout:
        fields = json.loads(data)
        return cls(tuple(fields["obs_shape"]), str(fields["obs_dtype"]), tuple(fields["groups"]),
                   tuple(fields["action_shape"]), str(fields["action_dtype"]), tuple(fields["state_shape"]))


class Slots:
    """Views of a mapped block: ``obs[g]``, ``actions[g]`` and ``log_probs[g]`` for each group ``g``
    (and a recurrent policy's ``starts[g]`` and ``core_state[g]``)."""

    def __init__(self, buffer: mmap.mmap, layout: SlotLayout):
        self.buffer, self.layout = buffer, layout
        self.obs: list[np.ndarray] = []
        self.actions: list[np.ndarray] = []
        self.log_probs: list[np.ndarray] = []
        self.starts: list[np.ndarray] = []
        self.core_state: list[np.ndarray] = []
        state_size = int(np.prod(layout.state_shape, dtype=np.int64))
        offset = 0
        for n in layout.groups:
            self.obs.append(np.frombuffer(buffer, layout.obs_dtype, n * int(np.prod(layout.obs_shape)), offset)
                            .reshape(n, *layout.obs_shape))
            offset += n * layout.obs_nbytes
            size = n * int(np.prod(layout.action_shape, dtype=np.int64))
            self.actions.append(np.frombuffer(buffer, layout.action_dtype, size, offset)
                                .reshape(n, *layout.action_shape))
            offset += n * layout.action_nbytes
            self.log_probs.append(np.frombuffer(buffer, np.float32, n, offset))
            offset += 4 * n
            if layout.state_shape:
                self.core_state.append(np.frombuffer(buffer, np.float32, n * state_size, offset)
                                       .reshape(n, *layout.state_shape))
                offset += 4 * n * state_size
                self.starts.append(np.frombuffer(buffer, np.bool_, n, offset))
                offset += n


def listen() -> Listener:
    """Server side: the socket rollout workers connect to, in a fresh private temp dir."""
    return Listener(_DIR_PREFIX, _SOCKET_NAME)


def attach(conn: socket.socket) -> Slots:
    """Server side: receive a client's layout and block, map it, acknowledge."""
    layout, block = accept_block(conn, _parse)
    return Slots(block, layout)


def _parse(header: bytes) -> tuple[SlotLayout, int]:
    layout = SlotLayout.decode(header)
    return layout, layout.nbytes


class InferenceChannel:
    """One rollout worker's connection to the run's inference server (see the module doc).

    Any transport failure closes the channel and raises :class:`ChannelLost`; a reply that does not
    come within ``timeout_s`` is a :class:`WorkerTimeoutError`.
    """

    def __init__(self, path: str, layout: SlotLayout, timeout_s: float):
        if not supported():
            raise GorilaError("central inference needs Linux (memfd and seqpacket sockets)")
        self.layout, self.timeout_s = layout, timeout_s
        try:
            self._sock, block = connect(path, layout.nbytes, layout.encode(), "gorila-inference", timeout_s)
        except OSError as err:
            raise ChannelLost(f"could not connect to the inference server at {path}: {err}") from err
        self._close_socket = weakref.finalize(self, self._sock.close)
        self.slots = Slots(block, layout)
        self._replies: dict[int, int] = {}  # replies read while waiting for another group's

    def send(self, group: int, obs: np.ndarray, starts: np.ndarray | None = None) -> None:
        np.copyto(self.slots.obs[group], obs)
        if starts is not None:
            np.copyto(self.slots.starts[group], starts)
        try:
            self._sock.send(REQUEST.pack(group))
        except OSError as err:
            self.close()
            raise ChannelLost(f"inference server gone: {err}") from err

    def receive(self, group: int) -> tuple[np.ndarray, int]:
        """Group ``group``'s actions (a copy) and the ``policy_version`` that chose them."""
        actions, _, version = self.receive_sampled(group)
        return actions, version

    def receive_sampled(self, group: int) -> tuple[np.ndarray, np.ndarray, int]:
        """Group ``group``'s actions, their log-probabilities (copies) and the ``policy_version``."""
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
        return self.slots.actions[group].copy(), self.slots.log_probs[group].copy(), self._replies.pop(group)

    @property
    def closed(self) -> bool:
        return self._sock.fileno() < 0

    def close(self) -> None:
        self._close_socket()


class ChannelLost(GorilaError):
    """The inference server's end of a channel went away (the server process died or closed)."""
