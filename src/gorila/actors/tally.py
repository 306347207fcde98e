"""What an actor has played so far, as its worker reports it to the driver."""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any

from gorila.types import Episode

#: Episodes whose returns a worker reports: the driver's ``train_return`` is the mean of the run's
#: latest 100 episodes (as published learning curves report), whichever workers played them.
RECENT_EPISODES = 100


class ExperienceTally:
    """Env steps, finished episodes, and the unclipped returns of the latest ``RECENT_EPISODES``
    episodes, counted by every kind of actor the same way::

        tally = ExperienceTally()
        tally.add(len(transitions), runner.pop_episodes())
        report = {**tally.report(), ...}    # env_steps, episodes, recent_returns
    """

    def __init__(self) -> None:
        self.env_steps = 0
        self.episodes = 0
        self.recent_returns: collections.deque[float] = collections.deque(maxlen=RECENT_EPISODES)

    def add(self, env_steps: int, episodes: Iterable[Episode] = ()) -> None:
        self.env_steps += env_steps
        for episode in episodes:
            self.episodes += 1
            self.recent_returns.append(episode.score)

    def report(self) -> dict[str, Any]:
        return {"env_steps": self.env_steps, "episodes": self.episodes, "recent_returns": list(self.recent_returns)}
