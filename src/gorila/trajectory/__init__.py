"""Trajectories as the unit of experience: fixed-length segments and the queue between actors and learners."""

from gorila.trajectory.queue import RemoteQueue, TrajectoryQueue

__all__ = ["RemoteQueue", "TrajectoryQueue"]
