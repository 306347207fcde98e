"""Actors: step environments with a copy of the parameters and emit experience tagged with the
``policy_version`` it was acted with (the :class:`~gorila.core.Actor` role).

``QActor``, ``QActorSpec`` and ``ReplayActor`` are loaded on first use: a config that reads
:mod:`gorila.actors.exploration` (``gorila train``'s flags) does not import torch."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from gorila.actors.exploration import ExplorationSchedule

_LAZY = {"QActor": "gorila.actors.q_actor", "QActorSpec": "gorila.actors.q_actor",
         "ReplayActor": "gorila.actors.replay_actor"}

__all__ = ["ExplorationSchedule", "QActor", "QActorSpec", "ReplayActor"]


if TYPE_CHECKING:
    # the type checker sees the names themselves, so a name not here is an error rather than `Any`
    from gorila.actors.q_actor import QActor, QActorSpec
    from gorila.actors.replay_actor import ReplayActor
else:
    def __getattr__(name: str) -> object:
        if name in _LAZY:
            return getattr(importlib.import_module(_LAZY[name]), name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
