"""``gorila train`` / ``gorila eval`` for the RL algorithms on tiny budgets, as a user runs them."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.smoke

PONG_RANDOM, PONG_HUMAN, PONG_DQN = -20.7, 9.3, 18.9  # the Nature DQN paper's reference scores


def gorila(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "gorila.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.heavy
def test_dqn_on_pong_runs_end_to_end_and_evaluates(tmp_path, capsys):
    from gorila.cli import main

    assert main(["train", "--algo", "dqn", "--env", "ALE/Pong-v5", "--runtime", "local", "--actors", "1",
                 "--total-steps", "200", "--learning-starts", "100", "--replay-capacity", "2000", "--batch-size",
                 "8", "--optimizer", "adam", "--lr", "1e-4", "--eval-episodes", "1", "--eval-every-s", "1000",
                 "--device", "cpu", "--run-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["env_steps"] >= 200 and summary["updates"] > 0
    score = summary["final_eval_return"]
    assert score == int(score)  # unclipped game points, summed over a whole game
    assert summary["final_human_normalized"] == pytest.approx(100 * (score - PONG_RANDOM) / (PONG_HUMAN - PONG_RANDOM))
    assert summary["final_dqn_normalized"] == pytest.approx(100 * (score - PONG_RANDOM) / (PONG_DQN - PONG_RANDOM))
    assert summary["best_human_normalized"] >= summary["final_human_normalized"]
    assert "Nature" in summary["human_normalized_table"]
    assert (tmp_path / "learning_curve.png").stat().st_size > 0
    assert main(["eval", str(tmp_path), "--episodes", "1", "--noop-max", "5"]) == 0
    report = json.loads(capsys.readouterr().out)
    # the best checkpoint: the parameters the run's one evaluation played, where it took them
    assert report["checkpoint"] == "best" and report["epsilon"] == 0.05
    assert report["checkpoint_env_steps"] == summary["evaluations"][0]["eval_env_steps"]
    assert report["human_normalized"] == pytest.approx(
        100 * (report["mean"] - PONG_RANDOM) / (PONG_HUMAN - PONG_RANDOM))
    assert report["dqn_normalized"] == pytest.approx(100 * (report["mean"] - PONG_RANDOM) / (PONG_DQN - PONG_RANDOM))


@pytest.mark.heavy
def test_a2c_on_embedded_ray_from_the_command_line(tmp_path):
    result = gorila("train", "--algo", "a3c", "--env", "CartPole-v1", "--mode", "semi-async", "--workers", "2",
                    "--aggregate", "2", "--count-within", "1", "--accept-within", "2", "--total-steps", "2000",
                    "--no-stop-at-target", "--eval-episodes", "2", "--run-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["runtime"] == "ray" and summary["workers"] == {"worker": 2}
    assert summary["env_steps"] >= 2000 and summary["stop_reason"] == "budget"
    # semi-async, aggregate 2: every update took two counted pushes; one more may be waiting for its partner
    assert summary["pushes_counted"] - 2 * summary["updates"] in (0, 1)
    assert summary["target_return"] == 475.0 and summary["eval_epsilon"] == 0.0  # a3c: greedy evaluation


@pytest.mark.heavy
def test_apex_on_pong_runs_end_to_end_with_frames_stored_once(tmp_path, capsys):
    from gorila.cli import main

    assert main(["train", "--algo", "apex", "--env", "ALE/Pong-v5", "--runtime", "local", "--actors", "2",
                 "--envs-per-actor", "2", "--total-steps", "600", "--learning-starts", "200", "--replay-capacity",
                 "4000", "--batch-size", "8", "--prefetch", "2", "--dueling", "--eval-episodes", "1",
                 "--eval-every-s", "1000", "--device", "cpu", "--lr", "1e-4", "--run-dir", str(tmp_path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["env_steps"] >= 600 and summary["updates"] > 0 and summary["stop_reason"] == "budget"
    assert summary["replay_added"] > 0 and summary["replay_priority_max"] > 0
    assert summary["final_eval_return"] == int(summary["final_eval_return"])
