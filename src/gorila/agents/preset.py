"""One named preset: a published setting for one algorithm, as ``gorila train --preset NAME`` applies it
(:mod:`gorila.agents.presets` holds them all)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gorila.envs.make import is_atari, is_minatar
from gorila.errors import ConfigError
from gorila.machine import Machine


@dataclass(frozen=True)
class Preset:
    """A published setting for one algorithm: ``gorila train --preset NAME`` fills the flags not
    given with :meth:`values` and the run names :attr:`source`::

        PRESETS["nature-dqn"].values(Machine.here())   # {"env": "ALE/Breakout-v5", "lr": 0.00025, ...}
        PRESETS["nature-dqn"].check_env("CartPole-v1")  # ConfigError: preset: ... Atari games
    """

    name: str
    algo: str
    source: str
    summary: str
    settings: Mapping[str, Any]
    family: str  # the envs it was published for: "atari", "minatar" or one env id
    note: str = ""  # what the paper leaves open, and what gorila keeps then
    scaled: Callable[[Machine], dict[str, Any]] | None = field(default=None, compare=False)

    def values(self, machine: Machine) -> dict[str, Any]:
        """The preset's settings, with its process counts scaled to ``machine``."""
        return {**self.settings, **(self.scaled(machine) if self.scaled else {})}

    def check_env(self, env: str) -> None:
        """A ``ConfigError`` naming ``preset`` unless ``env`` is of the family it was published for."""
        fits = {"atari": is_atari, "minatar": is_minatar}.get(self.family, lambda e: e == self.family)(env)
        if not fits:
            what = {"atari": "Atari games (ALE/<Game>-v5)", "minatar": "MinAtar games (MinAtar/<Game>-v1)"}.get(
                self.family, self.family)
            raise ConfigError("preset", f"{self.name} is a setting for {what}, not {env}")
