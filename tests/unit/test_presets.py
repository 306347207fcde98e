"""The MinAtar preset: what a run on a MinAtar id gets unless the user set it, and the bench's
frames-to-reference figure."""

import numpy as np
import pytest

from gorila.algos.presets import MINATAR, preset, with_preset
from gorila.bench.minatar import first_reach, reference_scores
from gorila.launch import configs_from_values


@pytest.mark.parametrize("algo", ["dqn", "apex", "a3c"])
def test_every_preset_setting_is_a_valid_setting_of_its_algorithm(algo):
    run, configs = configs_from_values(algo, {"env": "MinAtar/Breakout-v1"})
    fields = {**vars(run), **{k: v for cfg in configs for k, v in vars(cfg).items()}}
    for name, value in MINATAR[algo].items():
        assert str(fields[name]) == str(value)  # target_update is parsed into a TargetUpdate


def test_settings_the_user_gave_win_over_the_preset():
    run, (dqn, rl) = configs_from_values("dqn", {"env": "MinAtar/Breakout-v1", "lr": 1e-4, "eval_noop_max": 5})
    assert (dqn.lr, rl.eval_noop_max, run.optimizer, dqn.batch_size) == (1e-4, 5, "adam", 32)


def test_other_envs_keep_the_algorithms_defaults():
    assert preset("dqn", "CartPole-v1") == preset("dqn", None) == preset("lstsq", "MinAtar/Breakout-v1") == {}
    assert with_preset("dqn", {"env": "ALE/Pong-v5"}) == {"env": "ALE/Pong-v5"}
    run, (dqn, _) = configs_from_values("dqn", {"env": "CartPole-v1"})
    assert (run.optimizer, dqn.lr) == (None, 3e-2)


def test_the_first_point_at_a_reference_score_gives_its_frames_and_seconds():
    frames, seconds, returns = np.array([100, 200, 300, 400]), np.array([1.0, 2.0, 3.0, 4.0]), np.array([1, 9, 10, 12])
    assert first_reach(frames, seconds, returns, 10) == {"score": 10, "frames": 300, "seconds": 3.0}
    assert first_reach(frames, seconds, returns, 12.5) == {"score": 12.5, "frames": None, "seconds": None}


def test_reference_scores_are_young_and_tians():
    assert reference_scores("Breakout") == {"dqn": 10, "ac_lambda": 17.5}
    assert reference_scores("SpaceInvaders") == {"dqn": 43, "ac_lambda": 185}
    assert reference_scores("Seaquest") == {"dqn": 20}
