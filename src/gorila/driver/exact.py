"""Exact resume on the local runtime: a checkpoint also holds the workers and services as they are,
with the driver's counters and the process's RNGs, so that ``--resume`` goes on exactly as the run
would have::

    state = WorkerState(runtime, plan, progress, message)    # the chunk loop's report keeps one
    arrays.update(state.arrays())                             # at every checkpoint
    counters = restore_workers(runtime, plan, arrays)               # --resume, once the shards are restored

A checkpoint is taken between chunks, when no worker is stepping, so what is saved is a state the
run was in: each worker whole (its envs mid-episode, its replay and n-step windows, its target
network, its RNGs, its exploration schedule and counts; the evaluator, an evaluation half-played
included), the services (replay shards, trajectory queues), the driver's :class:`Counters` (the
latest episodes' returns) and chunk pace (which cuts the budget's last chunk), and Python's,
numpy's and torch's global RNGs. The snapshot is one array of bytes, ``workers.snapshot``, among
the checkpoint's arrays: data only, a JSON tree and arrays, never pickle
(:mod:`gorila.runtime.snapshot` says what it may name). The shards' parameters, versions and
optimizer state are the checkpoint's other arrays, as on every runtime.

Only the local runtime is saved this way: a Ray run's workers live in other processes, and its
timing decides the order of pushes, so no resume could promise the same rows there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gorila.core import Runtime
from gorila.driver.chunks import Chunks
from gorila.driver.counters import Counters
from gorila.driver.plan import Plan
from gorila.driver.policy_evaluation import PolicyEvaluation
from gorila.driver.progress import Progress
from gorila.runtime.local import LocalRuntime

#: The checkpoint array that holds the snapshot's bytes.
KEY = "workers.snapshot"


@dataclass
class Restored:
    """What an exact resume gives the driver back: its counters (None: start them from the
    checkpoint's meta) and each group's chunk pace (what the budget's last chunk is cut by)."""

    counters: Counters | None = None
    pace: dict[str, Any] = field(default_factory=dict)


class WorkerState:
    """What a checkpoint of ``runtime`` adds for an exact resume (:meth:`arrays`): nothing on Ray,
    nor where the plan asks for none (``plan.snapshot``); a run whose workers cannot be saved (an
    inference server's sockets, a parameter cache in shared memory) says so once through
    ``message`` and is checkpointed as before."""

    def __init__(self, runtime: Runtime, plan: Plan, progress: Progress, chunks: Chunks,
                 message: Callable[[str], None]):
        self.runtime = runtime if isinstance(runtime, LocalRuntime) and plan.snapshot else None
        self.plan, self.progress, self.chunks, self.message = plan, progress, chunks, message

    def arrays(self) -> dict[str, np.ndarray]:
        if self.runtime is None:
            return {}
        evaluation = self.plan.evaluation
        extra = {"counters": self.progress.counters, "pace": self.chunks.pace,
                 "evaluation": evaluation.in_flight() if isinstance(evaluation, PolicyEvaluation) else {}}
        try:
            data = self.runtime.snapshot(extra)
        except (TypeError, AttributeError) as err:
            self.runtime = None
            self.message(f"the workers cannot be saved ({err}): --resume will start them afresh")
            return {}
        return {KEY: np.frombuffer(data, dtype=np.uint8)}


def restore_workers(runtime: Runtime, plan: Plan, arrays: dict[str, Any]) -> Restored:
    """With a checkpoint that holds a snapshot and a local runtime: the snapshot read back (its
    workers and services replace those the runtime would build; the RNGs set; an evaluation under
    way goes on) and what the driver saved with it; else nothing (the run resumes as from its
    shards alone)."""
    if KEY not in arrays or not isinstance(runtime, LocalRuntime):
        return Restored()
    extra = runtime.restore(np.asarray(arrays[KEY], dtype=np.uint8).tobytes())
    if isinstance(plan.evaluation, PolicyEvaluation) and extra["evaluation"]:
        plan.evaluation.resume_in_flight(extra["evaluation"])
    counters = extra["counters"]
    if not isinstance(counters, Counters):
        raise TypeError(f"the snapshot's counters are a {type(counters).__name__}")
    return Restored(counters, dict(extra["pace"]))
