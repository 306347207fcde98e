"""Issue 32, item 3: every failure path saves what it can. A run that fails while it trains (its
environments failing past their limit, non-finite gradients past theirs, a worker that raises)
writes a final checkpoint of the last good parameters and a full summary.json with the reason, and
the error still ends the run; a resume that fails before training leaves the earlier summary as it was."""

import functools
import json

import gymnasium as gym
import numpy as np
import pytest

import gorila
from gorila.checkpoint import load_checkpoint
from gorila.config import RunConfig
from gorila.driver.loop import run
from gorila.envs.fake import FlakyEnv
from gorila.errors import CheckpointError, EnvFailedError, NonFiniteError
from hang_plans import Fails, NaNPushes, Pushes, plan, saved

pytestmark = pytest.mark.timeout(120)

NAN_REWARD = "gorila-test/NaNRewardEvery200-v0"
NAN_OBS = "gorila-test/NaNObservationEvery7-v0"


@pytest.fixture
def nan_reward_env():
    if NAN_REWARD not in gym.registry:
        gym.register(NAN_REWARD, entry_point=FlakyEnv, kwargs={"how": "nan_reward", "fail_every": 200})
    FlakyEnv.steps_in_process = 0
    return NAN_REWARD


def test_a_nan_reward_every_200_steps_ends_a_local_run_with_a_summary_and_a_final_checkpoint(nan_reward_env, tmp_path):
    """The known case: the training fault limit is reached and the run used to end with no summary."""
    with pytest.raises(EnvFailedError):
        gorila.train("dqn", env=nan_reward_env, runtime="local", run_dir=tmp_path, total_steps=200_000)
    summary, meta = saved(tmp_path)
    assert summary["status"] == "failed" and summary["stop_reason"] == "env_failures"
    assert "EnvFailedError" in summary["error"] and "reward of nan" in summary["error"]
    assert summary["env_failures"] >= 1 and summary["env_steps"] == meta["env_steps"] > 0
    assert "worker_restarts" in summary and "pushes_rejected" in summary  # the full summary, every counter


def test_nan_observations_that_end_a_run_are_every_one_counted_in_its_summary(tmp_path):
    """The failures that end a run were never in a report of their actor's: summary.json said
    env_failures: 0 (or fewer than the limit) for a run ended by them."""
    if NAN_OBS not in gym.registry:
        gym.register(NAN_OBS, entry_point=FlakyEnv, kwargs={"how": "nan_obs", "fail_every": 7})
    FlakyEnv.steps_in_process = 0
    with pytest.raises(EnvFailedError, match="holding NaN") as failed:
        gorila.train("dqn", env=NAN_OBS, runtime="local", run_dir=tmp_path, total_steps=200_000)
    summary, _ = saved(tmp_path)
    assert failed.value.failures == 5 and summary["env_failures"] == 5


def test_non_finite_gradients_past_their_limit_end_the_run_with_the_last_good_parameters_saved(tmp_path):
    with pytest.raises(NonFiniteError):
        run(RunConfig(algo="hang", runtime="local", run_dir=tmp_path), plan([("learner", NaNPushes, 1)]))
    summary, _ = saved(tmp_path)
    assert summary["status"] == "failed" and summary["stop_reason"] == "nonfinite_gradients"
    assert summary["pushes_rejected_nonfinite"] >= 1
    arrays, _ = load_checkpoint(tmp_path / "checkpoints")
    assert np.array_equal(arrays["shard0.params"], np.zeros(4, np.float32))  # never changed by a NaN


def test_a_worker_that_raises_ends_the_run_with_the_reason_and_everything_saved(tmp_path):
    failing = functools.partial(Fails, error=RuntimeError("emulator lost"), fail_at=25)
    with pytest.raises(RuntimeError, match="emulator lost"):
        run(RunConfig(algo="hang", runtime="local", run_dir=tmp_path),
            plan([("learner", Pushes, 1), ("actor", failing, 1)]))
    summary, meta = saved(tmp_path)
    assert summary["status"] == "failed" and summary["stop_reason"] == "error"
    assert summary["error"] == "RuntimeError: emulator lost"
    assert summary["updates"] == meta["updates"] > 0


@pytest.fixture
def finished_run(tmp_path):
    """A run that reached its budget, and its summary.json's bytes."""
    run_dir = tmp_path / "run"
    run(RunConfig(algo="hang", runtime="local", run_dir=run_dir), plan([("learner", Pushes, 1)], budget=100))
    return run_dir, (run_dir / "summary.json").read_bytes()


def test_a_resume_that_fails_before_training_leaves_the_earlier_summary_byte_identical(finished_run):
    run_dir, before = finished_run
    assert json.loads(before)["status"] == "finished"
    failing = functools.partial(Fails, error=RuntimeError("no display"), fail_at=1)
    with pytest.raises(RuntimeError, match="no display"):
        run(RunConfig(algo="hang", runtime="local", resume=run_dir), plan([("learner", failing, 1)], budget=1000))
    assert (run_dir / "summary.json").read_bytes() == before


def test_a_resume_refused_for_an_unusable_checkpoint_leaves_the_earlier_summary_byte_identical(finished_run):
    run_dir, before = finished_run
    for path in (run_dir / "checkpoints").glob("*.safetensors"):
        path.write_bytes(b"damaged")
    with pytest.raises(CheckpointError):
        run(RunConfig(algo="hang", runtime="local", resume=run_dir), plan([("learner", Pushes, 1)], budget=1000))
    assert (run_dir / "summary.json").read_bytes() == before
