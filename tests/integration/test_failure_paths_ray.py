"""Issue 32, item 3, on Ray: a worker that cannot be restarted ends the run, and the run still
writes a final checkpoint and a full summary.json saying why."""

import functools
import sys

import pytest

from gorila.config import RunConfig
from gorila.driver.loop import run
from hang_plans import DiesForGood, Pushes, plan, saved

pytestmark = [pytest.mark.integration, pytest.mark.heavy, pytest.mark.timeout(300)]


def test_a_worker_that_cannot_be_restarted_ends_the_run_with_everything_saved(ray_local, tmp_path):
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules["hang_plans"])
    learner = functools.partial(DiesForGood, marker=str(tmp_path / "started"))
    killed = []

    def kill_once(placed):
        if not killed:
            placed.groups["learner"].kill(0)
            killed.append(True)

    with pytest.raises(Exception, match="cannot start again"):
        run(RunConfig(algo="hang", runtime="ray", run_dir=tmp_path / "run"),
            plan([("learner", learner, 1), ("pusher", Pushes, 1)]), on_chunk=kill_once)
    summary, meta = saved(tmp_path / "run")
    assert summary["status"] == "failed" and summary["stop_reason"] == "error"
    assert "cannot start again" in summary["error"]
    # the other worker's chunk under way still pushes while the checkpoint is written
    assert 0 < meta["updates"] <= summary["updates"] and summary["workers"] == {"learner": 1, "pusher": 1}
