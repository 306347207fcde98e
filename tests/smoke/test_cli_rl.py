"""``gorila train`` / ``gorila eval`` for the RL algorithms on tiny budgets."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.smoke


def gorila(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "gorila.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_dqn_on_pong_runs_end_to_end_and_evaluates(tmp_path):
    result = gorila("train", "--algo", "dqn", "--env", "ALE/Pong-v5", "--runtime", "local", "--actors", "1",
                    "--total-steps", "300", "--learning-starts", "100", "--replay-capacity", "2000",
                    "--batch-size", "8", "--optimizer", "adam", "--lr", "1e-4", "--eval-episodes", "1",
                    "--eval-every-s", "1000", "--device", "cpu", "--run-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["env_steps"] >= 300 and summary["updates"] > 0
    assert -21 <= summary["final_eval_return"] <= 21
    assert "final_human_normalized" in summary
    assert (tmp_path / "learning_curve.png").stat().st_size > 0
    evaluated = gorila("eval", str(tmp_path), "--episodes", "1", "--noop-max", "5")
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert -21 <= json.loads(evaluated.stdout)["mean"] <= 21


@pytest.mark.parametrize("algo, extra", [("dqn", ["--actors", "2", "--learning-starts", "100"]),
                                         ("a3c", ["--workers", "2"])])
@pytest.mark.parametrize("mode", ["sync", "semi-async"])
def test_rl_algorithms_run_on_embedded_ray(tmp_path, algo, extra, mode):
    semi = ["--aggregate", "2", "--count-within", "1", "--accept-within", "2"] if mode == "semi-async" else []
    result = gorila("train", "--algo", algo, "--env", "CartPole-v1", "--mode", mode, *extra, *semi,
                    "--total-steps", "2000", "--no-stop-at-target", "--eval-episodes", "2",
                    "--run-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["env_steps"] >= 2000 and summary["updates"] > 0
    for key in ("time_to_target_s", "target_return", "env_steps_per_s", "updates_per_s", "pushes_rejected_stale",
                "pushes_rejected_outlier", "cpu_time_s", "bytes_pushed"):
        assert key in summary, key
    assert summary["target_return"] == 475.0
    assert summary["eval_epsilon"] == {"dqn": 0.05, "a3c": 0.0}[algo]  # DQN papers' rate; a3c's greedy policy


@pytest.mark.parametrize("args, flag", [
    (["--algo", "a3c", "--rollout-steps", "0"], "--rollout-steps"),
    (["--algo", "a3c", "--entropy-coef", "-0.1"], "--entropy-coef"),
    (["--algo", "a3c", "--gae-lambda", "1.5"], "--gae-lambda"),
    (["--algo", "a3c", "--eval-epsilon", "2"], "--eval-epsilon"),
    (["--algo", "dqn", "--target-update", "hard:0"], "--target-update"),
    (["--algo", "dqn", "--replay", "local", "--actors", "2", "--learners", "3"], "--learners"),
    (["--algo", "dqn", "--env", "NoSuchEnv-v0"], "--env"),
    (["--algo", "dqn", "--env", "Pendulum-v1"], "--env"),
    (["--algo", "dqn", "--resume", "/nonexistent"], "--resume"),
])
def test_invalid_rl_flags_exit_2_naming_the_flag(args, flag):
    result = gorila("train", *args, timeout=120)
    assert result.returncode == 2, (result.stdout[-500:], result.stderr[-1500:])
    assert flag in result.stderr
