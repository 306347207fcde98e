"""A client's way to one parameter-shard process (:class:`RayShardEndpoint`): over the shard's
same-node fast path where it can, through Ray otherwise, and through Ray again for a call the
fast path lost when the shard's process died (the restarted process answers it with its restored
parameters).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gorila.errors import ShardRestartedError, WorkerTimeoutError
from gorila.params import PushResult, PushTag
from gorila.reply import ServiceEndpoint
from gorila.runtime.ray_calls import RayPending, ray
from gorila.runtime.shm import FastPathChannel, FastPending

# isort: split
# Imports Ray: after gorila.runtime.ray_calls, which sets the environment Ray reads as it is imported.
from ray.exceptions import GetTimeoutError


@dataclass(frozen=True)
class FastPathAddress:
    """Where a shard process serves clients on its own node."""

    node_id: str
    path: str
    size: int


class _Rerouted:
    """A fast-path reply that, should the shard's process die meanwhile, is answered through Ray
    instead: a push with a rejection carrying the (restored) parameters, a pull with its reply."""

    def __init__(self, pending: FastPending, endpoint: RayShardEndpoint, epoch: int):
        self.pending, self.endpoint, self.epoch = pending, endpoint, epoch

    def ready(self) -> bool:
        return self.pending.ready()

    def result(self, timeout_s: float) -> Any:
        try:
            return self.pending.result(timeout_s)
        except ShardRestartedError:
            params, version = self.endpoint.ray_pull().result(timeout_s)
        if self.pending.what == "pull":
            return params, version
        # The push is not sent again: the process that got it is gone, and so is what it applied.
        # The epoch stays the client's, unknown to a pull: its next push learns the new one.
        return PushResult("rejected", False, version, 0, "restarted", params, self.epoch)


class _Republished:
    """A publication sent over the fast path that, should the shard's process die meanwhile, is
    sent again through Ray (to the restarted process, which waits for its restore first)."""

    def __init__(self, pending: FastPending, endpoint: RayShardEndpoint, state: dict[str, np.ndarray]):
        self.pending, self.endpoint, self.state = pending, endpoint, state

    def ready(self) -> bool:
        return self.pending.ready()

    def result(self, timeout_s: float) -> None:
        try:
            self.pending.result(timeout_s)
        except ShardRestartedError:
            self.endpoint.ray_publish(self.state).result(timeout_s)


class RayShardEndpoint:
    """A client's way to one shard process (picklable: workers receive it).

    With ``fast``, a process asks the shard for its fast-path address on first use (the shard
    may still be starting: the answer waits for it) and, on the shard's node, opens a
    :class:`~gorila.runtime.shm.FastPathChannel` and sends pushes and pulls through it;
    elsewhere, or while that channel is down, calls go through Ray. A channel that broke (the
    shard's process died and was restarted) is opened again to the new process::

        endpoint.push(grad, version, worker_id, tag).result(timeout_s)   # -> PushResult
        endpoint.transport                                              # "shm" or "ray"
    """

    def __init__(self, handle: Any, shard_id: int, fast: bool = True, connect_timeout_s: float = 60.0):
        self.handle, self.shard_id, self.fast = handle, shard_id, fast
        self.fast_path: FastPathAddress | None = None
        self.connect_timeout_s = connect_timeout_s
        self._channel: FastPathChannel | None = None
        self._tried = False  # one attempt per process and shard life: a channel that failed to open is not retried
        self._closed = False

    def __getstate__(self) -> dict:
        # A channel belongs to the process that opened it; a copy elsewhere opens its own.
        return {**self.__dict__, "_channel": None, "_tried": False, "fast_path": None, "_closed": False}

    @property
    def transport(self) -> str:
        """``"shm"`` while this process's fast path is open, else ``"ray"``."""
        return "ray" if self._channel is None or self._channel.closed else "shm"

    def _fast(self) -> FastPathChannel | None:
        if self._channel is not None and self._channel.closed and not self._closed:
            self._channel, self._tried = None, False  # its process died: reach the restarted one
        if not self._tried and self.fast:
            self._tried = True
            try:
                self.fast_path = ray.get(self.handle.fast_path_address.remote(), timeout=self.connect_timeout_s)
            except GetTimeoutError as err:
                raise WorkerTimeoutError(f"shard {self.shard_id} did not start within "
                                         f"{self.connect_timeout_s:.0f} s") from err
            if self.fast_path is not None and ray.get_runtime_context().get_node_id() == self.fast_path.node_id:
                try:
                    self._channel = FastPathChannel(self.fast_path.path, self.fast_path.size, self.shard_id,
                                                    self.connect_timeout_s)
                except OSError:  # e.g. the socket is gone: the Ray calls still reach the shard
                    self._channel = None
        return None if self.transport == "ray" else self._channel

    def connect(self) -> None:
        """Look up the shard's fast path and, on its node, open the channel."""
        self._fast()

    def push(self, grad: np.ndarray, version: int, worker_id: int, tag: PushTag | None = None) -> Any:
        tag = tag or PushTag()
        channel = self._fast()
        pending = channel.push(grad, version, worker_id, tag) if channel is not None else None
        if pending is not None:
            return _Rerouted(pending, self, tag.epoch)
        return RayPending(self.handle.push.remote(grad, version, worker_id, tag), f"shard {self.shard_id} push")

    def pull(self) -> Any:
        channel = self._fast()
        pending = channel.pull() if channel is not None else None
        return _Rerouted(pending, self, 0) if pending is not None else self.ray_pull()

    def ray_pull(self) -> RayPending:
        """A pull through Ray (it waits for a restarting shard)."""
        return RayPending(self.handle.pull.remote(), f"shard {self.shard_id} pull")

    def version(self) -> RayPending:
        """The shard's version through a Ray call (no payload): a cache's probe."""
        return RayPending(self.handle.version.remote(), f"shard {self.shard_id} version")

    def wait_version(self, at_least: int, wait_s: float) -> RayPending:
        """The shard's version once it is ``at_least`` (or after ``wait_s``), answered by the
        shard process when it is reached: one Ray call, no payload."""
        return RayPending(self.handle.wait_version.remote(at_least, wait_s), f"shard {self.shard_id} wait_version")

    def subscribe(self, name: str, endpoint: ServiceEndpoint, held: int) -> RayPending:
        """Have the shard process send each new version after ``held`` to the cache at ``endpoint``."""
        return RayPending(self.handle.subscribe.remote(name, endpoint, held), f"shard {self.shard_id} subscribe")

    def state_dict(self) -> RayPending:
        """The shard's whole state (what a learner that owns the parameters starts from)."""
        return RayPending(self.handle.state_dict.remote(), f"shard {self.shard_id} state_dict")

    def publish(self, state: dict[str, np.ndarray]) -> Any:
        """Send the owning learner's publication (``--server learner``): through the fast path
        where it is open and the state fits it (the optimizer state does not), else through Ray."""
        channel = self._fast()
        pending = channel.publish(state) if channel is not None else None
        if pending is not None:  # the slot holds a copy; a publication again through Ray needs one of its own
            return _Republished(pending, self, {**state, "params": state["params"].copy()})
        return self.ray_publish(state)

    def ray_publish(self, state: dict[str, np.ndarray]) -> RayPending:
        return RayPending(self.handle.publish.remote(state), f"shard {self.shard_id} publish")

    def close(self) -> None:
        """Close this process's fast path (later calls go through Ray)."""
        self._tried = self._closed = True
        if self._channel is not None:
            self._channel.close()
