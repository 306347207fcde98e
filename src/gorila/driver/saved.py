"""A saved run, read back: its configuration and the parameters of its newest good checkpoint."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gorila.checkpoint import load_checkpoint
from gorila.driver.progress import check_run_meta
from gorila.errors import ConfigError
from gorila.params.server import server_params


@dataclass(frozen=True)
class SavedRun:
    """``SavedRun.open(path)`` accepts a run directory or its ``checkpoints/`` directory::

        saved = SavedRun.open("runs/dqn-CartPole-v1-20261122-081500")
        saved.algo, saved.config[saved.algo]["env"], saved.params   # flat float32 server parameters
    """

    run_dir: Path
    config: dict
    params: np.ndarray
    meta: dict

    @property
    def algo(self) -> str:
        return self.config["algo"]

    @classmethod
    def open(cls, path: Path | str) -> SavedRun:
        path = Path(path)
        run_dir = path.parent if path.name == "checkpoints" else path
        config_path = run_dir / "config.json"
        if not config_path.is_file():
            raise ConfigError("run_dir", f"{path} is neither a run directory nor its checkpoints/ (no {config_path})")
        arrays, meta = load_checkpoint(run_dir / "checkpoints", check=check_run_meta)
        return cls(run_dir, json.loads(config_path.read_text()), server_params(arrays), meta)
