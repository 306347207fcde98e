"""Calls to a service process from its own node over a Unix socket, past Ray.

A Ray actor call costs the caller, Ray's core workers and the callee about a millisecond of CPU
or more each, where a service such as a trajectory queue does microseconds of work per call
(docs/benchmarks.md, "Removing downtime, stage by stage"). A call from a process on the
service's node goes instead as one message on a Unix stream socket to a
thread of the service's process, which calls the service and sends back one message: the call's
result or the error it raised. Messages are pickled (protocol 5: arrays travel as their bytes), as
Ray pickles its calls, between two processes of the same run and user: the socket lives in a
private temp dir (mode 0700) and nothing listens on a network.

Service side (:class:`~gorila.runtime.ray_processes.ServiceProcess`)::

    server = ServiceSocketServer(call=process.call)   # call(method, *args), serialised by the caller's lock
    path = server.start()                             # None where Unix sockets are missing
    server.close()

Client side (:class:`~gorila.runtime.ray_processes.RayService` on the service's node)::

    channel = ServiceSocket(path, timeout_s=30)
    reply = channel.call("take", (4, 120))            # sent now; replies come back in order
    segments = reply.result(timeout_s=30)             # the service's error raised here as itself
    channel.close()

A lost connection (the service's process died) is a :class:`SocketLost` from ``call`` or
``result``, and a reply not in within its timeout a :class:`~gorila.errors.WorkerTimeoutError`;
either closes the channel, since the stream's next message can no longer be matched to its call.

Several threads of a process may share one channel (a node's actors adding to one replay shard):
they send in turn, in the order they asked (:class:`Turns`), a whole message each, and one of
them at a time reads the stream, filing each reply for the thread that waits for it, then hands
the reading on. Without that, two threads' messages interleaved on the stream, and a thread read
the reply another was waiting for, which then waited out its whole timeout for a reply already
taken (``gorila bench menger``'s writes: replies of 10 s, then a write that never answered).
"""

from __future__ import annotations

import collections
import contextlib
import pickle
import select
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

from gorila.errors import GorilaError, WorkerTimeoutError
from gorila.transport.shm import Listener

_LENGTH = struct.Struct("<Q")
_DIR_PREFIX = "gorila-service-"
_SOCKET_NAME = "service.sock"
_OK, _RAISED = 0, 1
#: Messages shorter than this go in one write with their length; longer ones in two.
_ONE_WRITE = 1 << 16
#: How long a reply whose first bytes have arrived may take to arrive whole.
_REST_OF_A_REPLY_S = 30.0


class SocketLost(ConnectionError):
    """The connection to a service's socket failed or was closed: the call may not have been made
    (unlike a :class:`ConnectionError` the service itself raised, which comes back as itself)."""


def _send(sock: socket.socket, payload: bytes) -> None:
    header = _LENGTH.pack(len(payload))
    if len(payload) < _ONE_WRITE:
        sock.sendall(header + payload)  # a small message in one write
    else:
        sock.sendall(header)  # a large one not copied again to join its header
        sock.sendall(payload)


def _receive_exactly(sock: socket.socket, size: int) -> bytearray:
    data = bytearray(size)
    view, got = memoryview(data), 0
    while got < size:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise SocketLost("the service's socket closed")
        got += n
    return data


def _receive(sock: socket.socket) -> bytearray:
    (size,) = _LENGTH.unpack(_receive_exactly(sock, _LENGTH.size))
    return _receive_exactly(sock, size)


def _reply_payload(call: Callable[..., Any], method: str, args: tuple[Any, ...]) -> bytes:
    """The pickled reply to one call: its result, or the error it raised (or, for an error that
    cannot be pickled, a :class:`~gorila.errors.GorilaError` saying what it was)."""
    try:
        return pickle.dumps((_OK, call(method, *args)), protocol=5)
    except Exception as err:  # the service's own error: the caller raises it
        try:
            return pickle.dumps((_RAISED, err), protocol=5)
        except Exception:
            return pickle.dumps((_RAISED, GorilaError(f"{method}: {type(err).__name__}: {err}")), protocol=5)


class ServiceSocketServer:
    """Answers calls from clients on the service's node, each connection on a thread of its own,
    blocked in ``recv`` until its next call (a call wakes it at once). ``call(method, *args)`` is
    the service process's own dispatch, which serialises these calls with Ray's."""

    def __init__(self, call: Callable[..., Any]):
        self.call = call
        self._listener: Listener | None = None

    def start(self) -> str | None:
        """Listen; the socket's path, or None where this platform has no Unix sockets (or no
        temp dir that can hold one): callers then keep to Ray's calls."""
        if not hasattr(socket, "AF_UNIX"):
            return None
        try:
            self._listener = Listener(_DIR_PREFIX, _SOCKET_NAME, kind=socket.SOCK_STREAM)
        except OSError:
            return None
        threading.Thread(target=self._accept, args=(self._listener.socket,), daemon=True,
                         name="service-socket").start()
        return self._listener.path

    def close(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown()
            self._listener.close()
            self._listener = None

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True, name="service-call").start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                try:
                    method, args = pickle.loads(_receive(conn))
                except (OSError, EOFError, pickle.UnpicklingError):  # the client went away
                    return
                try:
                    _send(conn, _reply_payload(self.call, method, args))
                except OSError:
                    return


class Turns:
    """A lock that threads are given in the order they asked for it, each waiter handed it by the
    one before, so that with many threads none waits behind threads that came later::

        turns = Turns()
        if turns.take(timeout_s=30):      # False: not its turn within the timeout
            try: ...
            finally: turns.give_back()
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._waiting: collections.deque[threading.Event] = collections.deque()
        self._held = False

    def take(self, timeout_s: float) -> bool:
        with self._mutex:
            if not self._held:
                self._held = True
                return True
            turn = threading.Event()
            self._waiting.append(turn)
        if turn.wait(timeout_s):
            return True
        with self._mutex:
            if turn.is_set():  # handed over as the wait ran out: it is this thread's all the same
                return True
            self._waiting.remove(turn)
            return False

    @property
    def queued(self) -> int:
        """How many threads wait for a turn."""
        with self._mutex:
            return len(self._waiting)

    def give_back(self) -> None:
        with self._mutex:
            if self._waiting:
                self._waiting.popleft().set()  # still held: by the next thread in line
            else:
                self._held = False


class ServiceSocket:
    """One client connection (not picklable; each process makes its own), which the process's
    threads may share. Calls may be sent before earlier replies are read: the service answers them
    in order, and each reply is kept for its call until asked for."""

    def __init__(self, path: str, timeout_s: float):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.settimeout(timeout_s)
            self.sock.connect(path)
        except OSError:
            self.sock.close()
            raise
        self.timeout_s = timeout_s
        self.sent = self.read = 0
        self.replies: dict[int, tuple[int, Any]] = {}
        self.closed = False
        self._sending = Turns()
        # Guards the replies, the counts, ``closed``, who reads and who waits; never held across I/O.
        self._mutex = threading.Lock()
        self._reading = False  # a thread is reading the stream
        self._waiting: dict[int, threading.Event] = {}  # call number -> set when its reply is in or reading is free

    def call(self, method: str, args: tuple[Any, ...]) -> SocketReply:
        # A turn waits for the messages ahead of it, each going once the service has read the one
        # before it: the patience of a message's own sending for each of them.
        if not self._sending.take(self.timeout_s * (1 + self._sending.queued)):
            raise SocketLost(f"{method}: no turn to send on the service's socket")
        try:
            if self.closed:
                raise SocketLost("the service's socket was closed")
            # Pickled in its turn: one message of the process's in memory at a time, however many
            # threads wait (256 writers of 16 MB rows would hold 4 GB).
            payload = pickle.dumps((method, args), protocol=5)
            try:
                _send(self.sock, payload)
            except OSError as err:
                self.close()
                raise SocketLost(f"the service's socket failed: {err}") from err
            self.sent += 1
            return SocketReply(self, self.sent, method)
        finally:
            self._sending.give_back()

    def reply(self, number: int, timeout_s: float, what: str) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            with self._mutex:
                woken = self._waiting.get(number)
                if woken is not None:
                    woken.clear()  # looked at afresh below, under the mutex its setters hold
                if number in self.replies:
                    self._waiting.pop(number, None)
                    status, value = self.replies.pop(number)
                    break
                if self.closed:
                    self._waiting.pop(number, None)
                    raise SocketLost("the service's socket was closed")
                reads = not self._reading
                if reads:
                    self._reading = True
                elif woken is None:
                    woken = self._waiting[number] = threading.Event()
            if reads:
                try:
                    self._read_until(number, deadline, what)
                finally:
                    self._hand_on_reading()
                continue
            assert woken is not None  # made above for a thread that does not read
            if not woken.wait(max(deadline - time.monotonic(), 0.0)):
                self.close()  # a reply still on its way would answer the next call
                raise WorkerTimeoutError(f"{what} did not answer within the call's timeout")
        if status == _RAISED:
            raise value
        return value

    def has_reply(self, number: int) -> bool:
        with self._mutex:
            if number <= self.read or self.closed:  # in (and perhaps taken), or result() says why not
                return True
            if self._reading:  # another thread reads the stream: it files this reply as it comes
                return False
            self._reading = True
        try:
            if select.select([self.sock], [], [], 0)[0]:  # a reply has begun: the rest follows at once
                self._read_one(time.monotonic() + _REST_OF_A_REPLY_S, "a reply")
        except (OSError, ValueError):  # closed meanwhile: result() says so
            return True
        finally:
            self._hand_on_reading()
        with self._mutex:
            return number <= self.read or self.closed

    def _read_until(self, number: int, deadline: float, what: str) -> None:
        """Read replies, filing each for its call, until call ``number``'s is in."""
        while True:
            with self._mutex:
                if number in self.replies:
                    return
            self._read_one(deadline, what)

    def _read_one(self, deadline: float, what: str) -> None:
        if self.closed:
            raise SocketLost("the service's socket was closed")
        left = deadline - time.monotonic()
        try:
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                raise WorkerTimeoutError(f"{what} did not answer within the call's timeout")
            payload = _receive(self.sock)
        except WorkerTimeoutError:
            self.close()  # a reply still on its way would answer the next call
            raise
        except (OSError, ValueError) as err:  # ValueError: closed by another thread under select
            self.close()
            raise SocketLost(f"the service's socket failed: {err}") from err
        try:
            reply = pickle.loads(payload)
        except Exception as err:  # e.g. an error class this process cannot rebuild: said, not lost
            reply = (_RAISED, GorilaError(f"{what}: its reply could not be read: {err}"))
        with self._mutex:
            self.read += 1
            self.replies[self.read] = reply
            waiter = self._waiting.get(self.read)
            if waiter is not None:
                waiter.set()

    def _hand_on_reading(self) -> None:
        """Stop reading; wake the thread whose reply comes next, to read it (a thread whose reply is
        in already was woken for it, and goes without reading)."""
        with self._mutex:
            self._reading = False
            unanswered = [number for number in self._waiting if number not in self.replies]
            if unanswered:
                self._waiting[min(unanswered)].set()

    def close(self) -> None:
        """Close the connection; every thread waiting for a reply on it is woken to say so."""
        with self._mutex:
            if self.closed:
                return
            self.closed = True
            for waiter in self._waiting.values():
                waiter.set()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked reading or sending
        self.sock.close()


class SocketReply:
    """A :class:`~gorila.reply.Pending` for one call on a :class:`ServiceSocket`."""

    def __init__(self, channel: ServiceSocket, number: int, what: str):
        self.channel, self.number, self.what = channel, number, what

    def result(self, timeout_s: float) -> Any:
        return self.channel.reply(self.number, timeout_s, self.what)

    def ready(self) -> bool:
        return self.channel.has_reply(self.number)
