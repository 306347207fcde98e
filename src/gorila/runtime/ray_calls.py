"""Ray calls as gorila sees them: a reply on its way (:class:`RayPending`), its arrays made the
process's own (:func:`owned`), and an actor handle that travels by name (:class:`NamedActor`)."""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np

from gorila.runtime.cluster_auth import prefer_token_auth

# Must be in the environment before Ray starts: then every Ray socket binds to 127.0.0.1.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
# Ray reads RAY_AUTH_MODE once, as it is imported: a driver joining a cluster by its address sends
# the token at hand only if it is set (see cluster_auth).
prefer_token_auth(os.environ)

# Re-exported (`import ray as ray`): the runtime's modules take Ray from here, after the settings above.
import ray as ray  # noqa: E402
from ray.exceptions import GetTimeoutError  # noqa: E402

from gorila.errors import WorkerTimeoutError  # noqa: E402


def owned(value: Any) -> Any:
    """``value`` (a reply from ``ray.get``) with each numpy array Ray handed over read-only, a view
    of its store's memory, copied into this process's own, through dicts, lists and tuples.

    A view keeps Ray's buffer until the array is freed, and freeing it then tells the node's object
    store. Once the cluster has died (its head node killed), that message ends the process at once:
    Ray exits with status 1 and says why only in its log file. A driver that freed the shards'
    state just after a checkpoint, as the cluster went, ended so without a word; copied at once, the
    buffer goes back while the store is there to take it. The copy costs a memcpy of the reply.
    """
    if isinstance(value, np.ndarray):
        return value if value.flags.writeable else value.copy()
    if isinstance(value, dict):
        return {k: owned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [owned(v) for v in value]
    if type(value) is tuple:  # a named tuple would need its own class's constructor: left as it is
        return tuple(owned(v) for v in value)
    return value


@functools.cache
def _in_a_ray_actor() -> bool:
    """Whether this process is one of the run's Ray actors (its workers, shards and services)
    rather than the driver: an actor goes down with its cluster, so the views it holds can stay."""
    return ray.get_runtime_context().get_actor_id() is not None


class RayPending:
    """A reply on its way from a Ray worker. In the driver its arrays arrive as the driver's own
    (:func:`owned`); in the run's processes they stay as Ray hands them, so that a reply crossing
    nodes on a hot path (a replay sample, a pull) is not copied once more."""

    def __init__(self, ref: ray.ObjectRef, what: str):
        self.ref, self.what = ref, what

    def result(self, timeout_s: float) -> Any:
        try:
            reply = ray.get(self.ref, timeout=timeout_s)
            return reply if _in_a_ray_actor() else owned(reply)
        except GetTimeoutError as err:
            raise WorkerTimeoutError(f"{self.what} did not answer within {timeout_s:.0f} s") from err

    def ready(self) -> bool:
        done, _ = ray.wait([self.ref], timeout=0)
        return bool(done)


class NamedActor:
    """A Ray actor handle that travels by name.

    Ray keeps a restartable actor's creation arguments for its restarts; actor handles among
    them count as objects in the object store, which Ray cannot promise to keep (ray-project/ray
    issue 53727). Endpoints therefore carry the actor's name, and a copy in another process
    looks the actor up on first use. Calls go straight to the handle::

        actor = NamedActor(handle, "gorila-1a2b3c4d-shard-0")
        actor.push.remote(grad, version, worker_id, tag)
    """

    def __init__(self, handle: Any, name: str):
        self._handle, self.name = handle, name

    def __getstate__(self) -> dict:
        return {"name": self.name}

    def __setstate__(self, state: dict) -> None:
        self._handle, self.name = None, state["name"]

    @property
    def handle(self) -> Any:
        if self._handle is None:
            self._handle = ray.get_actor(self.name)
        return self._handle

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):  # copy and pickle probe dunders: not the actor's
            raise AttributeError(attr)
        return getattr(self.handle, attr)
