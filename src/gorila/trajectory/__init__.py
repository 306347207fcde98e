"""Trajectories as the unit of experience: fixed-length segments and the queue between actors and learners."""

from gorila.trajectory.queue import RemoteQueue, TrajectoryQueue
from gorila.trajectory.segment import Segment

__all__ = ["RemoteQueue", "Segment", "TrajectoryQueue"]
