"""``gorila eval``: a saved run's parameters played with no-op starts, as during training."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from gorila.algos.registry import ALGORITHMS
from gorila.config import RunConfig, values_from_json
from gorila.envs.evaluation import evaluate, human_normalized
from gorila.envs.make import is_atari
from gorila.nets import FlatParams
from gorila.rl.saved import SavedRun


def evaluate_saved(path: Path, episodes: int, epsilon: float | None, noop_max: int, seed: int) -> dict[str, Any]:
    """Scores of ``episodes`` episodes with the newest good checkpoint of the run at ``path``;
    ``epsilon=None`` plays with the exploration rate the run evaluated with."""
    saved = SavedRun.open(path)
    algorithm = ALGORITHMS[saved.algo]
    if epsilon is None:
        epsilon = saved.config.get("eval_epsilon", algorithm.eval_epsilon)
    run = RunConfig(**{k: v for k, v in saved.config["run"].items() if k != "run_dir"})
    algo_cls = algorithm.config_classes()[0]
    cfg = algo_cls(**values_from_json(saved.config[saved.algo]))
    network_fn, policy_fn = algorithm.policy_fn()(run, cfg)
    net = network_fn().eval()
    FlatParams(net).set(saved.params)
    with torch.no_grad():
        scores = evaluate(policy_fn(net), run.env, episodes, epsilon, seed=seed, noop_max=noop_max)
    out = {"run_dir": str(saved.run_dir), "algo": saved.algo, "env": run.env,
           "checkpoint_env_steps": saved.meta.get("env_steps"), "episodes": episodes, "epsilon": epsilon,
           "mean": float(np.mean(scores)), "min": float(np.min(scores)), "max": float(np.max(scores)),
           "scores": scores}
    if is_atari(run.env):
        out["human_normalized"] = human_normalized(run.env, out["mean"])
    return out
