"""MinAtar end to end: ``gorila train`` on ``MinAtar/Breakout-v1`` for each algorithm, a few hundred
steps with the MinAtar network (and preset, where the algorithm has one), and ``gorila bench minatar``
on a budget of seconds."""

import json

import pytest
from safetensors.numpy import load_file

from gorila.cli import main
from gorila.nets.actor_critic_env import make_network
from gorila.nets.minatar import MinAtarActorCritic

pytestmark = pytest.mark.smoke
pytest.importorskip("minatar")

COMMON = ["--env", "MinAtar/Breakout-v1", "--runtime", "local", "--eval-episodes", "1", "--eval-every-s", "1000"]
OWN = {"dqn": ["--learning-starts", "100", "--total-steps", "400"],
       "apex": ["--learning-starts", "100", "--envs-per-actor", "4", "--total-steps", "400"],
       "a3c": ["--workers", "2", "--envs-per-actor", "4", "--unroll-length", "5", "--total-steps", "400"]}
NETWORK = {"dqn": "MinAtarQNetwork", "apex": "MinAtarQNetwork", "a3c": "MinAtarActorCritic"}


@pytest.mark.parametrize("algo", ["dqn", "apex", "a3c"])
def test_each_algorithm_trains_on_minatar_breakout_with_its_preset(tmp_path, algo):
    assert main(["train", "--algo", algo, *COMMON, *OWN[algo], "--run-dir", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["env_steps"] >= 400 and summary["updates"] > 0 and summary["stop_reason"] == "budget"
    config = json.loads((tmp_path / "config.json").read_text())
    assert config[algo]["eval_noop_max"] == 0  # the preset, as no flag set it
    if algo == "dqn":
        assert config["run"]["optimizer"] == "adam" and config["dqn"]["learning_starts"] == 100  # the flag wins
    if algo == "apex":
        assert config["apex"]["dueling"] is True


@pytest.mark.parametrize("algo", ["impala", "ppo"])
@pytest.mark.parametrize("inference", ["local", "central"])
def test_impala_and_ppo_train_on_minatar_breakout_with_the_minatar_actor_critic(tmp_path, algo, inference):
    assert isinstance(make_network("MinAtar/Breakout-v1", (64,), False, 0), MinAtarActorCritic)
    own = ["--envs-per-actor", "4", "--unroll-length", "5", "--total-steps", "400", "--inference", inference]
    assert main(["train", "--algo", algo, *COMMON, *own, "--run-dir", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["env_steps"] >= 400 and summary["updates"] > 0 and summary["stop_reason"] == "budget"
    # the exported network is the MinAtar actor-critic: its convolution over the 4 Breakout channels
    (export,) = sorted((tmp_path / "checkpoints").glob("ckpt-*.model.safetensors"))[-1:]
    shapes = {name: tensor.shape for name, tensor in load_file(export).items()}
    assert (16, 4, 3, 3) in shapes.values(), shapes


def test_the_inference_server_builds_the_minatar_network(tmp_path):
    assert main(["train", "--algo", "a3c", *COMMON, *OWN["a3c"], "--inference", "central",
                 "--run-dir", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["env_steps"] >= 400 and summary["inference_mean_batch"] > 0


def test_bench_minatar_writes_curves_plots_and_the_frames_to_each_reference(tmp_path):
    assert main(["bench", "minatar", "--games", "Breakout", "--algo", "a3c", "--minutes", "0.05", "--runtime",
                 "local", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "bench.json").read_text())
    assert "Young & Tian 2019" in report["reference_source"] and report["reference_frames"] == 5_000_000
    (row,) = report["rows"]
    assert (row["game"], row["algo"]) == ("Breakout", "a3c") and row["frames"] > 0
    assert {agent: r["score"] for agent, r in row["to_reference"].items()} == {"dqn": 10, "ac_lambda": 17.5}
    for reached in row["to_reference"].values():  # seconds of training: far too few to reach either
        assert reached["frames"] is None and reached["seconds"] is None
    lines = (tmp_path / "curves.csv").read_text().splitlines()
    assert lines[0] == "game,algo,frames,seconds_from_start,train_return" and len(lines) > 1
    assert (tmp_path / "Breakout.png").stat().st_size > 0
