"""A saved run, read back: its configuration and the parameters of its ``best`` or ``last`` checkpoint.

A run directory keeps two kinds of checkpoint (:func:`checkpoint_dir`): ``checkpoints/`` the
periodic ones a run resumes from (``last``), and ``checkpoints/best/`` the parameters of the best
evaluation so far, saved as that evaluation judged them (``best``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gorila.checkpoint import load_checkpoint
from gorila.driver.progress import check_run_meta
from gorila.errors import ConfigError
from gorila.params.server import server_params


CHECKPOINTS = ("best", "last")


def checkpoint_dir(run_dir: Path, which: str) -> Path:
    """Where a run directory keeps its ``best`` or its ``last`` checkpoints."""
    if which not in CHECKPOINTS:
        raise ConfigError("checkpoint", f"must be one of {', '.join(CHECKPOINTS)}, got {which!r}")
    return run_dir / "checkpoints" / "best" if which == "best" else run_dir / "checkpoints"


@dataclass(frozen=True)
class SavedRun:
    """``SavedRun.open(path)`` accepts a run directory or its ``checkpoints/`` directory::

        saved = SavedRun.open("runs/dqn-CartPole-v1-20261122-081500")
        saved.algo, saved.config[saved.algo]["env"], saved.params   # flat float32 server parameters
        SavedRun.open(path, checkpoint="last")                       # the newest periodic checkpoint

    ``checkpoint="best"`` (the default) reads the best evaluation's parameters, or the ``last``
    checkpoint where the run has no best one yet (no evaluation finished, or lstsq);
    ``checkpoint`` then says which was read.
    """

    run_dir: Path
    config: dict
    params: np.ndarray
    meta: dict
    checkpoint: str = "last"

    @property
    def algo(self) -> str:
        return self.config["algo"]

    @classmethod
    def open(cls, path: Path | str, checkpoint: str = "best") -> SavedRun:
        path = Path(path)
        run_dir = path.parent if path.name == "checkpoints" else path
        config_path = run_dir / "config.json"
        if not config_path.is_file():
            raise ConfigError("run_dir", f"{path} is neither a run directory nor its checkpoints/ (no {config_path})")
        directory = checkpoint_dir(run_dir, checkpoint)
        if checkpoint == "best" and not any(directory.glob("ckpt-*.json")):
            checkpoint, directory = "last", checkpoint_dir(run_dir, "last")
        arrays, meta = load_checkpoint(directory, check=check_run_meta if checkpoint == "last" else None)
        return cls(run_dir, json.loads(config_path.read_text()), server_params(arrays), meta, checkpoint)
