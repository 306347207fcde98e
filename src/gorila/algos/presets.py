"""Settings a run gets for an environment family unless the user gave them: MinAtar's, for now.

:func:`gorila.launch.configs_from_values` lays the user's settings over the preset, so that
``gorila train --algo dqn --env MinAtar/Breakout-v1`` learns without tuning, and any flag given
still wins::

    with_preset("dqn", {"env": "MinAtar/Breakout-v1", "lr": 1e-4})
    # {"optimizer": "adam", "lr": 1e-4, "batch_size": 32, ..., "env": "MinAtar/Breakout-v1"}

The values end in ``config.json`` like any other, so a resumed run keeps them. The defaults of
every algorithm were chosen for CartPole's MLPs (AdaGrad at 3e-2 for DQN, short schedules); a
convolution over MinAtar's grids wants Adam or RMSProp at ~1e-3 and longer exploration. The
numbers follow Young & Tian (2019) — batch 32, a 100 k replay, ε annealed to 0.1, a hard target
update every 1000 updates, no no-op starts (MinAtar's sticky actions already randomise
episodes), AC(λ) with λ = 0.8 — with shorter schedules and higher learning rates, since on a
2-core machine a run sees a few hundred thousand frames, not 5 M.
"""

from __future__ import annotations

from typing import Any

from gorila.envs.make import is_minatar

_MINATAR_RL = {"eval_noop_max": 0, "eval_episodes": 20, "eval_every_s": 10.0}

MINATAR: dict[str, dict[str, Any]] = {
    "dqn": {**_MINATAR_RL, "optimizer": "adam", "lr": 1e-3, "batch_size": 32, "replay_capacity": 100_000,
            "learning_starts": 2_000, "eps_end": 0.1, "eps_decay_updates": 25_000, "target_update": "hard:1000",
            "actor_refresh": 4},
    "apex": {**_MINATAR_RL, "lr": 5e-4, "batch_size": 32, "dueling": True, "target_update": "hard:1000",
             "learning_starts": 2_000},
    "a3c": {**_MINATAR_RL, "lr_policy": 1e-3, "lr_value": 1e-3, "gae_lambda": 0.8, "rollout_steps": 16},
}


def preset(algo: str, env: str | None) -> dict[str, Any]:
    """The settings ``algo`` gets on ``env`` unless given (empty for envs without a preset)."""
    return dict(MINATAR.get(algo, {})) if env is not None and is_minatar(env) else {}


def with_preset(algo: str, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` laid over the preset of their ``env`` for ``algo``."""
    return {**preset(algo, values.get("env")), **values}
