"""Atomic file writes and the JSON form of run records (configs, summaries, checkpoint meta).

A reader never sees a half-written file: the bytes go to a temp file beside the target,
are fsynced, renamed over the target, and the directory is fsynced so the rename itself
survives a crash::

    write_json(run_dir / "summary.json", {"return": np.float32(500.0), "shape": (4, 2)})
    write_bytes(path, payload)
    jsonable({"lr": float("inf")})   # -> {"lr": "inf"}
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np


def write_bytes(path: Path, data: bytes) -> Path:
    """Replace ``path`` with ``data`` atomically; returns ``path``."""
    path = Path(path)
    # The temp name starts with the target's name so that whoever prunes files by name
    # (checkpoints by sequence number) also removes temp files a crash left behind.
    tmp = path.with_name(path.name + ".tmp")
    try:
        # A new file, never an old one opened through a link planted at the temp name (which would
        # truncate whatever it points at); the rename then replaces a link at ``path`` itself.
        tmp.unlink(missing_ok=True)
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666), "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return path


def write_json(path: Path, obj: object) -> Path:
    """Write ``jsonable(obj)`` as indented, strict JSON, atomically; returns ``path``."""
    text = json.dumps(jsonable(obj), indent=2, allow_nan=False) + "\n"
    return write_bytes(path, text.encode("utf-8"))


def fsync_dir(directory: Path) -> None:
    """Make renames and unlinks in ``directory`` durable (a no-op where directories can't be opened)."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def jsonable(obj: object, where: str = "$") -> object:
    """``obj`` as plain JSON types.

    numpy scalars and arrays become numbers and lists, tuples and sets become lists, paths
    become strings, enums their value, dataclasses dicts, and non-finite floats the strings
    ``"inf"``, ``"-inf"``, ``"nan"`` (strict JSON has no spelling for them, and
    ``float("inf")`` reads the string back). Anything else is a ``TypeError`` naming where
    in ``obj`` it sits (``$.algo.net``), rather than a silently stringified object.
    """
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, enum.Enum):
        return jsonable(obj.value, where)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj) if math.isfinite(obj) else str(obj)
    if isinstance(obj, np.generic):
        return jsonable(obj.item(), where)
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist(), where)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v, f"{where}.{k}") for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name), f"{where}.{f.name}")
                for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, (set, frozenset)):
        # Sorted so that the same set always writes the same file (configs are hashed).
        return sorted((jsonable(v, f"{where}{{}}") for v in obj), key=repr)
    raise TypeError(f"{where}: cannot store a {type(obj).__name__} in JSON ({obj!r})")
