"""The words of a run's start-up stages on the terminal: where the run goes, and what starts side
by side (``starting Ray on this machine ...``, ``starting 1 parameter shard, 2 actors, 1 learner``)."""

from __future__ import annotations

import os

from gorila.config import RunConfig
from gorila.driver.plan import Plan, WorkerSpec
from gorila.runtime import EMBEDDED


def runtime_stage(run_config: RunConfig) -> str:
    """The stage line of the runtime's start: where the run goes, as the runtime will choose it
    (``--address``, else ``RAY_ADDRESS``, else an embedded Ray)."""
    if run_config.runtime == "local":
        return "local runtime: everything in this process"
    address, source = run_config.address, ""
    if not address and os.environ.get("RAY_ADDRESS"):
        address, source = os.environ["RAY_ADDRESS"], " (from RAY_ADDRESS)"
    if address and address != EMBEDDED:
        return f"joining the Ray cluster at {address}{source}"
    return "starting Ray on this machine (127.0.0.1 only, no dashboard)"


def processes(plan: Plan, specs: list[WorkerSpec]) -> str:
    """What starts side by side, e.g. ``1 parameter shard, 1 replay service, 4 actors, 1 learner``."""
    parts = [_count(plan.spec.num_shards, "parameter shard")]
    parts += [_count(s.count, s.name + " service") for s in plan.services]
    parts += [_count(w.count, w.name) for w in specs]
    return ", ".join(parts)


def _count(n: int, name: str) -> str:
    return f"{n} {name}{'' if n == 1 else 's'}"
