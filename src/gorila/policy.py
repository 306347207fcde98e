"""A saved run's policy, outside training: ``gorila eval`` and loading it from Python."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from gorila.algos.registry import ALGORITHMS
from gorila.config import RunConfig, values_from_json
from gorila.driver.saved import SavedRun
from gorila.envs.evaluation import NORMALIZATION_SOURCE, evaluate, human_normalized
from gorila.envs.make import is_atari
from gorila.errors import ConfigError
from gorila.nets import FlatParams


def evaluate_saved(path: Path, episodes: int, epsilon: float | None, noop_max: int, seed: int) -> dict[str, Any]:
    """Scores of ``episodes`` episodes with the newest good checkpoint of the run at ``path``;
    ``epsilon=None`` plays with the exploration rate the run evaluated with."""
    saved = SavedRun.open(path)
    algorithm = ALGORITHMS[saved.algo]
    if not algorithm.is_rl:
        raise ConfigError("path", f"{saved.run_dir} is a {saved.algo} run: it has no policy to evaluate")
    values = values_from_json(saved.config[saved.algo])
    run = RunConfig(**{k: v for k, v in saved.config["run"].items() if k not in ("run_dir", "resume")})
    configs = [cls(**{k: v for k, v in values.items() if k in cls.__dataclass_fields__})
               for cls in algorithm.config_classes()]
    env = configs[-1].env
    if epsilon is None:  # builders record the rate they resolved
        epsilon = values["eval_epsilon"]
    network_fn, policy_fn = algorithm.policy_fn()(run, *configs)
    net = network_fn().eval()
    FlatParams(net).set(saved.params)
    with torch.no_grad():
        scores = evaluate(policy_fn(net), env, episodes, epsilon, seed=seed, noop_max=noop_max)
    out = {"run_dir": str(saved.run_dir), "algo": saved.algo, "env": env,
           "checkpoint_env_steps": saved.meta.get("env_steps"), "episodes": episodes, "epsilon": epsilon,
           "mean": float(np.mean(scores)), "min": float(np.min(scores)), "max": float(np.max(scores)),
           "scores": scores}
    if is_atari(env):
        out["human_normalized"] = human_normalized(env, out["mean"])
        out["human_normalized_table"] = NORMALIZATION_SOURCE
    return out
