"""Field checks used by the config dataclasses; each raises :class:`ConfigError` naming the field."""

from __future__ import annotations

import math
from collections.abc import Collection
from pathlib import Path

from gorila.errors import ConfigError


def integer(field: str, value: object, *, low: int | None = None, high: int | None = None) -> None:
    """Require an ``int`` within ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(field, f"must be an integer, got {value!r}")
    _check_range(field, value, low, high)


def number(field: str, value: object, *, low: float | None = None, high: float | None = None,
           low_open: bool = False) -> None:
    """Require a finite real number within ``[low, high]`` (``(low, high]`` with ``low_open``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(field, f"must be a finite number, got {value!r}")
    if low_open and low is not None and value <= low:
        raise ConfigError(field, f"must be > {low}, got {value!r}")
    _check_range(field, value, low, high)


def choice(field: str, value: object, allowed: Collection[str]) -> None:
    """Require one of ``allowed``."""
    if value not in allowed:
        raise ConfigError(field, f"must be one of {', '.join(map(str, allowed))}; got {value!r}")


def boolean(field: str, value: object) -> None:
    """Require ``True`` or ``False`` (not a truthy string or number)."""
    if not isinstance(value, bool):
        raise ConfigError(field, f"must be True or False, got {value!r}")


def widths(field: str, value: object) -> None:
    """Require a tuple of layer widths, integers >= 1 (``hidden``)."""
    if not isinstance(value, tuple):
        raise ConfigError(field, f"must be a tuple of integers >= 1, got {value!r}")
    for width in value:
        integer(field, width, low=1)


def directory(field: str, value: object) -> None:
    """Require a non-empty path that is a directory or does not exist yet (it will be made)."""
    if not str(value).strip():
        raise ConfigError(field, "must name a directory, got an empty path")
    if Path(str(value)).exists() and not Path(str(value)).is_dir():
        raise ConfigError(field, f"{value} is a file, not a directory; choose another path")


def _check_range(field: str, value: float, low: float | None, high: float | None) -> None:
    if low is not None and value < low:
        raise ConfigError(field, f"must be >= {low}, got {value!r}")
    if high is not None and value > high:
        raise ConfigError(field, f"must be <= {high}, got {value!r}")
