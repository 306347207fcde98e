"""Row 12 of the fault matrix: a worker that stops making progress (a stalled environment) is
restarted after ``--actor-timeout-s``; the other groups are not held up meanwhile."""

import functools
import json
import os
import sys
import threading
import time

import numpy as np
import pytest

from gorila.config import RunConfig
from gorila.driver.loop import run
from gorila.driver.plan import Budget, Plan, WorkerSpec
from gorila.params import ServerSpec, UpdateRule
from hang_plans import NoEvaluation

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


class StallsOnce:
    """An actor whose first process blocks forever in its 20th step, as a hung emulator would;
    ``marker`` (created then) tells the process that replaces it not to."""

    def __init__(self, worker_id, server, *, marker):
        self.marker, self.steps = marker, 0

    def step(self):
        self.steps += 1
        if self.steps == 20 and not os.path.exists(self.marker):
            with open(self.marker, "w") as f:
                f.write(repr(time.time()))
            threading.Event().wait()  # never set

    def report(self):
        return {"env_steps": 1}


class Pushes:
    """A learner: one gradient per step; when each push was made is written to ``log`` with every report."""

    def __init__(self, worker_id, server, *, log):
        self.client = server.client(worker_id)
        self.log, self.times = log, []

    def step(self):
        self.client.params()
        self.client.push(np.ones(4, np.float32))
        self.times.append(time.time())

    def report(self):
        with open(self.log, "w") as f:
            json.dump(self.times, f)
        return {}


def test_row12_a_stalled_worker_is_restarted_and_the_learner_goes_on_meanwhile(ray_local, tmp_path):
    """Row 12 (environment stalls): the actor's chunk makes no progress; after --actor-timeout-s it
    is restarted and the run ends at its budget; the learner kept pushing while the actor hung."""
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers are this module's
    marker, log = tmp_path / "stalled", tmp_path / "pushes.json"
    plan = Plan(algo="stall", label="stall", initial_params=lambda: np.zeros(4, np.float32),
                spec=ServerSpec(UpdateRule.asynchronous()),
                groups=lambda services: [WorkerSpec("actor", functools.partial(StallsOnce, marker=str(marker)), 1),
                                         WorkerSpec("learner", functools.partial(Pushes, log=str(log)), 1)],
                evaluation=NoEvaluation(), budget=Budget(1000, "updates"), processes=2,
                chunk_steps=lambda updates: 50)
    timeout_s = 4.0
    summary = run(RunConfig(algo="stall", runtime="ray", run_dir=tmp_path / "run", actor_timeout_s=timeout_s), plan)
    assert marker.exists(), "the actor never stalled"
    stalled_at = float(marker.read_text())
    assert summary["worker_restarts"] == 1 and summary["updates"] >= 1000
    pushes = np.array(json.loads(log.read_text()))
    during = ((pushes > stalled_at) & (pushes < stalled_at + timeout_s)).sum()
    assert during > 0, "the learner waited for the stalled actor"

