"""IMPALA and PPO from Python and back: ``gorila.train("impala")``, ``--resume``, ``gorila eval`` and a
loaded policy (local runtime)."""

import json
import shutil

import numpy as np
import pytest
import torch

import gorila
from gorila.cli import main

QUICK = dict(runtime="local", total_steps=3_000, stop_at_target=False, eval_episodes=2, eval_every_s=0.2)


@pytest.fixture(scope="module", params=["impala", "ppo"])
def impala_run(request, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp(request.param) / "run"
    return run_dir, gorila.train(request.param, run_dir=run_dir, unroll_length=10, **QUICK)


def test_train_returns_the_summary_of_the_run(impala_run):
    run_dir, summary = impala_run
    assert summary["algo"] in ("impala", "ppo") and summary["env_steps"] >= 3_000 and summary["updates"] > 0
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] == summary["env_steps"]
    assert json.loads((run_dir / "config.json").read_text())[summary["algo"]]["unroll_length"] == 10


def test_resume_continues_with_the_saved_settings(impala_run, tmp_path):
    run_dir, first = shutil.copytree(impala_run[0], tmp_path / "run"), impala_run[1]
    summary = gorila.train(resume=run_dir, total_steps=6_000)
    assert summary["algo"] == first["algo"] and summary["env_steps"] >= 6_000 > first["env_steps"]
    assert summary["updates"] > first["updates"]  # the server went on from its checkpoint
    assert json.loads((run_dir / "config.json").read_text())[first["algo"]]["unroll_length"] == 10


def test_a_loaded_policy_is_the_greedy_policy_of_the_trained_network(impala_run):
    run_dir, summary = impala_run
    policy = gorila.load_policy(run_dir, checkpoint="last")
    obs, _ = policy.make_env(seed=3).reset(seed=3)
    batch = np.stack([obs, obs * 0.5])
    with torch.no_grad():
        logits, _ = policy.network(torch.as_tensor(batch))
    np.testing.assert_array_equal(policy(batch), logits.argmax(-1).numpy())
    assert policy.env_steps == summary["env_steps"] and policy.epsilon == 0.0


def test_gorila_eval_plays_the_saved_policy(impala_run, capsys):
    assert main(["eval", str(impala_run[0]), "--episodes", "2", "--noop-max", "0"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["episodes"] == 2 and len(report["scores"]) == 2 and report["epsilon"] == 0.0
