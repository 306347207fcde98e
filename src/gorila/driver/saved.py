"""A saved run, read back: its configuration and the parameters of its ``best`` or ``last`` checkpoint.

A run directory keeps two kinds of checkpoint (:func:`checkpoint_dir`): ``checkpoints/`` the
periodic ones a run resumes from (``last``), and ``checkpoints/best/`` the parameters of the best
evaluation so far, saved as that evaluation judged them (``best``).
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gorila.checkpoint import load_checkpoint
from gorila.driver.progress import check_run_meta
from gorila.envs.normalize import Statistics
from gorila.errors import CheckpointError, ConfigError
from gorila.params.optim import all_finite
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

        saved = SavedRun.open("runs/dqn-CartPole-v1-20261122-081500", algorithms=ALGORITHMS)
        saved.algo, saved.config[saved.algo]["env"], saved.params   # flat float32 server parameters
        SavedRun.open(path, checkpoint="last", algorithms=ALGORITHMS)   # the newest periodic checkpoint

    ``checkpoint="best"`` (the default) reads the best evaluation's parameters, or the ``last``
    checkpoint where the run has no best one yet (no evaluation finished, or lstsq) or where its
    best one is damaged (``fallback`` then says why); ``checkpoint`` says which was read. A
    ``config.json`` that is damaged, edited or a link out of the directory is a ``ConfigError``
    naming ``run_dir``, and so is one whose algorithm is not among ``algorithms`` (the registry's
    names, which the caller hands down: the driver sits below the algorithms). ``statistics`` are the
    normalisation statistics the checkpoint holds (``--normalize-obs``: the observations' statistics
    its policy acts through; empty without).
    """

    run_dir: Path
    config: dict
    params: np.ndarray
    meta: dict
    checkpoint: str = "last"
    fallback: str | None = None  # why the best checkpoint was not the one read
    statistics: Statistics = field(default_factory=Statistics)

    @property
    def algo(self) -> str:
        return self.config["algo"]

    @classmethod
    def open(cls, path: Path | str, checkpoint: str = "best", *, algorithms: Collection[str]) -> SavedRun:
        path = Path(path)
        run_dir = path.parent if path.name == "checkpoints" else path
        config_path = run_dir / "config.json"
        if not os.path.lexists(config_path):
            raise ConfigError("run_dir", f"{path} is neither a run directory nor its checkpoints/ (no {config_path})")
        config = _read_config(config_path, run_dir, algorithms)
        directory = checkpoint_dir(run_dir, checkpoint)
        fallback = None
        if checkpoint == "best" and any(directory.glob("ckpt-*.json")):
            try:
                arrays, meta = load_checkpoint(directory, check=_playable)
                return cls(run_dir, config, server_params(arrays), meta, checkpoint,
                           statistics=Statistics.from_arrays(arrays))
            except CheckpointError as err:
                fallback = f"the best checkpoint is damaged, so the last good one is played ({err})"
        if checkpoint == "best":
            checkpoint, directory = "last", checkpoint_dir(run_dir, "last")
        arrays, meta = load_checkpoint(directory, check=_playable_run)
        return cls(run_dir, config, server_params(arrays), meta, checkpoint, fallback,
                   Statistics.from_arrays(arrays))


def _playable(arrays: dict[str, np.ndarray], meta: dict) -> None:
    """A best checkpoint's check: damaged normalisation statistics or parameters that are not all
    finite refuse it (the last is played). No training step saves NaN or infinite parameters (a
    step that would make them is rolled back), so such a file was edited, its checksums sealed
    again, and would be scored as if it were a policy."""
    Statistics.from_arrays(arrays)
    params = server_params(arrays)
    if not all_finite(params):
        bad = int(np.count_nonzero(~np.isfinite(params)))
        raise CheckpointError(f"{bad:,} of its {params.size:,} parameters are NaN or infinite, which no training "
                              "step saves")


def _playable_run(arrays: dict[str, np.ndarray], meta: dict) -> None:
    """A periodic checkpoint's check for playing it: its run record (:func:`check_run_meta`) and :func:`_playable`."""
    check_run_meta(arrays, meta)
    _playable(arrays, meta)


def _read_config(path: Path, run_dir: Path, algorithms: Collection[str]) -> dict:
    """A run's ``config.json`` (not through a link), refused by name unless it describes a run of
    one of ``algorithms``."""
    from gorila.settings_file import read_settings

    config = read_settings(path, "run_dir", inside=run_dir)
    algo = config.get("algo") if isinstance(config, dict) else None
    if (not isinstance(algo, str) or algo not in algorithms or not isinstance(config.get("run"), dict)
            or not isinstance(config.get(algo), dict)):
        raise ConfigError("run_dir", f"{path} does not describe a gorila run: it was damaged or edited")
    return config
