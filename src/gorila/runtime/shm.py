"""Same-node fast path to a shard process: shared memory for the arrays, a Unix socket for control.

A client on the shard's node owns an anonymous shared-memory slot (``memfd``) of the shard's
length and hands its descriptor to the shard once, over a ``SOCK_SEQPACKET`` Unix socket in a
private temp dir (the transport of :mod:`gorila.transport.shm`). Each push is then one copy of
the gradient into the slot, a 17-byte request, the shard's update, a copy of the parameters into
the same slot (the gradient is spent by then: one slot keeps the working set small) and a small
reply: no serialization, no object store, no Ray call. The slot has no name, so nothing can leak: the kernel frees it
once both processes have unmapped it (or died). A learner that owns its parameters (``--server
learner``) *publishes* through its slot the same way: the parameters in the slot, its counters (a
few small integer arrays) in the request, and a small reply once the shard holds them.

The server answers each connection on a thread of its own, blocked in ``recv`` until the
next request: a request wakes it at once, where a shared event loop would first have to get
round to it. Threads serve the shard through a
:class:`~gorila.runtime.shard_host.ShardHost`, the lock it shares with the shard process's
Ray methods. Shard-side code (no Ray here)::

    server = FastPathServer(push=host.push, pull=host.pull, size=n)
    path = server.start()                # None where unsupported
    ...
    server.close()

Client side (what :class:`~gorila.runtime.ray_runtime.RayShardEndpoint` does on that node)::

    channel = FastPathChannel(path, size=n, shard_id=0, timeout_s=30)
    pending = channel.push(grad, version, worker_id, tag)   # None while a reply is still unread
    result = pending.result(timeout_s=30)              # PushResult; its params view the slot
    channel.publish(shard.publication(optimizer=False)).result(timeout_s=30)   # None: the slot took a copy
    channel.close()
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import struct
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import numpy as np

from gorila.errors import (
    GorilaError,
    GradientError,
    NonFiniteError,
    ShardRestartedError,
    VersionError,
    WorkerTimeoutError,
)
from gorila.params.rule import OUTCOMES
from gorila.params.shard import REASONS, PushResult, PushTag
from gorila.transport.shm import Listener, accept_block, connect, supported

R = TypeVar("R")  # what a FastPending's reply reads as

# Requests: op, version, worker id, the push's tag (epoch, client, seq, reply_params). The gradient is
# already in the slot. A publication's small arrays follow the request (see _encode_small).
_REQUEST = struct.Struct("<Bqqqqq?")
_PUSH, _PULL, _PUBLISH = 1, 2, 3
# Replies: status, outcome, reason, applied, has params, version, staleness, epoch.
_REPLY = struct.Struct("<BBBBBqqq")
_OK, _FAILED = 0, 1
_ATTACH = struct.Struct("<q")  # the slot length in float32s, the header sent with the memfd
# Errors the shard raises on purpose cross as (kind, message) and are raised again as that type.
_ERRORS = (GorilaError, GradientError, VersionError, WorkerTimeoutError, NonFiniteError)
_MAX_MESSAGE = 64 * 1024
_DIR_PREFIX = "gorila-shard-"
_SOCKET_NAME = "shard.sock"


def _slot(buffer: Any, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Two views of one mapped slot of ``size`` float32s: the gradient goes in, and once the
    shard is done reading it (the update applied or the push rejected), parameters come out."""
    return np.frombuffer(buffer, np.float32, size), np.frombuffer(buffer, np.float32, size)


def _encode_small(arrays: dict[str, np.ndarray]) -> bytes | None:
    """A publication's arrays other than its parameters (counters, stats), as data only: a JSON
    header of names, dtypes and shapes, then their bytes; None if they would not fit a message
    (an optimizer's state, as long as the parameters: that goes through Ray)."""
    header = json.dumps([[name, a.dtype.str, a.shape] for name, a in arrays.items()]).encode()
    size = 4 + len(header) + sum(a.nbytes for a in arrays.values())
    if _REQUEST.size + size > _MAX_MESSAGE or any(a.dtype.kind not in "iuf" for a in arrays.values()):
        return None
    return b"".join([struct.pack("<I", len(header)), header, *(np.ascontiguousarray(a).tobytes()
                                                               for a in arrays.values())])


def _decode_small(payload: bytes) -> dict[str, np.ndarray]:
    (length,) = struct.unpack_from("<I", payload)
    arrays, offset = {}, 4 + length
    for name, dtype, shape in json.loads(payload[4:offset]):
        kind = np.dtype(dtype)
        if kind.kind not in "iuf":
            raise ValueError(f"a publication's {name} is of {kind}: numbers only")
        count = int(np.prod(shape))
        arrays[name] = np.frombuffer(payload, kind, count, offset).reshape(shape)
        offset += count * kind.itemsize
    return arrays


def _encode_error(err: BaseException) -> bytes:
    if isinstance(err, GorilaError):  # the most specific of the types the client raises again
        kind, message = max(i for i, cls in enumerate(_ERRORS) if isinstance(err, cls)), str(err)
    else:  # a failure the shard did not decide on: keep its type's name in the message
        kind, message = 0, f"{type(err).__name__}: {err}"
    return bytes([_FAILED, kind]) + message.encode()[: _MAX_MESSAGE - 2]


class FastPathServer:
    """Serves same-node clients of one shard, each connection on a thread of its own (see the
    module doc).

    ``push(grad, version, worker_id, out=slot)`` returns a :class:`PushResult` and may block (a
    barrier push waits there for its version); ``pull(out=slot)`` returns ``(params, version)``;
    both write parameters into ``out``, the client's slot, and must be safe to call from several
    threads at once (:class:`~gorila.runtime.shard_host.ShardHost` is). The gradient they receive
    is a read-only view of that slot, valid until they return. ``publish(state)``, where given,
    takes an owning learner's publication: ``state["params"]`` is that read-only view too.
    """

    def __init__(self, push: Callable[..., PushResult], pull: Callable[..., tuple[np.ndarray, int]], size: int,
                 publish: Callable[[dict[str, np.ndarray]], None] | None = None):
        self._push, self._pull, self._publish, self.size = push, pull, publish, size
        self._listener: Listener | None = None
        self._lock = threading.Lock()  # guards the two collections below
        self._connections: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []

    def start(self) -> str | None:
        """Listen on a socket in a fresh private temp dir; its path, or None where unsupported."""
        if not supported():
            return None
        try:
            self._listener = Listener(_DIR_PREFIX, _SOCKET_NAME)
        except OSError:  # e.g. a temp dir path too long for a Unix socket: the Ray path remains
            return None
        self._spawn(self._accept, self._listener.socket)
        return self._listener.path

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop listening, drop every client connection and remove the socket and its dir.
        A thread still inside a push (a barrier wait) finds its connection gone when it returns."""
        if self._listener is not None:
            self._listener.shutdown()  # wakes the accepting thread
        with self._lock:
            for conn in self._connections:
                with contextlib.suppress(OSError):  # the client may have gone already
                    conn.shutdown(socket.SHUT_RDWR)  # wakes a thread waiting for the next request
            threads, self._threads = self._threads, []
        deadline = time.monotonic() + timeout_s
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def _spawn(self, target: Callable, *args: Any) -> None:
        # Daemon threads: a barrier wait that outlives close() must not keep the process alive.
        thread = threading.Thread(target=target, args=args, name="gorila-fast-path", daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                self._connections.add(conn)
            self._spawn(self._serve, conn)

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                grad, params = self._attach(conn)
                while request := conn.recv(_MAX_MESSAGE):
                    conn.sendall(self._answer(request, grad, params))
            except (OSError, ValueError):
                pass  # the client went away (or spoke nonsense): drop only this connection
            finally:
                with self._lock:
                    self._connections.discard(conn)

    def _attach(self, conn: socket.socket) -> tuple[np.ndarray, np.ndarray]:
        """Receive the client's slot and map it."""
        _, block = accept_block(conn, self._parse)
        grad, params = _slot(block, self.size)
        grad.flags.writeable = False  # the shard only reads the client's gradient
        return grad, params

    def _parse(self, header: bytes) -> tuple[None, int]:
        if len(header) != _ATTACH.size or _ATTACH.unpack(header)[0] != self.size:
            raise ValueError("a client attached without a block of this shard's size")
        return None, self.size * 4

    def _answer(self, request: bytes, grad: np.ndarray, params: np.ndarray) -> bytes:
        try:
            # Only a publication carries more than the request itself; anything else is refused.
            head = request[:_REQUEST.size] if request[:1] == bytes([_PUBLISH]) else request
            op, version, worker_id, epoch, client, seq, reply_params = _REQUEST.unpack(head)
            if op == _PULL:
                _, version = self._pull(out=params)
                return _REPLY.pack(_OK, 0, 0, False, True, version, 0, 0)
            if op == _PUBLISH:
                if self._publish is None:
                    raise GorilaError("this shard takes no publications")
                self._publish({"params": grad, **_decode_small(request[_REQUEST.size:])})
                return _REPLY.pack(_OK, 0, 0, False, False, version, 0, 0)
            if op != _PUSH:
                raise ValueError(f"no request {op}")
            # Fresh params land in the slot.
            result = self._push(grad, version, worker_id, out=params, tag=PushTag(epoch, client, seq, reply_params))
        except Exception as err:  # every failure goes back to the caller, typed
            return _encode_error(err)
        return _REPLY.pack(_OK, OUTCOMES.index(result.outcome), REASONS.index(result.reason), result.applied,
                           result.params is not None, result.version, result.staleness, result.epoch)


class FastPathChannel:
    """One client's connection to a shard process on its node, with its own slot.

    At most one request is in flight: :meth:`push` and :meth:`pull` return None while an
    earlier reply is unread, and the caller takes another path. A reply's ``params`` is a
    read-only view of the parameter slot, valid until the next request: copy it to keep it.
    Any transport failure or timeout closes the channel (``closed`` becomes True).
    """

    def __init__(self, path: str, size: int, shard_id: int, timeout_s: float):
        self.size, self.shard_id = size, shard_id
        self._busy = threading.Lock()
        self._sock, block = connect(path, size * 4, _ATTACH.pack(size), f"gorila-shard-{shard_id}", timeout_s)
        self._close_socket = weakref.finalize(self, self._sock.close)  # also when dropped unclosed
        grad, params = _slot(block, size)
        view = params.view()
        view.flags.writeable = False
        # None once closed: the slot is unmapped when no reply's view of it remains
        self._grad: np.ndarray | None = grad
        self._params: np.ndarray | None = view

    @property
    def closed(self) -> bool:
        return self._sock.fileno() < 0

    def push(self, grad: np.ndarray, version: int, worker_id: int, tag: PushTag = PushTag()
             ) -> FastPending[PushResult] | None:
        """Send a push. None (take another path) while busy, once closed, or for a gradient that is not
        float32 of this shard's size: the shard's own check then names the mismatch."""
        slot = self._grad
        if (slot is None or not isinstance(grad, np.ndarray) or grad.dtype != np.float32 or grad.shape != slot.shape
                or not self._busy.acquire(blocking=False)):
            return None
        np.copyto(slot, grad)
        return self._send(_REQUEST.pack(_PUSH, version, worker_id, tag.epoch, tag.client, tag.seq,
                                        tag.reply_params), "push", _pushed)

    def pull(self) -> FastPending[tuple[np.ndarray | None, int]] | None:
        """Ask for the shard's parameters and version; None while busy."""
        if not self._busy.acquire(blocking=False):
            return None
        return self._send(_REQUEST.pack(_PULL, 0, 0, 0, 0, -1, True), "pull", _pulled)

    def publish(self, state: dict[str, np.ndarray]) -> FastPending[None] | None:
        """Send an owning learner's publication: ``state["params"]`` through the slot, the other
        arrays in the request. None (take another path) while busy, once closed, or for a state that
        does not fit (parameters of another size, or arrays too large for a message: optimizer state)."""
        params = state["params"]
        small = _encode_small({k: v for k, v in state.items() if k != "params"})
        slot = self._grad
        if (slot is None or small is None or params.dtype != np.float32 or params.shape != slot.shape
                or not self._busy.acquire(blocking=False)):
            return None
        np.copyto(slot, params)
        return self._send(_REQUEST.pack(_PUBLISH, 0, 0, 0, 0, -1, False) + small, "publish", _published)

    def _send(self, request: bytes, what: str, read: Callable[[PushResult], R]) -> FastPending[R] | None:
        try:
            self._sock.send(request)
        except OSError:
            self.close()
            self._busy.release()
            return None
        return FastPending(self, what, read)

    def receive(self, timeout_s: float, what: str) -> PushResult:
        """The reply to the request in flight; frees the channel for the next one."""
        try:
            self._sock.settimeout(timeout_s)
            reply = self._sock.recv(_MAX_MESSAGE)
        except TimeoutError as err:
            self.close()  # a late reply would answer the next request: this channel is done
            raise WorkerTimeoutError(f"shard {self.shard_id} {what} did not answer within "
                                     f"{timeout_s:g} s") from err
        except OSError as err:
            self.close()
            raise ShardRestartedError(f"shard {self.shard_id} {what}: connection lost: {err}") from err
        finally:
            self._busy.release()
        if not reply:
            self.close()
            raise ShardRestartedError(f"shard {self.shard_id} closed the connection before answering {what}")
        if reply[0] == _FAILED:
            raise _ERRORS[reply[1]](reply[2:].decode())
        _, outcome, reason, applied, has_params, version, staleness, epoch = _REPLY.unpack(reply)
        return PushResult(OUTCOMES[outcome], bool(applied), version, staleness, REASONS[reason],
                          self._params if has_params else None, epoch)

    def ready(self) -> bool:
        return self.closed or bool(select.select([self._sock], [], [], 0)[0])

    def close(self) -> None:
        """Close the socket and let go of the slot: it is unmapped once no reply's ``params``
        view of it remains, and freed once the shard has dropped it too."""
        self._close_socket()
        self._grad = self._params = None


class FastPending(Generic[R]):
    """A reply on its way over a :class:`FastPathChannel` (read it once): a
    :class:`PushResult` for a push, ``(params, version)`` for a pull, None for a publication
    (``read`` turns the channel's reply into it)."""

    def __init__(self, channel: FastPathChannel, what: str, read: Callable[[PushResult], R]):
        self.channel, self.what, self.read = channel, what, read

    def result(self, timeout_s: float) -> R:
        return self.read(self.channel.receive(timeout_s, self.what))

    def ready(self) -> bool:
        return self.channel.ready()


def _pushed(reply: PushResult) -> PushResult:
    return reply


def _pulled(reply: PushResult) -> tuple[np.ndarray | None, int]:
    return reply.params, reply.version


def _published(reply: PushResult) -> None:
    return None
