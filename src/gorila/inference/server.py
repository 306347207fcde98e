"""The run's inference server: batches the observations of its rollout workers, answers with actions.

It is a service (one per run, on one node: its rollout workers share that node, see
:func:`gorila.agents.kit.inference_service`): built in its process from a small factory with the
parameter server, it listens on a Unix socket (see :mod:`gorila.inference.channel`) and serves on
a thread of its own, so nothing needs to step it::

    factory = functools.partial(InferenceServer, policy=functools.partial(GreedyQPolicy, network_fn),
                                rule=BatchingRule(64, 0.002), refresh_every=50)
    inference = factory(0, server=parameter_server)
    inference.address()          # the socket path rollout workers connect to
    inference.stats()            # batches, observations, mean batch, dropped, version
    inference.close()

One thread waits on every connection at once: it adds each request to a
:class:`~gorila.inference.batching.BatchQueue`, never blocks past the queue's deadline, runs the
policy on the whole batch, writes each request's actions (and their log-probabilities) into its
own slot and replies with the ``policy_version`` used. Every ``refresh_every`` batches it pulls
the newest parameters from its ParamSource. A client whose connection closes (its process died) is
forgotten with the requests it had waiting. A restarted server listens on a new path; rollout workers ask for it again.

With a recurrent policy (a :class:`RecurrentInferencePolicy`, ``--core lstm``) the server keeps
each env's core state, as SEED RL's server does: one array per client and group, zero when the
client connects, zeroed where a request says an episode begins, advanced by every answer; beside
the actions it writes the states it carried into the step, which the client's segments start
from. A restarted server's envs start again from zero.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from gorila.errors import WorkerTimeoutError
from gorila.inference.batching import BatchingRule, BatchQueue
from gorila.inference.channel import REPLY, REQUEST, Slots, attach, listen
from gorila.params import ParameterServer

#: ParameterClient ids of inference servers, apart from the workers' (only ever used to pull).
WORKER_ID_BASE = 1_000_000
_IDLE_S = 0.5  # how often an idle loop looks whether it was closed


class InferencePolicy(Protocol):
    """What the server runs: parameters in, a batch of observations to int64 actions::

        policy.load(flat_params)
        actions = policy(obs)                # (B, *obs_shape) -> (B,): a deterministic policy
        actions, log_probs = policy(obs)     # a stochastic one: and log pi(a|x) of each, (B,)

    The log-probabilities travel back with the actions (IMPALA's and PPO's segments carry them); a
    deterministic policy's are 0, the log of the probability it gives its own choice.
    """

    def load(self, params: np.ndarray) -> None: ...
    def __call__(self, obs: np.ndarray) -> np.ndarray | tuple[np.ndarray, np.ndarray]: ...


@runtime_checkable
class RecurrentInferencePolicy(Protocol):
    """A policy with memory: each env's core state (``state_shape``) goes in and comes out::

        actions, log_probs, state = policy(obs, state, starts)   # starts (B,) bool: zero those states first
    """

    state_shape: tuple[int, ...]

    def load(self, params: np.ndarray) -> None: ...
    def __call__(self, obs: np.ndarray, state: np.ndarray,
                 starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


class _Client:
    def __init__(self, conn: socket.socket, slots: Slots):
        self.conn, self.slots = conn, slots
        # a recurrent policy's core state of each env, per group
        self.states = [np.zeros((n, *slots.layout.state_shape), np.float32) for n in slots.layout.groups]


@dataclass(frozen=True)
class _Request:
    client: _Client
    group: int


class InferenceServer:
    """The run's batched policy, served to its rollout workers (see the module doc)."""

    def __init__(self, service_id: int, server: ParameterServer, *,
                 policy: Callable[[], InferencePolicy | RecurrentInferencePolicy],
                 rule: BatchingRule, refresh_every: int, clock: Callable[[], float] = time.monotonic):
        self.policy = policy()
        self.source = server.client(WORKER_ID_BASE + service_id)
        self.rule, self.refresh_every = rule, refresh_every
        self.queue = BatchQueue(rule, clock)
        self.version = -1
        self._refresh()  # a (re)started server serves the newest parameters from its first batch
        self.batches = self.observations = self.dropped = self.clients_lost = 0
        self.bytes_observations = self.bytes_actions = 0  # the traffic through the clients' slots
        self._since_refresh = 0
        self._clients: set[_Client] = set()
        self._listener = listen()
        self._wake_r, self._wake_w = socket.socketpair()
        self._closing = False
        self._changed = threading.Condition()  # notified after every round of the serving loop
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="gorila-inference", daemon=True)
        self._thread.start()

    def address(self) -> str:
        """The socket path rollout workers (on this node) connect to."""
        if self.error is not None:
            raise self.error
        return self._listener.path

    def stats(self) -> dict[str, Any]:
        """Cumulative counters since this server started (``pid`` tells a restarted one): batches
        served, observations, their mean batch, observations of departed clients dropped unserved,
        clients lost, the version served now, and the bytes of observations read and actions written."""
        return {"pid": os.getpid(), "batches": self.batches, "observations": self.observations,
                "mean_batch": self.observations / max(self.batches, 1), "dropped": self.dropped,
                "clients": len(self._clients), "clients_lost": self.clients_lost, "version": self.version,
                "bytes_observations": self.bytes_observations, "bytes_actions": self.bytes_actions}

    def wait_stats(self, condition: Callable[[dict[str, Any]], bool], timeout_s: float) -> dict[str, Any]:
        """Tools and tests: block until ``condition(stats())`` holds (checked after every round of
        the serving loop); the stats, or :class:`WorkerTimeoutError` after ``timeout_s``."""
        with self._changed:
            if not self._changed.wait_for(lambda: condition(self.stats()), timeout_s):
                raise WorkerTimeoutError(f"inference server stats {self.stats()} not reached within {timeout_s:g} s")
        return self.stats()

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop serving; every client's connection closes."""
        if self._closing:
            return
        self._closing = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._thread.join(timeout_s)
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()

    def _refresh(self) -> None:
        self.policy.load(self.source.pull())
        self.version = self.source.version

    def _serve(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._listener.socket, selectors.EVENT_READ, "listener")
        selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        try:
            while not self._closing:
                timeout = self.queue.timeout()
                for key, _ in selector.select(_IDLE_S if timeout is None else timeout):
                    if key.data == "listener":
                        self._accept(selector)
                    elif isinstance(key.data, _Client):
                        self._read(selector, key.data)
                while self.queue.ready():
                    self._answer(selector, self.queue.take())
                with self._changed:
                    self._changed.notify_all()
        except BaseException as err:  # kept for address() and stats() to raise
            self.error = err
        finally:
            for client in list(self._clients):
                self._forget(selector, client, lost=False)
            selector.close()

    def _accept(self, selector: selectors.BaseSelector) -> None:
        conn, _ = self._listener.socket.accept()
        try:
            conn.settimeout(10.0)  # the client sends its block right after connecting
            slots = attach(conn)
        except (OSError, ValueError):
            conn.close()
            return
        conn.setblocking(False)
        client = _Client(conn, slots)
        self._clients.add(client)
        selector.register(conn, selectors.EVENT_READ, client)

    def _read(self, selector: selectors.BaseSelector, client: _Client) -> None:
        while True:
            try:
                data = client.conn.recv(REQUEST.size)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:  # its process is gone: so are the requests it had waiting
                self._forget(selector, client, lost=True)
                return
            (group,) = REQUEST.unpack(data)
            self.queue.add(_Request(client, group), len(client.slots.obs[group]))

    def _forget(self, selector: selectors.BaseSelector, client: _Client, lost: bool) -> None:
        if client not in self._clients:
            return
        self.dropped += self.queue.drop(lambda request: request.client is client)
        self.clients_lost += lost
        self._clients.discard(client)
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(client.conn)
        client.conn.close()

    def _answer(self, selector: selectors.BaseSelector, batch: list[_Request]) -> None:
        if self._since_refresh >= self.refresh_every:
            self._refresh()
            self._since_refresh = 0
        obs = [r.client.slots.obs[r.group] for r in batch]
        joined = obs[0] if len(obs) == 1 else np.concatenate(obs)
        if isinstance(self.policy, RecurrentInferencePolicy):
            actions, log_probs = self._recurrent(self.policy, joined, batch)
        else:
            chosen = self.policy(joined)
            actions, log_probs = chosen if isinstance(chosen, tuple) else (chosen, np.zeros(len(chosen), np.float32))
        self.batches += 1
        self._since_refresh += 1
        self.observations += len(actions)
        self.bytes_observations += sum(o.nbytes for o in obs)
        self.bytes_actions += actions.nbytes
        start = 0
        for request in batch:
            n = len(request.client.slots.obs[request.group])
            request.client.slots.actions[request.group][:] = actions[start:start + n]
            request.client.slots.log_probs[request.group][:] = log_probs[start:start + n]
            start += n
            try:
                request.client.conn.send(REPLY.pack(request.group, self.version))
            except OSError:
                self._forget(selector, request.client, lost=True)

    @staticmethod
    def _recurrent(policy: RecurrentInferencePolicy, obs: np.ndarray,
                   batch: list[_Request]) -> tuple[np.ndarray, np.ndarray]:
        """The batch's actions and log-probabilities from each env's core state, which the answer
        advances; each slot gets the states carried into the step."""
        carried = [r.client.states[r.group] for r in batch]
        starts = [r.client.slots.starts[r.group] for r in batch]
        actions, log_probs, after = policy(obs, np.concatenate(carried), np.concatenate(starts))
        start = 0
        for request, state in zip(batch, carried):
            np.copyto(request.client.slots.core_state[request.group], state)
            request.client.states[request.group] = after[start:start + len(state)]
            start += len(state)
        return actions, log_probs
