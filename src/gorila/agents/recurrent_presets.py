"""The named presets of recurrent agents (``--core lstm``) on the partially observed tasks of
:mod:`gorila.envs.memory`: CartPole with its velocities hidden, and the memory-length task."""

from __future__ import annotations

from typing import Any

from gorila.agents.preset import Preset

STATELESS_CARTPOLE = "gorila/StatelessCartPole-v1"
MEMORY_LENGTH = "gorila/MemoryLength-v0"

# RL-Zoo's RecurrentPPO on CartPoleNoVel-v1 (hyperparams/ppo_lstm.yml): 8 envs x 32 steps a batch,
# one minibatch of 256 (its 8 sequences), 20 epochs, gamma 0.98, lambda 0.8, Adam at 1e-3 falling
# linearly to 0 over 100 k steps, clip 0.2, no entropy bonus, observations and rewards normalised,
# an LSTM of 64. Its MLPs of 64 sit after the LSTM; gorila's torso of 64 sits before it.
_ZOO_PPO_LSTM: dict[str, Any] = {
    "env": STATELESS_CARTPOLE, "core": "lstm", "core_size": 64, "hidden": (64,), "mode": "sync", "actors": 2,
    "envs_per_actor": 4, "unroll_length": 32, "minibatches": 1, "epochs": 20, "gamma": 0.98, "gae_lambda": 0.8,
    "lr": 1e-3, "lr_decay": "linear", "clip": 0.2, "entropy_coef": 0.0, "normalize_obs": True,
    "normalize_reward": True, "total_steps": 100_000}

# Segments as long as two of its 11-step episodes: its envs' episodes all begin together, so every segment holds
# each cue with its question, and the answer's gradient reaches the cue within the unroll.
_MEMORY: dict[str, Any] = {"env": MEMORY_LENGTH, "core": "lstm", "core_size": 64, "hidden": (64,),
                           "eval_episodes": 20, "total_steps": 500_000}

RECURRENT_PRESETS = (
    Preset(
        "stateless-cartpole-ppo", "ppo",
        "RL-Baselines3-Zoo, hyperparams/ppo_lstm.yml, CartPoleNoVel-v1 (SB3-contrib's RecurrentPPO)",
        "LSTM PPO on CartPole without velocities: 8 envs x 32 steps a batch, 20 epochs of whole sequences, γ 0.98, "
        "λ 0.8, Adam 1e-3 falling to 0 over 100 k steps, observations and rewards normalised, an LSTM of 64",
        _ZOO_PPO_LSTM, STATELESS_CARTPOLE,
        "the zoo's MLPs of 64 after its LSTM (one for the policy, one for the value) are one torso of 64 before "
        "it here; its clip range also falls linearly to 0, gorila's stays at 0.2. Seed 0 reached 475 after 9.7 k "
        "env steps (31 s from the command, local runtime, a loaded machine)"),
    Preset(
        "stateless-cartpole-impala", "impala",
        "gorila's own: IMPALA's CartPole settings with an LSTM of 64 after a torso of 64",
        "LSTM IMPALA on CartPole without velocities: 2 actors of 8 envs, 20-step segments, RMSProp at 3e-3, "
        "an entropy bonus of 0.01, observations normalised",
        {"env": STATELESS_CARTPOLE, "core": "lstm", "core_size": 64, "hidden": (64,), "normalize_obs": True},
        STATELESS_CARTPOLE,
        "seed 0 reached 475 after 250 k env steps (90 s from the command, local runtime, a loaded machine)"),
    Preset(
        "memory-length-impala", "impala",
        "gorila's own: the memory-length task (bsuite's), a cue recalled 10 steps later",
        "LSTM IMPALA on gorila/MemoryLength-v0: 22-step segments (two whole episodes) of 2 actors of 8 envs, an "
        "LSTM of 64, judged on 20 episodes",
        {**_MEMORY, "unroll_length": 22}, MEMORY_LENGTH,
        "seed 0 answered all 20 evaluation episodes right after 79 k env steps (19 s, local runtime)"),
    Preset(
        "memory-length-ppo", "ppo",
        "gorila's own: the memory-length task (bsuite's), a cue recalled 10 steps later",
        "LSTM PPO on gorila/MemoryLength-v0: 22-step segments (two whole episodes) of 16 envs, an LSTM of 64, 4 "
        "epochs of 2 minibatches, an entropy bonus of 0.01, judged on 20 episodes",
        {**_MEMORY, "unroll_length": 22, "minibatches": 2, "epochs": 4, "gamma": 0.99, "gae_lambda": 0.95,
         "entropy_coef": 0.01},
        MEMORY_LENGTH,
        "with 16-step segments seed 0 answered all 20 evaluation episodes right after 98 k env steps (81 s, local "
        "runtime)"),
)
