"""The live objects of a local run as data, and back: what an exact resume restores on the local
runtime (workers with their envs mid-episode, their replay, RNGs and networks)::

    data = dumps({"workers/actor": actors, "rng": rngs}, shared={"server": server})
    snapshot = loads(data, shared={"server": new_server})
    snapshot.read("workers/actor", fresh=[factory(k) for k in range(count)])   # state into fresh ones
    snapshot.read("rng")                                                       # plain data

A snapshot is data only: a JSON tree beside the arrays it names (safetensors), never pickle. It
holds each object's class name and attributes, arrays (a view stays a view of its array, tensors
viewing one storage view one storage again), RNG states, containers and numbers. Code is never
saved: where the live objects hold a function, a class, a ``functools.partial`` or a path, the
snapshot holds a mark, and reading takes that value from ``fresh``, the same object built anew by
this run from its own settings. Reading creates objects only of classes defined in gorila,
Gymnasium, MinAtar or ``torch.nn``'s modules, without running any of their code (no
``__init__``, ``__setstate__`` or ``__reduce__``), and calls nothing a snapshot names; where a
fresh object of the same class is at the same place, its state is loaded into it (arrays and
tensors copied into its buffers), so what the fresh build shares stays shared.

``shared`` names objects that are not saved but referred to: the parameter server and its shards
(the checkpoint's arrays restore them). Locks come back as fresh locks. What cannot be saved
(a thread, a socket, a tensor off the CPU) raises ``TypeError`` naming where it was found, and a
snapshot that cannot be read raises :class:`~gorila.errors.SnapshotRefusedError` (a
``CheckpointError`` that names ``--resume``, exit 2: the run directory is refused before anything trains).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np
import safetensors.numpy

from gorila.atomic import size_text
from gorila.errors import CheckpointError, SnapshotRefusedError
from gorila.runtime.snapshot.read import Decoder
from gorila.runtime.snapshot.write import Encoder

_FORMAT = "gorila-snapshot/2"
_HEADER = struct.Struct("<Q")  # the JSON tree's length, then the tree, then the arrays
#: The most JSON tree a process of a run may need. A worker with its network and envs took 30 to 60 KB
#: (a3c, dqn, impala, ppo and apex on CartPole and MinAtar), each env of it about 4 KB more: 1 MiB
#: leaves room for hundreds of envs a worker. A tree is parsed into Python objects of about 16 times its
#: size, so a crafted one (145 MB of rows nothing refers to: 2.3 GB parsed) is refused unread.
TREE_BYTES_PER_PROCESS = 1 << 20


def dumps(parts: Mapping[str, Any], shared: Mapping[str, Any]) -> bytes:
    """``parts`` (name -> objects) as bytes; the objects in ``shared`` are referred to by name, not
    saved. Raises ``TypeError`` for what cannot be saved, naming where it was found."""
    encoder = Encoder(shared)
    tree = {"format": _FORMAT, "parts": {name: encoder.encode(value, name) for name, value in parts.items()},
            "table": encoder.table}
    text = json.dumps(tree, separators=(",", ":")).encode()
    return _HEADER.pack(len(text)) + text + safetensors.numpy.save(encoder.arrays)


def loads(data: bytes, shared: Mapping[str, Any], processes: int | None = None) -> Snapshot:
    """The snapshot in ``data``, to read part by part (:meth:`Snapshot.read`); with ``processes``
    (the run's), refused unread where its tree is larger than they could need
    (:data:`TREE_BYTES_PER_PROCESS` each)."""
    try:
        (length,) = _HEADER.unpack_from(data)
    except struct.error as err:
        raise _refused(f"cannot be read: {err}") from err
    if processes is not None and length > (limit := TREE_BYTES_PER_PROCESS * max(processes, 1)):
        raise _refused(f"has a tree of {size_text(length)}, more than this run's {processes} processes could need "
                       f"({size_text(limit)}: {size_text(TREE_BYTES_PER_PROCESS)} each)")
    try:
        tree = json.loads(data[_HEADER.size:_HEADER.size + length])
        arrays = safetensors.numpy.load(data[_HEADER.size + length:])
    except Exception as err:  # whatever a damaged file raises, it is named as damaged
        raise _refused(f"cannot be read: {type(err).__name__}: {err}") from err
    if not isinstance(tree, dict) or tree.get("format") != _FORMAT:
        raise _refused(f"is not a {_FORMAT} snapshot")
    return Snapshot(tree, arrays, shared)


def _refused(why: str) -> SnapshotRefusedError:
    return SnapshotRefusedError("resume", f"the workers' snapshot in the checkpoint resumed from {why}; it was "
                                          "damaged or crafted, and nothing it names was run. Move that checkpoint "
                                          "aside to resume from the one before, or start a new run")


class Snapshot:
    """A snapshot read back, its parts decoded one at a time and joined to one another (an object
    two parts share is one object)::

        snapshot = loads(data, shared)
        if "workers/learner" in snapshot: workers = snapshot.read("workers/learner", fresh=built)
    """

    def __init__(self, tree: dict[str, Any], arrays: dict[str, np.ndarray], shared: Mapping[str, Any]):
        parts, table = tree.get("parts"), tree.get("table")
        if not isinstance(parts, dict) or not isinstance(table, list):
            raise _refused("has no parts or no table")
        self._parts: dict[str, Any] = parts
        self._decoder = Decoder(table, arrays, shared)

    def __contains__(self, name: str) -> bool:
        return name in self._parts

    def read(self, name: str, fresh: Any = None) -> Any:
        """Part ``name``; where ``fresh`` (the same objects built anew) has an object of the saved
        class at the same place, the state is loaded into it and it is returned."""
        try:
            return self._decoder.decode(self._parts[name], fresh, name)
        except CheckpointError as err:  # what the decoder refuses, by name
            raise _refused(f"is refused ({err})") from err
        except Exception as err:  # a crafted or damaged tree fails by name, whatever it trips
            raise _refused(f"cannot be read at {name}: {type(err).__name__}: {str(err)[:200]}") from err
