"""``--server`` when not given: the learner owns the parameters wherever the run's learners can,
the textbook's server otherwise; a flag given, or a resumed run's own setting, wins."""

import pytest

from gorila.cli import main
from gorila.launch import configs_from_values


@pytest.mark.parametrize("algo, values, server", [
    ("impala", {}, "learner"),
    ("ppo", {}, "learner"),
    ("apex", {}, "learner"),
    ("dqn", {}, "process"),  # two bundles, two learners: each would own a copy
    ("dqn", {"actors": 1}, "learner"),
    ("dqn", {"replay": "global"}, "learner"),
    ("dqn", {"replay": "global", "learners": 2}, "process"),
    ("impala", {"learners": 2}, "learner"),  # replicas, meeting in an all-reduce, on Ray
    ("impala", {"learners": 2, "runtime": "local"}, "process"),  # no replicas in one process
    ("a3c", {}, "process"),
    ("lstsq", {}, "process"),
    ("impala", {"server": "process"}, "process"),
])
def test_the_default_server_follows_the_runs_learners(algo, values, server):
    run, _ = configs_from_values(algo, dict(values))
    assert run.server == server


def test_the_help_shows_each_algorithms_default(capsys):
    shown = {}
    for algo in ("impala", "dqn"):
        with pytest.raises(SystemExit):
            main(["train", "--algo", algo, "--help"])
        help_text = " ".join(capsys.readouterr().out.split())
        shown[algo] = help_text.split("--server {process,learner}")[-1].split(" --publish-every")[0]  # its entry
    assert "(default: learner)" in shown["impala"] and "(default: process)" in shown["dqn"]
