"""``gorila bench learner`` for every learner that can own its parameters (dqn, apex, impala, ppo),
each with its updates pushed to a parameter-server shard (``--server process``) and applied where
they are computed, then published to the shard (``--server learner``), on tiny budgets: each writes
the learner's rate beside its bare PyTorch loop's, their ratio, and how its parameters travelled."""

import json

import pytest

from gorila.agents.ppo.config import PPOConfig
from gorila.cli import main

# The rate each learner is measured in: DQN's and Ape-X's updates, IMPALA's and PPO's env steps learnt from.
UNITS = {"dqn": "updates", "apex": "updates", "impala": "samples", "ppo": "samples"}
# A row of bench.json, as docs/benchmarks.md lists its keys (dqn's also say its device and device copy).
ROW_KEYS = {"runtime", "algo", "server", "ratio", "updates", "publications"}


def bench_learner(out, *args):
    """``gorila bench learner ARGS`` on the local runtime, one short round, in this process; its one row."""
    assert main(["bench", "learner", *args, "--runtime", "local", "--seconds", "0.3", "--rounds", "1",
                 "--out", str(out)]) == 0
    report = json.loads((out / "bench.json").read_text())
    (row,) = report["rows"]
    return report, row


def assert_measured(row, algo, server):
    unit = UNITS[algo]
    assert ROW_KEYS | {f"{unit}_per_s", f"limit_{unit}_per_s"} <= set(row)
    assert (row["runtime"], row["algo"], row["server"]) == ("local", algo, server)
    assert row[f"{unit}_per_s"] > 0 and row[f"limit_{unit}_per_s"] > 0
    assert row["ratio"] == pytest.approx(row[f"{unit}_per_s"] / row[f"limit_{unit}_per_s"])
    assert row["updates"] > 0


@pytest.mark.parametrize("server", ["process", "learner"])
@pytest.mark.parametrize("algo", ["dqn", "apex", "impala", "ppo"])
def test_each_learner_is_measured_beside_its_bare_loop_with_either_server(tmp_path, algo, server):
    fill = ["--fill", "300"] if UNITS[algo] == "updates" else []
    report, row = bench_learner(tmp_path, "--algo", algo, "--server", server, "--env", "CartPole-v1",
                                "--batch-size", "2", *fill)
    assert_measured(row, algo, server)
    assert report["settings"]["server"] == server and report["parameters"] > 0
    if server == "learner" and algo == "ppo":
        # On the local runtime a learner that owns its parameters publishes once each of its steps
        # ends (and once more, with its optimizer's state, when its report ends the chunk): PPO's
        # step is a batch's epochs of minibatches.
        per_step = PPOConfig().epochs * PPOConfig().minibatches
        assert row["updates"] // per_step < row["publications"] <= row["updates"] // per_step + 1
    elif server == "learner":
        assert row["publications"] > row["updates"]  # a step of one update each
    else:
        assert row["publications"] == 0  # every update went to the shard as a push


def test_apex_learner_that_owns_its_parameters_is_measured_on_minatar(tmp_path):
    report, row = bench_learner(tmp_path, "--algo", "apex", "--server", "learner", "--env", "MinAtar/Breakout-v1",
                                "--batch-size", "4", "--fill", "300")
    assert_measured(row, "apex", "learner")
    assert row["publications"] > row["updates"]
    assert report["parameters"] > 100_000  # the MinAtar network (a convolution and a dueling head), not an MLP


@pytest.mark.parametrize("args, flag", [
    (["--algo", "apex", "--device", "cuda"], "--device"),
    (["--algo", "apex", "--fill", "0"], "--fill"),
    (["--algo", "apex", "--batch-size", "0"], "--batch-size"),
])
def test_bad_flags_exit_2_naming_the_flag(capsys, args, flag):
    assert main(["bench", "learner", *args]) == 2
    assert flag in capsys.readouterr().err
