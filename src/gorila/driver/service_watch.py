"""The services' stats as a run's rows read them, and the restarts they tell (a service whose
process changed), without letting a service that is down hold the run up."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gorila.core import ServiceGroup
from gorila.errors import WorkerTimeoutError

#: How long a row waits for a service's stats: a live service answers at once, one being restarted
#: is left out of the row rather than holding the run up.
SERVICE_PATIENCE_S = 2.0


class ServiceWatch:
    """The services' latest stats, and the restarts they tell::

        watch = ServiceWatch(placed.services, logger.message)
        stats = watch.read()                 # {group name: [each service's stats]}
        watch.restarts, watch.items_lost     # services restarted, and the replay rows they lost

    A service whose ``pid`` changed was restarted: ``message`` says so, and what it lost.
    """

    def __init__(self, services: dict[str, ServiceGroup], message: Callable[[str], None]):
        self.groups, self.message = services, message
        self.last: dict[tuple[str, int], dict[str, Any]] = {}
        self.restarts = self.items_lost = 0

    def read(self) -> dict[str, list[dict[str, Any]]]:
        """Every service's stats, asked of all at once. A service that does not answer within
        ``SERVICE_PATIENCE_S`` (its process is being restarted) is represented by the last stats it
        gave, so a service that is down never holds the run up; its restart is noted once it answers."""
        asked = {name: group.stats() for name, group in self.groups.items()}
        deadline = time.monotonic() + SERVICE_PATIENCE_S
        stats: dict[str, list[dict[str, Any]]] = {}
        for name, pending in asked.items():
            for k, reply in enumerate(pending):
                try:
                    self._note(name, k, reply.result(max(0.0, deadline - time.monotonic())))
                except WorkerTimeoutError:
                    pass
            stats[name] = [self.last[(name, k)] for k in range(len(pending)) if (name, k) in self.last]
        return stats

    def _note(self, name: str, k: int, now: dict[str, Any]) -> None:
        before = self.last.get((name, k))
        if before is not None and before.get("pid") != now.get("pid"):
            self.restarts += 1
            if "size" in before:
                lost = max(0, before["size"] - now.get("restored_size", 0))
                self.items_lost += lost
                came_back = "from its last checkpoint" if now.get("restored") else "empty"
                self.message(f"{name} {k} was restarted and came back {came_back}: {lost:,} rows lost")
            else:  # a service that holds no rows (an inference server)
                self.message(f"{name} {k} was restarted")
        self.last[(name, k)] = now
