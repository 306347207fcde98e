"""Presets: the MinAtar settings a run on a MinAtar id gets unless the user set them (and the bench's
frames-to-reference figure), and the published settings ``--preset NAME`` fills the flags with."""

import numpy as np
import pytest

from gorila.agents.presets import MINATAR, PRESETS, preset, table, with_preset
from gorila.bench.minatar import first_reach, reference_scores
from gorila.errors import ConfigError
from gorila.launch import configs_from_values
from gorila.machine import ATARI_FRAMES, Machine
from gorila.replay.memory import estimate_storage_bytes


@pytest.mark.parametrize("algo", ["dqn", "apex", "a3c", "impala", "ppo"])
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
    assert (run.optimizer, dqn.lr) == (None, 1e-3)


def test_the_first_point_at_a_reference_score_gives_its_frames_and_seconds():
    frames, seconds, returns = np.array([100, 200, 300, 400]), np.array([1.0, 2.0, 3.0, 4.0]), np.array([1, 9, 10, 12])
    assert first_reach(frames, seconds, returns, 10) == {"score": 10, "frames": 300, "seconds": 3.0}
    assert first_reach(frames, seconds, returns, 12.5) == {"score": 12.5, "frames": None, "seconds": None}


def test_reference_scores_are_young_and_tians():
    assert reference_scores("Breakout") == {"dqn": 10, "ac_lambda": 17.5}
    assert reference_scores("SpaceInvaders") == {"dqn": 43, "ac_lambda": 185}
    assert reference_scores("Seaquest") == {"dqn": 20}


# --- named presets (--preset NAME) ---------------------------------------------------------------

BIG = Machine(cpus=16, memory_bytes=512 * 2**30)


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_named_preset_is_valid_for_its_algorithm_and_names_its_source(name):
    chosen = PRESETS[name]
    run, configs = configs_from_values(chosen.algo, {"preset": name})
    fields = {**vars(run), **{k: v for cfg in configs for k, v in vars(cfg).items()}}
    for key, value in chosen.values(Machine.here()).items():
        assert str(fields[key]) == str(value), key
    assert run.preset == name and run.preset_source == chosen.source and chosen.source
    assert chosen.name in table() and chosen.source in table()


def test_gorila_atari_is_the_paper_s_setting_with_its_counts_scaled_to_the_machine():
    values = with_preset("dqn", {"preset": "gorila-atari"}, BIG)
    assert (values["replay_capacity"], values["eps_start"], values["eps_end"]) == (1_000_000, 1.0, 0.1)
    assert (values["eps_decay_updates"], values["target_update"], values["replay"]) == (1_000_000, "hard:60000",
                                                                                       "local")
    assert (values["shards"], values["actors"]) == (4, 12)  # Gorila's 31 shards : 100 bundles over 16 CPUs
    one_replay = estimate_storage_bytes(1_000_000, ATARI_FRAMES, np.uint8)
    small = Machine(cpus=16, memory_bytes=int(3.5 * one_replay))
    assert with_preset("dqn", {"preset": "gorila-atari"}, small)["actors"] == 2  # as many 1 M-frame replays as fit
    assert with_preset("dqn", {"preset": "gorila-atari"}, Machine(2, 2**40))["actors"] == 1


def test_a_flag_given_wins_over_the_named_preset():
    run, (dqn, rl) = configs_from_values("dqn", {"preset": "nature-dqn", "lr": 1e-3, "env": "ALE/Pong-v5"})
    assert (dqn.lr, rl.env, run.optimizer, dqn.replay_capacity, str(dqn.target_update)) == (
        1e-3, "ALE/Pong-v5", "rmsprop", 1_000_000, "hard:10000")
    assert with_preset("a3c", {"preset": "a3c-atari", "workers": 3}, BIG)["workers"] == 3


def test_lunarlander_ppo_is_rl_zoo_s_setting_on_gorila_s_flags():
    run, (ppo, rl) = configs_from_values("ppo", {"preset": "lunarlander-ppo"})
    envs = ppo.actors * ppo.envs_per_actor
    batch_steps = (ppo.batch_size or ppo.actors) * ppo.envs_per_actor * ppo.unroll_length
    assert (envs, batch_steps, batch_steps // ppo.minibatches) == (16, 16 * 1024, 64)  # n_envs, n_steps, batch_size
    assert (ppo.epochs, ppo.gamma, ppo.gae_lambda, ppo.entropy_coef, ppo.lr) == (4, 0.999, 0.98, 0.01, 3e-4)
    assert (run.mode, rl.env, rl.total_steps) == ("sync", "LunarLander-v3", 1_000_000)


def test_the_fast_halfcheetah_preset_is_the_zoo_s_but_for_its_minibatches_of_256_and_its_step_size():
    def settings(name):
        _, (ppo, rl) = configs_from_values("ppo", {"preset": name})
        return {**vars(ppo), **vars(rl)}

    zoo, fast = settings("halfcheetah-ppo"), settings("halfcheetah-ppo-fast")
    changed = {key: (zoo[key], fast[key]) for key in zoo if zoo[key] != fast[key]}
    assert changed == {"minibatches": (8, 2), "lr": (2.0633e-05, 6e-5)}
    assert 512 // fast["minibatches"] == 256  # one env x 512 steps a batch


def test_impala_s_breakout_preset_is_what_a_minatar_id_gets_but_for_its_step_size_and_entropy_bonus():
    def settings(values):
        run, (impala, rl) = configs_from_values("impala", values)
        return {**vars(run), **vars(impala), **vars(rl)}

    own, fast = settings({"env": "MinAtar/Breakout-v1"}), settings({"preset": "minatar-breakout-impala"})
    changed = {key: (own[key], fast[key]) for key in own if own[key] != fast[key]}
    assert changed == {"lr": (3e-3, 7e-3), "entropy_coef": (0.01, 0.025),
                       "preset": (None, "minatar-breakout-impala"), "preset_source": (None, fast["preset_source"])}
    assert fast["total_steps"] == 5_000_000 and "measured here" in fast["preset_source"]


@pytest.mark.parametrize("algo, values, words", [
    ("dqn", {"preset": "no-such"}, "unknown preset"),
    ("a3c", {"preset": "nature-dqn"}, "--algo dqn, not a3c"),
    ("dqn", {"preset": "nature-dqn", "env": "CartPole-v1"}, "Atari games"),
    ("a3c", {"preset": "lunarlander-a2c", "env": "ALE/Pong-v5"}, "LunarLander-v3"),
    ("impala", {"preset": "minatar-breakout-impala", "env": "MinAtar/SpaceInvaders-v1"}, "MinAtar/Breakout-v1"),
])
def test_a_preset_that_does_not_fit_is_refused_naming_the_flag(algo, values, words):
    with pytest.raises(ConfigError) as err:
        configs_from_values(algo, values)
    assert err.value.field == "preset" and words in err.value.message


def test_gorila_presets_lists_them_and_train_takes_the_preset_s_algorithm(capsys):
    from gorila.cli import _configs, main

    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("gorila-atari", "nature-dqn", "apex-atari", "a3c-atari"))
    assert "Nair et al. 2015" in out and "Extended Data Table 1" in out
    run, configs, _ = _configs(["--preset", "a3c-atari", "--runtime", "local"])
    assert run.algo == "a3c" and configs[0].unroll_length == 5
    run, _, _ = _configs(["--preset", "apex-atari", "--algo", "apex"])
    assert run.algo == "apex"
