"""How a parameter shard process comes back after a crash: from the run's last checkpoint.

A restartable shard process is built from a :class:`ShardRecovery` (small: Ray keeps a
restartable process's creation arguments). When it first receives its shard it saves the
shard's starting state, learning rates included, under ``checkpoints/param-shard<i>/``; when
Ray starts it again after a crash, :meth:`ShardRecovery.restore` builds the shard from that
state, overlays the newest good run checkpoint's ``shard<i>.*`` arrays (its version, parameters
and optimizer state), and puts it in a new epoch. No Ray here::

    recovery = ShardRecovery(run_dir / "checkpoints", shard_id=0, rule=rule, optimizer="adam")
    recovery.save_start(shard)                  # on first load
    shard, source = recovery.restore()          # after a restart: source names the checkpoint

The run directory must be reachable from the shard's node (one machine, or a shared filesystem),
as for replay shards' checkpoints.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gorila.checkpoint import load_checkpoint, save_checkpoint
from gorila.errors import CheckpointError
from gorila.params import ParameterShard, UpdateRule
from gorila.params.learning_rate import LearningRate, LinearDecay
from gorila.params.shard import check_state

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShardRecovery:
    """Where shard ``shard_id`` of a run saves its start and finds the run's checkpoints (see the module doc)."""

    checkpoints: Path
    shard_id: int
    rule: UpdateRule
    optimizer: str
    nonfinite_limit: int = 10

    @property
    def start_dir(self) -> Path:
        return Path(self.checkpoints) / f"param-shard{self.shard_id}"

    def save_start(self, shard: ParameterShard) -> None:
        """Save ``shard`` as it starts: what a restart builds on until the run's first checkpoint."""
        lr: dict[str, np.ndarray]
        if isinstance(shard.lr, LinearDecay):  # float64: the same line after a restart
            lr = {"lr": np.array([shard.lr.lr], np.float64), "lr_decay_steps": np.array([shard.lr.steps], np.int64)}
        else:
            lr = {"lr": np.asarray(shard.lr, np.float32).reshape(-1)}  # safetensors keeps no 0-d arrays
        save_checkpoint(self.start_dir, {**shard.state_dict(), **lr}, {"shard_id": self.shard_id}, keep=1)

    def restore(self) -> tuple[ParameterShard, str]:
        """The shard as of the newest good checkpoint, in a new epoch; and which checkpoint that was."""
        start, _ = load_checkpoint(self.start_dir)
        saved_lr = start.pop("lr")
        decay_steps = start.pop("lr_decay_steps", None)
        # One rate (or a shard of one parameter, where a vector of one means the same).
        rate = float(saved_lr[0]) if saved_lr.size == 1 else saved_lr
        lr: LearningRate = rate if decay_steps is None else LinearDecay(float(rate), int(decay_steps[0]))
        shard = ParameterShard(start["params"], self.rule, self.optimizer, lr=lr,
                               shard_id=self.shard_id, nonfinite_limit=self.nonfinite_limit)
        state, source = start, "its start (no run checkpoint yet)"
        prefix = f"shard{self.shard_id}."
        try:  # a checkpoint whose state of this shard no shard reaches is skipped for the one before
            arrays, meta = load_checkpoint(self.checkpoints, check=lambda arrays, meta: check_state(
                {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}, self.shard_id))
        except CheckpointError as err:
            _log.warning("shard %d: %s; restoring its start", self.shard_id, err)
        else:
            state = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
            source = f"the run checkpoint of {meta.get('updates', '?')} updates"
        # Any epoch but the ones before: clients' pushes computed on parameters of earlier lives are refused.
        shard.restore(state, epoch=1 + secrets.randbits(62))
        return shard, source
