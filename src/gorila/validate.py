"""Field checks used by the config dataclasses; each raises :class:`ConfigError` naming the field."""

from __future__ import annotations

import math
import os
import reprlib
from collections.abc import Collection
from pathlib import Path

from gorila.errors import ConfigError

#: The largest integer any setting takes unless its own range is narrower: what numpy's and
#: PyTorch's 64-bit integers hold, so no count reaches them only to overflow or to be allocated.
INT_MAX = 2**63 - 1
#: An error message shows at most this many characters of a bad value (a config file's value may
#: be a megabyte of text, or a list of lists that would take gigabytes to print).
EXCERPT_CHARS = 80
#: Hidden layers: at most this many, each at most this wide (the memory a network takes is
#: estimated against the machine before a run starts; these bound the arithmetic before that).
MAX_LAYERS = 64
MAX_WIDTH = 2**20
#: The most processes of one kind (workers, actors, learners, replay shards) a run may ask for.
MAX_PROCESSES = 1024


class _Bounded(reprlib.Repr):
    """``reprlib``'s bounded repr, whose integers are never turned into their whole decimal text
    (Python refuses more than 4,300 digits, and fewer still take long to print)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxlist, self.maxtuple, self.maxdict, self.maxset = 3, 6, 6, 4, 6
        self.maxstring, self.maxother = 40, 40

    def repr_int(self, x: int, level: int) -> str:
        return _integer_text(x)


def _integer_text(value: int) -> str:
    digits = math.floor(value.bit_length() * math.log10(2)) + 1
    return repr(value) if digits <= 24 else f"an integer of about {digits:,} digits"


def excerpt(value: object) -> str:
    """``value`` as an error message shows it: its repr, cut to :data:`EXCERPT_CHARS`::

        excerpt(10**5000)          # 'an integer of about 5,001 digits'
        excerpt([[1] * 10**6])     # '[[1, 1, 1, 1, 1, 1, ...]]'
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return _integer_text(value)
    text = _Bounded().repr(value)
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS - 3] + "..."


def clipped(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``text`` as a message quotes it: its first ``limit`` characters, ``...`` after them if it goes on."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def integer(field: str, value: object, *, low: int | None = None, high: int | None = None) -> None:
    """Require an ``int`` within ``[low, high]`` (``high`` at most :data:`INT_MAX`)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(field, f"must be an integer, got {excerpt(value)}")
    _check_range(field, value, low, INT_MAX if high is None else min(high, INT_MAX))


def number(field: str, value: object, *, low: float | None = None, high: float | None = None,
           low_open: bool = False) -> None:
    """Require a finite real number within ``[low, high]`` (``(low, high]`` with ``low_open``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
        raise ConfigError(field, f"must be a finite number, got {excerpt(value)}")
    if low_open and low is not None and value <= low:
        raise ConfigError(field, f"must be > {low}, got {excerpt(value)}")
    _check_range(field, value, low, high)


def choice(field: str, value: object, allowed: Collection[str]) -> None:
    """Require one of ``allowed`` (strings: a list, say, is refused before it is looked up)."""
    if not isinstance(value, str) or value not in allowed:
        raise ConfigError(field, f"must be one of {', '.join(map(str, allowed))}; got {excerpt(value)}")


def boolean(field: str, value: object) -> None:
    """Require ``True`` or ``False`` (not a truthy string or number)."""
    if not isinstance(value, bool):
        raise ConfigError(field, f"must be True or False, got {excerpt(value)}")


def widths(field: str, value: object) -> None:
    """Require a tuple of 1 to :data:`MAX_LAYERS` layer widths, integers from 1 to :data:`MAX_WIDTH`
    (``hidden``)."""
    if not isinstance(value, tuple) or not 1 <= len(value) <= MAX_LAYERS:
        raise ConfigError(field, f"must be 1 to {MAX_LAYERS} integers from 1 to {MAX_WIDTH:,}, got {excerpt(value)}")
    for width in value:
        integer(field, width, low=1, high=MAX_WIDTH)


def directory(field: str, value: object) -> None:
    """Require a non-empty path that is a directory or does not exist yet (it will be made)."""
    if not isinstance(value, (str, os.PathLike)):
        raise ConfigError(field, f"must be a path, got {excerpt(value)}")
    if not str(value).strip():
        raise ConfigError(field, "must name a directory, got an empty path")
    if Path(str(value)).exists() and not Path(str(value)).is_dir():
        raise ConfigError(field, f"{value} is a file, not a directory; choose another path")


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float is no setting's value
        return False


def _check_range(field: str, value: float, low: float | None, high: float | None) -> None:
    if low is not None and value < low:
        raise ConfigError(field, f"must be >= {low}, got {excerpt(value)}")
    if high is not None and value > high:
        raise ConfigError(field, f"must be <= {high}, got {excerpt(value)}")
