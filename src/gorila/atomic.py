"""Atomic file writes and the JSON form of run records (configs, summaries, checkpoint meta).

A reader never sees a half-written file: the bytes go to a temp file beside the target,
are fsynced, renamed over the target, and the directory is fsynced so the rename itself
survives a crash::

    write_json(run_dir / "summary.json", {"return": np.float32(500.0), "shape": (4, 2)})
    write_bytes(path, payload)
    jsonable({"lr": float("inf")})   # -> {"lr": "inf"}

A write that finds no space (``ENOSPC``, ``EDQUOT``) raises :class:`~gorila.errors.DiskFullError`
naming the file, what it needed and what was free, and leaves no temp file behind.
"""

from __future__ import annotations

import dataclasses
import enum
import errno
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from gorila.errors import DiskFullError


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
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError) and (full := disk_full(err, path, len(data))) is not None:
            raise full from err
        raise
    fsync_dir(path.parent)
    return path


#: What a write that finds no room fails with: no space on the device, or the user's disk quota reached.
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def disk_full(err: OSError, path: Path, needed: int) -> DiskFullError | None:
    """The :class:`DiskFullError` that ``err`` means for a write of ``needed`` bytes to ``path``
    (with the space then free on its file system), or None where ``err`` is not a want of space."""
    if err.errno not in NO_SPACE:
        return None
    return DiskFullError(f"no room for {path} ({err.strerror}): writing it needs {size_text(needed)}, and "
                         f"{size_text(free_bytes(Path(path).parent))} are free there", err.errno)


def free_bytes(directory: Path) -> int:
    """The bytes an unprivileged writer may still put on ``directory``'s file system (0 where it cannot be told)."""
    try:
        info = os.statvfs(directory)
    except OSError:
        return 0
    return info.f_bavail * info.f_frsize


def size_text(size: int) -> str:
    """``size`` bytes as a person reads them: ``"312 bytes"``, ``"4.2 KB"``, ``"2.1 MB"``, ``"1.3 GB"``."""
    if size < 1000:
        return f"{size:,} bytes"
    for power, unit in enumerate(("KB", "MB", "GB"), start=1):
        if size < 1000 ** (power + 1):
            return f"{size / 1000 ** power:.1f} {unit}"
    return f"{size / 1000 ** 4:.1f} TB"


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
