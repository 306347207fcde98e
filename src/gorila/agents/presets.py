"""Settings a run gets unless the user gave them: the published settings ``--preset NAME`` names,
and the settings of an environment family (MinAtar's) applied to its ids by themselves.

:func:`gorila.launch.configs_from_values` lays the user's settings over both, so any flag given
still wins::

    with_preset("dqn", {"env": "MinAtar/Breakout-v1", "lr": 1e-4})
    # {"optimizer": "adam", "lr": 1e-4, "batch_size": 32, ..., "env": "MinAtar/Breakout-v1"}
    with_preset("dqn", {"preset": "nature-dqn", "env": "ALE/Breakout-v5"})
    # {"optimizer": "rmsprop", "lr": 0.00025, "replay_capacity": 1000000, ..., "preset": "nature-dqn"}

``gorila presets`` lists the named ones with their sources; ``preset`` itself is a setting
(``RunConfig.preset``), so ``config.json`` and ``summary.json`` name it and its source, and a
resumed run keeps its values. A named preset holds only what its paper publishes (a setting the
paper leaves open keeps gorila's default, and :attr:`Preset.note` says which), except the counts
of processes, which :class:`~gorila.machine.Machine` scales to the machine the run starts on.

The family defaults: every algorithm's defaults were chosen for CartPole's MLPs (Adam at 1e-3
for DQN, short schedules); a convolution over MinAtar's grids wants Adam or RMSProp at ~1e-3 and
longer exploration. The numbers follow Young & Tian (2019) — batch 32, a 100 k replay, ε annealed
to 0.1, a hard target update every 1000 updates, no no-op starts (MinAtar's sticky actions already
randomise episodes), AC(λ) with λ = 0.8 — with shorter schedules and higher learning rates, since
on a 2-core machine a run sees a few hundred thousand frames, not 5 M.

A family with a published step budget (MinAtar's 5 M frames) also gives its ids that budget as
``--total-steps`` unless given, for every RL algorithm, and :func:`budget_source` says where a
run's budget came from (its first lines and ``config.json``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gorila.agents.atari_presets import ATARI_PRESETS, a3c_scaled
from gorila.agents.preset import Preset
from gorila.agents.recurrent_presets import RECURRENT_PRESETS
from gorila.agents.registry import ALGORITHMS
from gorila.envs.make import is_minatar
from gorila.errors import ConfigError
from gorila.machine import Machine

_MINATAR_RL = {"eval_noop_max": 0, "eval_episodes": 20, "eval_every_s": 10.0}

MINATAR: dict[str, dict[str, Any]] = {
    # Each bundle steps 4 envs per gradient of 32 rows (8 sampled rows per frame, against Young & Tian's
    # 32, so that 2 cores make 4 times the frames) with 3-step returns, and ends its ε at 0.01, where a
    # training average at ε 0.1 stayed near 6; Young & Tian's step size, 2.5e-4, where 1e-3 held
    # SpaceInvaders near 25 (docs/benchmarks.md, "Every algorithm to the DQN score on MinAtar").
    "dqn": {**_MINATAR_RL, "optimizer": "adam", "lr": 2.5e-4, "batch_size": 32, "replay_capacity": 100_000,
            "learning_starts": 2_000, "eps_end": 0.01, "eps_decay_updates": 25_000, "target_update": "hard:1000",
            "actor_refresh": 4, "envs_per_actor": 4, "n_step": 3},
    # Ape-X's own exploration (ε from 0.4 down to 0.4^8) leaves a run with few actors one that plays
    # at ε 0.4, whose short episodes then fill the training average: DQN's range, 0.1 down to 0.01,
    # instead (docs/benchmarks.md, "Every algorithm to the DQN score on MinAtar"). Rows go to replay
    # every 50 steps, as in Ape-X's paper: an add every 4 steps spent a third of the actors' and the
    # replay shard's CPU on the calls (docs/benchmarks.md, "Ape-X's adds").
    "apex": {**_MINATAR_RL, "lr": 5e-4, "batch_size": 32, "dueling": True, "target_update": "hard:1000",
             "learning_starts": 2_000, "eps_base": 0.1, "eps_alpha": 1.0, "add_every": 50},
    "a3c": {**_MINATAR_RL, "lr_policy": 1e-3, "lr_value": 1e-3, "gae_lambda": 0.8, "unroll_length": 16},
    # Their own settings learn MinAtar; only the evaluation's cadence changes. Back to back, as on
    # vector envs, the greedy games of a fast-improving policy take frames from training on a small
    # machine (docs/benchmarks.md, "Removing downtime, stage by stage"). IMPALA's faster Breakout
    # settings are a named preset of their own (minatar-breakout-impala): on Asterix and Freeway they
    # learnt slower.
    "impala": dict(_MINATAR_RL),
    "ppo": dict(_MINATAR_RL),
}


@dataclass(frozen=True)
class PublishedBudget:
    """The env steps at which a family's published results are read, which its ids get as
    ``--total-steps`` unless it is given (a run then ends where the papers' curves end, and stops
    sooner at its target)::

        PUBLISHED_BUDGETS["minatar"].steps    # 5_000_000
        PUBLISHED_BUDGETS["minatar"].source   # "MinAtar's published budget, Young & Tian 2019"
    """

    steps: int
    source: str


#: MinAtar steps one frame per env step (no frame skip), so Young & Tian's 5 M frames are 5 M env
#: steps; gorila/data/minatar_reference.json reads its reference scores at the same frames.
PUBLISHED_BUDGETS: dict[str, PublishedBudget] = {
    "minatar": PublishedBudget(5_000_000, "MinAtar's published budget, Young & Tian 2019"),
}

# RL-Zoo's PPO on LunarLander (hyperparams/ppo.yml): n_envs 16 = 2 actors x 8 envs; batch_size 64 of
# the 16 x 1024 = 16,384 steps of a batch = 256 minibatches; the rest are Stable-Baselines3's PPO
# defaults, which the zoo keeps (Adam 3e-4, clip 0.2, value weight 0.5, gradients clipped to 0.5).
_LUNARLANDER_PPO = {"env": "LunarLander-v3", "mode": "sync", "actors": 2, "envs_per_actor": 8, "unroll_length": 1024,
                    "minibatches": 256, "epochs": 4, "gamma": 0.999, "gae_lambda": 0.98, "entropy_coef": 0.01,
                    "lr": 3e-4, "clip": 0.2, "value_coef": 0.5, "max_grad_norm": 0.5, "total_steps": 1_000_000}

# RL-Zoo's PPO for continuous control (hyperparams/ppo.yml). batch_size 64 of n_envs x n_steps steps a
# batch gives the minibatches; the envs are split over 2 actors where n_envs allows. Stable-Baselines3's
# PPO defaults the zoo keeps: Adam 3e-4 unless given, clip 0.2, value weight 0.5, gradients clipped to 0.5.
_ZOO_PPO = {"mode": "sync", "lr": 3e-4, "clip": 0.2, "value_coef": 0.5, "max_grad_norm": 0.5}
_ZOO_SOURCE = "RL-Baselines3-Zoo, hyperparams/ppo.yml, {} (DLR-RM/rl-baselines3-zoo)"
_HALFCHEETAH_PPO = {**_ZOO_PPO, "env": "HalfCheetah-v5", "actors": 1, "envs_per_actor": 1, "unroll_length": 512,
    "minibatches": 8, "epochs": 20, "gamma": 0.98, "gae_lambda": 0.92, "entropy_coef": 0.000401762, "lr": 2.0633e-05,
    "clip": 0.1, "max_grad_norm": 0.8, "value_coef": 0.58096, "hidden": (256, 256), "total_steps": 1_000_000,
    "normalize_obs": True, "normalize_reward": True, "log_std_init": -2.0}
_CONTINUOUS_PRESETS = (
    Preset(
        "pendulum-ppo", "ppo", _ZOO_SOURCE.format("Pendulum-v1"),
        "PPO on Pendulum-v1: 4 envs x 1024 steps a batch, minibatches of 64, 10 epochs, γ 0.9, λ 0.95, "
        "Adam 1e-3, 100 k steps",
        {**_ZOO_PPO, "env": "Pendulum-v1", "actors": 2, "envs_per_actor": 2, "unroll_length": 1024,
         "minibatches": 64, "epochs": 10, "gamma": 0.9, "gae_lambda": 0.95, "entropy_coef": 0.0, "lr": 1e-3,
         "total_steps": 100_000},
        "Pendulum-v1",
        "the zoo explores with gSDE (use_sde, sde_sample_freq 4); gorila's Gaussian has a state-independent "
        "log-std instead"),
    Preset(
        "lunarlandercontinuous-ppo", "ppo", _ZOO_SOURCE.format("LunarLanderContinuous-v2"),
        "PPO on LunarLanderContinuous-v3: 16 envs x 1024 steps a batch, minibatches of 64, 4 epochs, γ 0.999, "
        "λ 0.98, entropy 0.01, 1 M steps",
        {**_LUNARLANDER_PPO, "env": "LunarLanderContinuous-v3"},
        "LunarLanderContinuous-v3", "the zoo's setting is its discrete LunarLander's; its 16 envs are 2 actors of 8"),
    Preset(
        "halfcheetah-ppo", "ppo", _ZOO_SOURCE.format("HalfCheetah-v3"),
        "PPO on HalfCheetah-v5: 1 env x 512 steps a batch, minibatches of 64, 20 epochs, γ 0.98, λ 0.92, "
        "Adam 2.06e-5, clip 0.1, 256 x 256 networks, log-std starting at -2, observations and rewards normalised, "
        "1 M steps (needs the mujoco extra)",
        _HALFCHEETAH_PPO,
        "HalfCheetah-v5",
        "observations and rewards normalised as the zoo's VecNormalize does (normalize: true); the zoo's layers "
        "are ReLU and start from PyTorch's initialisation, gorila's are tanh with a policy layer scaled to 1%"),
    Preset(
        "halfcheetah-ppo-fast", "ppo", "gorila's own setting, the zoo's HalfCheetah's with larger minibatches, "
        "found by a small search on a 2-core machine (docs/continuous.md)", "PPO on HalfCheetah-v5 for a few CPU "
        "cores: halfcheetah-ppo with minibatches of 256, not 64 (a quarter of the updates, each barely dearer on a "
        "CPU), and Adam 6e-5, not 2.06e-5", {**_HALFCHEETAH_PPO, "minibatches": 2, "lr": 6e-5}, "HalfCheetah-v5",
        "searched over minibatches of 128 and 256 and Adam 2e-5 to 8e-5 on seed 0, then run on seeds 1-4"),
    Preset(
        "a3c-mujoco", "a3c",
        "Mnih et al. 2016, Asynchronous Methods for Deep Reinforcement Learning (A3C), Supplementary §9 "
        "(continuous action control with MuJoCo)",
        "A3C for continuous control: a Gaussian policy whose differential entropy is weighted 1e-4, shared "
        "RMSProp, γ 0.99",
        {"env": "HalfCheetah-v5", "mode": "async", "envs_per_actor": 1, "entropy_coef": 1e-4, "gamma": 0.99,
         "optimizer": "rmsprop", "gae_lambda": 1.0, "target_tau": 1.0},
        "HalfCheetah-v5",
        "the paper's policy outputs a state-dependent variance through a softplus; gorila's log-std is a "
        "parameter of its own. It samples each run's learning rate log-uniformly: gorila keeps its own. "
        "Workers: one per CPU, at most the paper's 16", a3c_scaled),
    Preset(
        "pendulum-impala", "impala",
        "gorila's own setting, found by a small search on a shared 2-core machine (docs/continuous.md); "
        "no paper gives IMPALA's settings for Pendulum",
        "IMPALA on Pendulum-v1 with central inference: 2 actors x 8 envs, 16-step segments, queues of 2 segments, "
        "γ 0.95, Adam 5e-4, no entropy bonus, gradients clipped to 0.5, observations and rewards normalised",
        {"env": "Pendulum-v1", "inference": "central", "actors": 2, "envs_per_actor": 8, "unroll_length": 16,
         "queue_capacity": 2, "gamma": 0.95, "optimizer": "adam", "lr": 5e-4, "entropy_coef": 0.0,
         "max_grad_norm": 0.5, "normalize_obs": True, "normalize_reward": True},
        "Pendulum-v1",
        "queues of 2 segments hold the policy lag near 4 versions on both runtimes; with the default 16 the "
        "local runtime's actors kept its queue full (a lag of 17) and the policy's mean ran past the torque bound"),
)

_PRESETS = (
    *ATARI_PRESETS,
    Preset(
        "lunarlander-ppo", "ppo",
        "RL-Baselines3-Zoo, hyperparams/ppo.yml, LunarLander-v2 (DLR-RM/rl-baselines3-zoo; 242 after 1 M steps)",
        "PPO on LunarLander-v3: 16 envs x 1024 steps a batch, minibatches of 64, 4 epochs, γ 0.999, λ 0.98, "
        "entropy 0.01, 1 M steps",
        _LUNARLANDER_PPO, "LunarLander-v3",
        "SB3's Adam ε (1e-5) and orthogonal initialisation keep gorila's own; its 16 envs are 2 actors of 8"),
    Preset(
        "lunarlander-ppo-fast", "ppo",
        "measured here (docs/benchmarks.md: RL-Zoo's LunarLander PPO with 10 epochs, the fewest env steps to 200 "
        "found)",
        "PPO on LunarLander-v3: lunarlander-ppo with 10 epochs over each batch instead of 4",
        {**_LUNARLANDER_PPO, "epochs": 10}, "LunarLander-v3",
        "seeds 0, 1, 2 reached a greedy evaluation >= 200 after 377 k, 475 k and 311 k env steps "
        "(local runtime; lunarlander-ppo, RL-Zoo's own: 508 k, 672 k, 442 k)"),
    Preset(
        "minatar-breakout-impala", "impala",
        "measured here (docs/benchmarks.md: IMPALA's Breakout preset, the fastest settings to DQN's score found on "
        "2 cores)",
        "IMPALA on MinAtar Breakout: its MinAtar settings with RMSProp at 7e-3 and an entropy bonus of 0.025",
        {"env": "MinAtar/Breakout-v1", **MINATAR["impala"], "lr": 7e-3, "entropy_coef": 0.025}, "MinAtar/Breakout-v1",
        "seeds 0-4 reached a training average of 10 in medians of 22.5, 26.7 and 26.0 s in three sets (IMPALA's "
        "own 3e-3 and 0.01: 42.6 s over fifteen runs); on Asterix and Freeway the same settings learnt slower, on "
        "SpaceInvaders no faster"),
    Preset(
        "lunarlander-a2c", "a3c",
        "measured here (docs/benchmarks.md: the best LunarLander-v3 A2C setting found on 2 cores)",
        "A2C on LunarLander-v3: 2 workers, 16-step rollouts, λ 0.95, soft target 0.1",
        {"env": "LunarLander-v3", "mode": "sync", "workers": 2, "unroll_length": 16, "gae_lambda": 0.95,
         "target_tau": 0.1, "entropy_coef": 0.01, "lr_policy": 7e-4, "lr_value": 7e-4, "max_grad_norm": 0.5,
         "eval_every_s": 5.0},
        "LunarLander-v3", "seed 0 reached an evaluation >= 200 after 0.6 M steps; seeds 1 and 2 peaked near 186"),
    *(Preset(f"minatar-{algo}", algo,
             "Young & Tian 2019, MinAtar (Table 1's settings, with the shorter schedules measured here)",
             f"the MinAtar settings of {algo}, which every MinAtar id gets anyway",
             {"env": "MinAtar/Breakout-v1", **settings}, "minatar")
      for algo, settings in MINATAR.items()),
    *_CONTINUOUS_PRESETS,
    *RECURRENT_PRESETS,
)

#: The named presets by name (``--preset``), in the order ``gorila presets`` lists them.
PRESETS: dict[str, Preset] = {p.name: p for p in _PRESETS}


def preset(algo: str, env: str | None) -> dict[str, Any]:
    """The settings ``algo`` gets on ``env`` unless given (empty for envs without a preset): the
    family's settings, and its published step budget for every RL algorithm."""
    if env is None or not is_minatar(env) or algo not in ALGORITHMS or not ALGORITHMS[algo].is_rl:
        return {}
    return {**MINATAR.get(algo, {}), "total_steps": PUBLISHED_BUDGETS["minatar"].steps}


def budget_source(values: Mapping[str, Any], default_env: str) -> str:
    """Where an RL run's ``--total-steps`` comes from, given the settings it was given (``values``,
    as :func:`with_preset` takes them; ``default_env`` for a run given no env): the flag itself,
    the named preset, the env family's published budget, or gorila's default::

        budget_source({"env": "MinAtar/Breakout-v1"}, "CartPole-v1")   # "MinAtar's published budget, ..."
        budget_source({"env": "CartPole-v1"}, "CartPole-v1")           # "gorila's default"
    """
    if "total_steps" in values:
        return "--total-steps given"
    named_settings = PRESETS[values["preset"]].settings if values.get("preset") in PRESETS else {}
    if "total_steps" in named_settings:
        return f"preset {values['preset']}"  # whose source the line before names
    env = values.get("env", named_settings.get("env", default_env))
    if is_minatar(env):
        return PUBLISHED_BUDGETS["minatar"].source
    return "gorila's default"


def algo_of(name: str | None) -> str | None:
    """The algorithm of the preset ``name`` (``None`` for none, or an unknown name, which
    :func:`named` refuses in words): a run given a preset and no algorithm runs the preset's."""
    return PRESETS[name].algo if name in PRESETS else None


def named(name: str, algo: str) -> Preset:
    """The preset ``--preset name`` names, checked against the run's algorithm."""
    if name not in PRESETS:
        raise ConfigError("preset", f"unknown preset {name!r}; gorila presets lists them: {', '.join(PRESETS)}")
    found = PRESETS[name]
    if found.algo != algo:
        raise ConfigError("preset", f"{name} is a setting of --algo {found.algo}, not {algo}")
    return found


def with_preset(algo: str, values: dict[str, Any], machine: Machine | None = None) -> dict[str, Any]:
    """``values`` laid over the named preset (``values["preset"]``, its counts scaled to
    ``machine``, this one by default), itself laid over the preset of the run's ``env``."""
    filled: dict[str, Any] = {}
    if values.get("preset") is not None:
        chosen = named(values["preset"], algo)
        filled = chosen.values(machine or Machine.here())
        env = values.get("env", filled.get("env"))
        assert env is not None  # every preset names its env
        chosen.check_env(env)
    return {**preset(algo, values.get("env", filled.get("env"))), **filled, **values}


def source(name: str | None) -> str | None:
    """Where the preset ``name`` comes from (``None`` for no preset)."""
    return None if name is None else PRESETS[name].source


def table() -> str:
    """``gorila presets``: every named preset, its algorithm, what it sets and where it comes from."""
    lines = []
    for p in PRESETS.values():
        lines += [f"{p.name}  (--algo {p.algo})", f"    {p.summary}", f"    source: {p.source}"]
        if p.note:
            lines.append(f"    note: {p.note}")
        shown = ", ".join(f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}") for k, v in p.settings.items())
        lines += [f"    sets: {shown}" + (" (and the counts of processes, scaled to the machine)" if p.scaled else ""),
                  ""]
    return "\n".join(lines).rstrip() + "\n"


__all__ = ["MINATAR", "PRESETS", "PUBLISHED_BUDGETS", "Preset", "PublishedBudget", "algo_of",
           "budget_source", "named", "preset", "source", "table", "with_preset"]
