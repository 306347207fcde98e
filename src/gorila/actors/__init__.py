"""Actors: step environments with a copy of the parameters and emit experience tagged with the
``policy_version`` it was acted with (the :class:`~gorila.core.Actor` role)."""

from gorila.actors.exploration import ExplorationSchedule
from gorila.actors.q_actor import QActor, QActorSpec
from gorila.actors.replay_actor import ReplayActor

__all__ = ["ExplorationSchedule", "QActor", "QActorSpec", "ReplayActor"]
