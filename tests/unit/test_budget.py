"""The step budget a run gets when ``--total-steps`` is not given: an env family's published one
(MinAtar's 5 M frames), a named preset's, or gorila's default; and the line that says which."""

import pytest

from gorila.agents.presets import PUBLISHED_BUDGETS
from gorila.bench.minatar import references
from gorila.launch import budget_line, configs_from_values


def _budget(algo: str, values: dict) -> tuple[int, str | None, str | None]:
    run, configs = configs_from_values(algo, values)
    return configs[-1].total_steps, run.budget_source, budget_line(run, configs)


@pytest.mark.parametrize("algo", ["dqn", "apex", "a3c", "impala", "ppo"])
def test_a_minatar_run_gets_the_published_budget_and_says_so(algo):
    steps, source, line = _budget(algo, {"env": "MinAtar/Breakout-v1", "target_return": 10.0})
    assert steps == 5_000_000 and source == "MinAtar's published budget, Young & Tian 2019"
    assert line == ("budget: 5,000,000 env steps (MinAtar's published budget, Young & Tian 2019); "
                    "stops early at --target-return 10")


def test_the_published_budget_is_the_frames_the_reference_scores_are_read_at():
    # MinAtar steps one frame per env step, so the two must agree.
    assert PUBLISHED_BUDGETS["minatar"].steps == references()["frames"] == 5_000_000


def test_total_steps_given_wins_over_the_published_budget():
    steps, source, line = _budget("impala", {"env": "MinAtar/Seaquest-v1", "total_steps": 20_000})
    assert (steps, source) == (20_000, "--total-steps given")
    assert line == "budget: 20,000 env steps (--total-steps given)"


def test_a_minatar_preset_run_also_gets_the_published_budget():
    steps, source, _ = _budget("a3c", {"preset": "minatar-a3c"})
    assert (steps, source) == (5_000_000, "MinAtar's published budget, Young & Tian 2019")


def test_a_named_preset_budget_wins_over_gorilas_default_and_is_named():
    steps, source, _ = _budget("dqn", {"preset": "nature-dqn"})
    assert (steps, source) == (50_000_000, "preset nature-dqn")


@pytest.mark.parametrize("algo, env", [("dqn", None), ("a3c", "CartPole-v1"), ("ppo", "LunarLander-v3"),
                                       ("apex", "ALE/Pong-v5")])
def test_other_envs_keep_gorilas_default_budget(algo, env):
    steps, source, _ = _budget(algo, {} if env is None else {"env": env})
    assert (steps, source) == (1_000_000, "gorila's default")


def test_the_default_job_says_its_budget_and_the_envs_threshold_and_time_limit():
    _, _, line = _budget("dqn", {"time_limit_s": 60.0})
    assert line == ("budget: 1,000,000 env steps (gorila's default); stops early at the env's reward threshold 475; "
                    "or after 60 s of training (--time-limit-s)")


def test_a_run_that_trains_past_its_target_names_no_target():
    _, _, line = _budget("a3c", {"env": "MinAtar/Breakout-v1", "target_return": 10.0, "stop_at_target": False})
    assert line == "budget: 5,000,000 env steps (MinAtar's published budget, Young & Tian 2019)"


def test_lstsq_has_no_env_steps_and_no_budget_line():
    run, configs = configs_from_values("lstsq", {})
    assert run.budget_source is None and budget_line(run, configs) is None


def test_a_resumed_run_says_its_budget_is_the_runs_total(tmp_path):
    run, configs = configs_from_values("a3c", {"env": "MinAtar/Breakout-v1", "total_steps": 5_000_000,
                                               "resume": tmp_path})
    assert budget_line(run, configs) == ("budget: 5,000,000 env steps in all, the steps before this resume included "
                                         "(the run's own, or --total-steps given again)")
