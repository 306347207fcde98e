"""When a learner's target network follows the server's parameters: a value object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

import numpy as np

from gorila.errors import ConfigError


@dataclass(frozen=True)
class TargetUpdate:
    """``hard`` copies the parameters every ``value`` *global* updates (Gorila); ``soft`` moves the
    target by τ = ``value`` toward them at every new version::

        TargetUpdate.parse("hard:200")          # the CLI's spelling, parsed once at the edge
        TargetUpdate.soft(0.005)
        target = TargetUpdate.hard(200).follow(target, target_version, params, version)
    """

    kind: Literal["hard", "soft"]
    value: float

    def __post_init__(self) -> None:
        valid = ((self.kind == "hard" and self.value >= 1 and self.value == int(self.value))
                 or (self.kind == "soft" and 0 < self.value <= 1))
        if not valid:
            raise ConfigError("target_update", f"must be hard:N (N >= 1 global updates) or soft:TAU "
                                               f"(0 < TAU <= 1), got {self}")

    @classmethod
    def hard(cls, every: int) -> TargetUpdate:
        return cls("hard", every)

    @classmethod
    def soft(cls, tau: float) -> TargetUpdate:
        return cls("soft", tau)

    @classmethod
    def parse(cls, text: str) -> TargetUpdate:
        """``"hard:500"`` or ``"soft:0.01"``; anything else is a ``ConfigError`` naming the flag."""
        kind, _, value = str(text).partition(":")
        try:
            number = float(value)
        except ValueError:
            raise ConfigError("target_update", f"must be hard:N or soft:TAU, got {text!r}") from None
        checked_kind = cast(Literal["hard", "soft"], kind)  # __post_init__ refuses any other
        return cls(checked_kind, int(number) if kind == "hard" and number.is_integer() else number)

    def __str__(self) -> str:
        return f"{self.kind}:{self.value:g}"

    def follow(self, target: np.ndarray | None, target_version: int, params: np.ndarray,
               version: int) -> tuple[np.ndarray, int] | None:
        """The new ``(target, target_version)`` for server ``params`` at ``version``, or None when
        the target stays as it is. The first call starts the target at ``params``."""
        if target is None:
            return params.copy(), version
        if version == target_version:
            return None
        if self.kind == "hard":
            return (params.copy(), version) if version - target_version >= self.value else None
        from gorila.nets.flat import soft_update  # here: the config that reads this module imports no torch

        return soft_update(target, params, self.value), version
