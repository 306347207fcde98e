"""How old the parameters an actor reads are: versions and seconds behind the learner.

The learner notes when each version it made became the server's (its push's reply); each read
notes when it ended and the version it got::

    published = [(t0, 4), (t1, 5), (t2, 6)]            # the learner's versions, oldest first
    versions, seconds = parameter_age(published, read_at, read_versions)
    versions.mean(), np.percentile(seconds, 99)

A read at time ``t`` of version ``r`` is ``V - r`` versions behind, ``V`` the newest version
published by ``t``, and ``t - p`` seconds behind, ``p`` when the version after ``r`` was published
(0 for a read of the newest). Times are ``time.time()`` of every process: comparable on one
machine, and across a cluster only as well as its clocks agree.
"""

from __future__ import annotations

import numpy as np


def parameter_age(published: list[tuple[float, int]], read_at: np.ndarray,
                  versions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per read, the versions and seconds it was behind the learner (see the module doc).
    ``published`` is in the order the versions were made; reads before its first entry are
    measured against it."""
    if not published:
        raise ValueError("no version published: nothing to measure the reads' age against")
    times = np.array([t for t, _ in published], float)
    made = np.array([v for _, v in published], np.int64)
    newest = made[np.maximum(np.searchsorted(times, read_at, side="right") - 1, 0)]
    behind = np.maximum(newest - versions, 0)
    # when the version after the one read was published: the first entry above it
    after = np.minimum(np.searchsorted(made, versions, side="right"), len(made) - 1)
    seconds = np.where(behind > 0, np.maximum(read_at - times[after], 0.0), 0.0)
    return behind, seconds
