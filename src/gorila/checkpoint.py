"""Atomic, checksummed checkpoints that never unpickle code.

A checkpoint is two files with the same increasing sequence number, and any exports beside them::

    ckpt-000007.safetensors         the arrays (safetensors: a header and raw bytes, no code)
    ckpt-000007.model.safetensors   an export: e.g. the network's named state_dict, for use without gorila
    ckpt-000007.json                {"sequence", "file", "bytes", "sha256", "exports", "meta"}

The arrays are written first and the JSON sidecar last, each atomically, so the sidecar is
the commit mark: a checkpoint without one, or whose arrays don't match its size and
checksum, was cut short or damaged and is skipped in favour of the one before. The sidecar
carries a checksum of its own record too (``record_sha256``, which every sidecar must have), so
one edited by hand is skipped as well, and every field of its record is checked for its type and
range. A reader refuses what it cannot use in the same way: the fields of ``meta`` it relies on
(:class:`Field`), or arrays no component reaches (``check``). Nothing here unpickles; the local
runtime's snapshot of its workers (an exact resume) rides among the arrays as bytes, under the
same checksum, and only ``--resume`` reads it, through :mod:`gorila.runtime.snapshot`'s restricted
unpickler::

    save_checkpoint(run_dir / "ckpt", {"params": flat, "replay_obs": obs}, {"step": 10_000})
    arrays, meta = load_checkpoint(run_dir / "ckpt")      # newest good one
    arrays, meta = load_checkpoint(run_dir / "ckpt",
                                   check=lambda arrays, meta: check_meta(meta, {"step": Field("count")}))
    timer = CheckpointTimer(every_s=300)
    if timer.due(): save_checkpoint(...)
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import safetensors.numpy

from gorila import validate
from gorila.atomic import NO_SPACE, free_bytes, fsync_dir, jsonable, size_text, write_bytes, write_json
from gorila.errors import CheckpointError, DiskFullError

_log = logging.getLogger(__name__)
_NAME = re.compile(r"^ckpt-(\d+)\.")
_FORMAT = "gorila-checkpoint/1"


def save_checkpoint(directory: Path, arrays: Mapping[str, np.ndarray], meta: Mapping[str, object],
                    keep: int = 2, exports: Mapping[str, Mapping[str, np.ndarray]] | None = None,
                    export_notes: Mapping[str, Mapping[str, str]] | None = None) -> Path:
    """Write the next checkpoint into ``directory`` and delete all but the newest ``keep``.

    ``meta`` must be JSON-like (numpy scalars, tuples and paths are converted, see
    :func:`gorila.atomic.jsonable`). Each of ``exports`` (name -> arrays) is written as
    ``ckpt-<sequence>.<name>.safetensors`` before the sidecar, so a complete checkpoint has them
    all; they are kept and deleted with it; ``export_notes[name]`` goes into that file's
    safetensors metadata (how to use what it holds). Returns the path of the sidecar JSON.
    """
    validate.integer("keep", keep, low=1)
    for group in (arrays, *(exports or {}).values()):
        for name, value in group.items():
            if not isinstance(name, str) or not isinstance(value, np.ndarray):
                raise TypeError(f"checkpoint arrays must map str -> numpy.ndarray; {name!r} is a "
                                f"{type(value).__name__}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    # Counting on from every file present, damaged ones included, means a name is never reused.
    sequence = max(_sequences(directory), default=0) + 1
    payload = safetensors.numpy.save({k: np.ascontiguousarray(v) for k, v in arrays.items()})
    # "pt": the tensors are a PyTorch state_dict (safetensors.torch.load_file reads them as such).
    export_payloads = {name: safetensors.numpy.save({k: np.ascontiguousarray(v) for k, v in group.items()},
                                                    metadata={**(export_notes or {}).get(name, {}), "format": "pt"})
                       for name, group in (exports or {}).items()}
    try:
        sidecar = _write(directory, sequence, payload, export_payloads, meta)
    except BaseException as err:
        # A save cut short leaves nothing of itself: no arrays without a sidecar to skip at the next
        # start, no space held on a disk that has run out of it. The checkpoints before are whole.
        for path in directory.iterdir():
            if (m := _NAME.match(path.name)) and int(m.group(1)) == sequence:
                path.unlink(missing_ok=True)
        if isinstance(err, OSError) and err.errno in NO_SPACE:  # a DiskFullError of write_bytes's, mostly
            needed = len(payload) + sum(map(len, export_payloads.values()))
            raise DiskFullError(f"no room for checkpoint {sequence} in {directory}: its files need "
                                f"{size_text(needed)}, and {size_text(free_bytes(directory))} are free there without "
                                "them. The checkpoints before it are whole", err.errno) from err
        raise
    _prune(directory, keep)
    return sidecar


def _write(directory: Path, sequence: int, payload: bytes, exports: Mapping[str, bytes],
           meta: Mapping[str, object]) -> Path:
    """The files of checkpoint ``sequence``: the arrays, the exports, then the sidecar that commits them."""
    data_path = write_bytes(directory / f"ckpt-{sequence:06d}.safetensors", payload)
    exported = {name: write_bytes(directory / f"ckpt-{sequence:06d}.{name}.safetensors", export).name
                for name, export in exports.items()}
    record = {
        "format": _FORMAT,
        "sequence": sequence,
        "file": data_path.name,
        "bytes": len(payload),
        "sha256": hashlib.sha256(payload).hexdigest(),
        "exports": exported,
        "saved_at": time.time(),
        "meta": jsonable(meta),
    }
    return write_json(directory / f"ckpt-{sequence:06d}.json", {**record, "record_sha256": _digest(jsonable(record))})


Check = Callable[[dict[str, np.ndarray], dict], None]


def load_checkpoint(directory: Path, skipped: list[str] | None = None,
                    check: Check | None = None) -> tuple[dict[str, np.ndarray], dict]:
    """The arrays and meta of the newest checkpoint in ``directory`` that verifies; why each newer
    one was refused is appended to ``skipped`` (logged as a warning without it).

    ``check(arrays, meta)`` is the reader's own judgement of a checkpoint that verifies: raising
    :class:`CheckpointError` or ``ValueError`` refuses it as a damaged one is refused (see
    :func:`check_meta`). Raises :class:`CheckpointError` when there is none, listing why each one
    was refused.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"no checkpoint directory at {directory}")
    refused = []
    for sequence in sorted(_sequences(directory), reverse=True):
        try:
            arrays, meta = _read(directory, sequence)
        except CheckpointError as err:
            refused.append(str(err))
            continue
        try:
            if check is not None:
                check(arrays, meta)
        except (CheckpointError, ValueError) as err:
            refused.append(f"ckpt-{sequence:06d}.json: {err}")
            continue
        if refused and skipped is not None:
            skipped.extend(refused)
        elif refused:
            _log.warning("using checkpoint %d; skipped newer ones: %s", sequence, "; ".join(refused))
        return arrays, meta
    if not refused:
        raise CheckpointError(f"no checkpoint in {directory}")
    raise CheckpointError(f"no usable checkpoint in {directory}: " + "; ".join(refused))


class CheckpointTimer:
    """Says when a checkpoint is due: ``every_s`` seconds after the last time it said so.

    ::

        timer = CheckpointTimer(every_s=300)
        while training:
            ...
            if timer.due():
                save_checkpoint(...)

    The clock is monotonic (wall-clock jumps don't trigger or starve checkpoints); the first
    checkpoint is due ``first_s`` after construction (default ``every_s``), so that a run can have
    one soon after it starts and the rest at its pace.
    """

    def __init__(self, every_s: float, clock: Callable[[], float] = time.monotonic, first_s: float | None = None):
        validate.number("every_s", every_s, low=0.0, low_open=True)
        self.every_s = float(every_s)
        self._clock = clock
        self._next = clock() + (self.every_s if first_s is None else float(first_s))

    def due(self) -> bool:
        """True at most once per ``every_s`` (the first time ``first_s`` in); saying so starts the
        next interval."""
        now = self._clock()
        if now < self._next:
            return False
        self._next = now + self.every_s
        return True


@dataclass(frozen=True)
class Field:
    """What a reader needs of one ``meta`` field (:func:`check_meta`)::

        Field("count")                    # an int >= 0 (not a bool)
        Field("seconds", nullable=True)   # a finite number >= 0, or None
        Field("number", nullable=True)    # a finite number, or None
        Field("mapping", fields={"best": Field("number", nullable=True)})   # a JSON object, its fields checked

    A field may be absent (older checkpoints lack newer fields; the reader supplies a default).
    """

    kind: Literal["count", "seconds", "number", "mapping"]
    nullable: bool = False
    fields: Mapping[str, Field] = field(default_factory=dict)


def check_meta(meta: Mapping[str, object], fields: Mapping[str, Field], where: str = "meta") -> None:
    """Raise ``ValueError`` naming the first field of ``meta`` that is not as ``fields`` say."""
    for name, spec in fields.items():
        if name not in meta:
            continue
        value, path = meta[name], f"{where}.{name}"
        if value is None:
            if not spec.nullable:
                raise ValueError(f"{path} is null")
            continue
        if spec.kind == "mapping":
            if not isinstance(value, dict):
                raise ValueError(f"{path} is {value!r}, not a mapping")
            check_meta(value, spec.fields, path)
            continue
        number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        if spec.kind == "count" and not (isinstance(number, int) and number >= 0):
            raise ValueError(f"{path} is {value!r}, not a count (an integer >= 0)")
        if spec.kind in ("seconds", "number") and not (number is not None and math.isfinite(number)):
            raise ValueError(f"{path} is {value!r}, not a finite number")
        if spec.kind == "seconds" and number is not None and number < 0:
            raise ValueError(f"{path} is {value!r}, not a number of seconds >= 0")


def _check_record(record: Mapping[str, object], sequence: int) -> None:
    """Every field of a sidecar's record, by type and range (``ValueError`` naming the first wrong one)."""
    stem = f"ckpt-{sequence:06d}"
    expected: dict[str, Callable[[object], bool]] = {
        "sequence": lambda v: type(v) is int and v == sequence,
        "file": lambda v: v == f"{stem}.safetensors",  # never a file elsewhere, of another kind
        "bytes": lambda v: type(v) is int and v >= 0,
        "sha256": lambda v: isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v) is not None,
        "exports": lambda v: isinstance(v, dict) and all(
            isinstance(k, str) and f == f"{stem}.{k}.safetensors" for k, f in v.items()),
        "saved_at": lambda v: (type(v) is int or type(v) is float) and math.isfinite(v) and v >= 0,
        "meta": lambda v: isinstance(v, dict),
    }
    for name, fits in expected.items():
        if name not in record:
            raise ValueError(f"its record has no {name!r}")
        if not fits(record[name]):
            raise ValueError(f"its record's {name!r} is {record[name]!r}")


def _sequences(directory: Path) -> set[int]:
    return {int(m.group(1)) for p in directory.iterdir() if (m := _NAME.match(p.name))}


def _digest(record: object) -> str:
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def _read(directory: Path, sequence: int) -> tuple[dict[str, np.ndarray], dict]:
    sidecar = directory / f"ckpt-{sequence:06d}.json"
    if not sidecar.exists():
        raise CheckpointError(f"{sidecar.name}: missing (a save cut short, or the sidecar was removed)")
    try:
        record = json.loads(sidecar.read_text(encoding="utf-8"))
        if record.get("format") != _FORMAT:
            raise ValueError(f"format {record.get('format')!r}, expected {_FORMAT!r}")
        own = record.pop("record_sha256", None)
        if own is None:
            raise CheckpointError(f"{sidecar.name}: has no record_sha256, so edits to it cannot be told "
                                  "(every sidecar gorila writes has one)")
        if own != _digest(record):
            raise CheckpointError(f"{sidecar.name}: edited after it was saved (its record fails its sha256 check)")
        _check_record(record, sequence)
        data = (directory / record["file"]).read_bytes()
        expected_bytes, expected_sha = record["bytes"], record["sha256"]
        meta = record["meta"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise CheckpointError(f"{sidecar.name}: unreadable ({type(err).__name__}: {err})") from err
    if len(data) != expected_bytes:
        raise CheckpointError(f"{sidecar.name}: {record['file']} has {len(data)} bytes, "
                              f"expected {expected_bytes} (truncated?)")
    if hashlib.sha256(data).hexdigest() != expected_sha:
        raise CheckpointError(f"{sidecar.name}: {record['file']} fails its sha256 check")
    try:
        arrays = safetensors.numpy.load(data)
    except Exception as err:  # the checksum matched, so this is a file saved broken
        raise CheckpointError(f"{sidecar.name}: {record['file']} is not valid safetensors: {err}") from err
    return arrays, meta


def _prune(directory: Path, keep: int) -> None:
    # Only checkpoints with a sidecar count towards ``keep``: leftovers of a save that
    # crashed never push a complete checkpoint out. Everything else goes, leftovers included.
    complete = sorted((s for s in _sequences(directory)
                       if (directory / f"ckpt-{s:06d}.json").exists()), reverse=True)
    kept = set(complete[:keep])
    for path in directory.iterdir():
        m = _NAME.match(path.name)
        if m and int(m.group(1)) not in kept:
            path.unlink(missing_ok=True)
    fsync_dir(directory)
