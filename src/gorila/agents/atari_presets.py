"""The named presets for Atari games (``ALE/<Game>-v5``): the papers' settings of Gorila DQN, Nature DQN,
Ape-X and A3C, and gorila's own setting that learns Pong on a few CPU cores (``pong-cpu``)."""

from __future__ import annotations

from typing import Any

from gorila.agents.preset import Preset
from gorila.machine import Machine

_ATARI_EVAL = {"eval_noop_max": 30, "eval_epsilon": 0.05}  # Nature DQN's evaluation: up to 30 no-ops, ε 0.05


def _gorila_scaled(machine: Machine) -> dict[str, Any]:
    # Gorila ran 100 bundles on 31 parameter shards: the same ratio over this machine's CPUs, one
    # process each, and no more bundles than 1 M-frame replays fit in memory.
    shards = max(1, round(machine.cpus * 31 / 131))
    bundles = max(1, min(machine.cpus - shards, machine.replays_that_fit(1_000_000)))
    return {"shards": shards, "actors": bundles}


def _apex_scaled(machine: Machine) -> dict[str, Any]:
    # Ape-X ran 360 actors beside one learner and the replay: here one actor per CPU left over.
    return {"actors": max(1, machine.cpus - 2)}


def a3c_scaled(machine: Machine) -> dict[str, Any]:
    # A3C ran 16 actor-learner threads on one 16-core machine: one worker per CPU, at most 16.
    return {"workers": max(1, min(16, machine.cpus))}


ATARI_PRESETS = (
    Preset(
        "gorila-atari", "dqn",
        "Nair et al. 2015, Massively Parallel Methods for Deep Reinforcement Learning (Gorila), §5 Experiments",
        "Gorila DQN: bundles of actor, 1 M-frame replay and learner; AdaGrad; ε 1 → 0.1 over 1 M global updates; "
        "target every 60,000 updates",
        {"env": "ALE/Breakout-v5", "mode": "async", "replay": "local", "replay_capacity": 1_000_000,
         "eps_start": 1.0, "eps_end": 0.1, "eps_decay_updates": 1_000_000, "target_update": "hard:60000",
         "optimizer": "adagrad", "lr": 0.03, **_ATARI_EVAL,
         # DQN's own settings, which Gorila kept (Nature DQN, Extended Data Table 1)
         "batch_size": 32, "gamma": 0.99, "learning_starts": 50_000, "train_every": 4, "target": "max",
         "loss": "huber"},
        "atari",
        "bundles and shards keep Gorila's 100 : 31 over this machine's CPUs (and the bundles' replays fit in its "
        "memory); the paper gives neither the learning rate, the staleness bound nor the outlier filter's k: "
        "AdaGrad at 0.03 (gorila's AdaGrad default before Adam became its default) and gorila's defaults",
        _gorila_scaled),
    Preset(
        "nature-dqn", "dqn",
        "Mnih et al. 2015, Human-level control through deep reinforcement learning, Nature 518, "
        "Extended Data Table 1",
        "DQN: one actor and learner, 1 M replay, RMSProp 2.5e-4, ε 1 → 0.1 over 1 M frames, "
        "target every 10,000 updates",
        {"env": "ALE/Breakout-v5", "mode": "async", "replay": "local", "actors": 1, "shards": 1,
         "replay_capacity": 1_000_000, "batch_size": 32, "gamma": 0.99, "learning_starts": 50_000,
         "train_every": 4, "target_update": "hard:10000", "target": "max", "loss": "huber",
         "optimizer": "rmsprop", "lr": 2.5e-4, "eps_start": 1.0, "eps_end": 0.1,
         "eps_decay_updates": 250_000,  # 1 M frames at one update per 4
         "total_steps": 50_000_000, **_ATARI_EVAL},
        "atari",
        "RMSProp's momentum 0.95 and minimum squared gradient 0.01 are the paper's; gorila's RMSProp keeps its own "
        "(ρ 0.99, ε 1e-5); gradients are clipped to norm 10 (gorila's default) besides the Huber loss"),
    Preset(
        "apex-atari", "apex",
        "Horgan et al. 2018, Distributed Prioritized Experience Replay (Ape-X), Appendix C (Ape-X DQN)",
        "Ape-X DQN: per-actor ε 0.4^(1+7i/(N-1)), 3-step double dueling Q, prioritized 2 M replay (α 0.6, β 0.4), "
        "batch 512, target every 2,500 batches",
        {"env": "ALE/Breakout-v5", "mode": "async", "replay_capacity": 2_000_000, "learning_starts": 50_000,
         "batch_size": 512, "n_step": 3, "gamma": 0.99, "priority_alpha": 0.6, "priority_beta": 0.4,
         "eps_base": 0.4, "eps_alpha": 7.0, "actor_refresh": 100,  # 400 frames at 4 frames a step
         "add_every": 50, "target": "double", "dueling": True, "target_update": "hard:2500",
         "optimizer": "rmsprop", "lr": 6.25e-5, "max_grad_norm": 40.0, **_ATARI_EVAL},
        "atari",
        "360 actors in the paper; here one per spare CPU; its centered RMSProp (decay 0.95, ε 1.5e-7) is gorila's "
        "plain RMSProp", _apex_scaled),
    Preset(
        "a3c-atari", "a3c",
        "Mnih et al. 2016, Asynchronous Methods for Deep Reinforcement Learning (A3C), §5.1 and Supplementary §8",
        "A3C: 16 actor-learners, t_max 5, shared RMSProp, γ 0.99, entropy 0.01",
        {"env": "ALE/Breakout-v5", "mode": "async", "envs_per_actor": 1, "unroll_length": 5, "gamma": 0.99,
         "entropy_coef": 0.01, "optimizer": "rmsprop", "lr_policy": 7e-4, "lr_value": 7e-4, "gae_lambda": 1.0,
         "target_tau": 1.0, **_ATARI_EVAL},
        "atari",
        "the paper samples each run's learning rate log-uniformly from 1e-4 to 1e-2; 7e-4 is the value "
        "later reproductions (OpenAI Baselines) settled on. Workers: one per CPU, at most the paper's 16",
        a3c_scaled),
    Preset(
        "pong-cpu", "impala",
        "Espeholt et al. 2018, IMPALA, Appendix G (Table G.1: unroll 20, RMSProp ε 0.01, entropy 0.01, "
        "γ 0.99, clipped rewards); OpenAI Baselines A2C on Atari (t_max 5, RMSProp 7e-4, gradient norm 0.5, "
        "16 envs); Mnih et al. 2013's small CNN",
        "IMPALA (V-trace) sized for a CPU: 2 actors x 16 EnvPool envs, 5-step segments taken one at a time, "
        "RMSProp 7e-4, the 2-layer CNN of DQN 2013",
        {"env": "ALE/Pong-v5", "mode": "async", "encoder": "mnih2013", "actors": 2, "envs_per_actor": 16,
         "unroll_length": 5, "batch_size": 1, "optimizer": "rmsprop", "lr": 7e-4, "max_grad_norm": 0.5,
         "entropy_coef": 0.01, "gamma": 0.99, "terminal_on_life_loss": True, "target_return": 18.0,
         "eval_every_s": 120.0, "total_steps": 10_000_000},
        "atari",
        "not a paper's setting: IMPALA's learner with A2C's small steps. Batches of 320 samples (IMPALA's 32 x 20 "
        "halved) and learning rates 6e-4 to 5e-3 had not moved Pong's return by 0.9 M steps here; one segment of "
        "16 x 5 per update did (docs/benchmarks.md, 'Pong learnt on a 2-core CPU'). Life loss ends the learner's "
        "episode (Baselines' EpisodicLife); games are scored whole"),
)
