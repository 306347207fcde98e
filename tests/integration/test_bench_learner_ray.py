"""``gorila bench learner`` on Ray measures the learner that owns its parameters as a Ray run has
it: publishing at most every 0.1 s, not after each of its steps as on the local runtime."""

import json

import pytest

from gorila.cli import main

pytestmark = pytest.mark.integration


def test_on_ray_a_learner_that_owns_its_parameters_publishes_by_ray_s_period_not_each_step(tmp_path):
    assert main(["bench", "learner", "--algo", "impala", "--server", "learner", "--env", "CartPole-v1",
                 "--batch-size", "2", "--runtime", "ray", "--seconds", "1", "--rounds", "1",
                 "--out", str(tmp_path)]) == 0
    (row,) = json.loads((tmp_path / "bench.json").read_text())["rows"]
    assert row["runtime"] == "ray" and row["updates"] > 100
    # IMPALA's step is one update: built with the local runtime's settings it published after each
    # (publications > updates, the report's flush included); on Ray's 0.1 s, a few each second
    assert row["publications"] < row["updates"] / 4
