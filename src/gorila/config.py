"""The run-level configuration every algorithm shares, and the update rule it selects.

Field names are the CLI flags with underscores (``count_within`` is ``--count-within``), so a
:class:`~gorila.errors.ConfigError` names the flag to fix.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from gorila import validate
from gorila.errors import ConfigError
from gorila.params import OPTIMIZERS, UpdateRule

MODES = ("sync", "async", "semi-async")
ALGOS = ("lstsq", "dqn", "a3c")
RUNTIMES = ("local", "ray")


@dataclass(frozen=True)
class RunConfig:
    """What to run and where; validated on construction::

        run = RunConfig(algo="lstsq", mode="sync", workers=4)
        rule = run.rule()          # UpdateRule.synchronous(num_workers=4)
    """

    algo: str = field(default="dqn", metadata={"help": "algorithm", "choices": ALGOS})
    env: str = field(default="CartPole-v1", metadata={"help": "Gymnasium env id (ALE/<Game>-v5 for Atari)"})
    mode: str = field(default="async", metadata={
        "help": "update rule: sync (barrier, mean of all workers), async (apply each push), "
                "semi-async (aggregate counted pushes, tolerate bounded staleness)", "choices": MODES})
    workers: int = field(default=2, metadata={"help": "number of workers (lstsq, a3c) / bundles (dqn)"})
    shards: int = field(default=1, metadata={"help": "parameter-server shards"})
    runtime: str = field(default="ray", metadata={
        "help": "ray (embedded local Ray unless --address / RAY_ADDRESS) or local (one process)",
        "choices": RUNTIMES})
    address: str | None = field(default=None, metadata={"help": "Ray cluster address to join"})
    seed: int = field(default=0, metadata={"help": "random seed"})
    run_dir: Path | None = field(default=None, metadata={
        "help": "output directory", "metavar": "DIR"})
    optimizer: str | None = field(default=None, metadata={
        "help": "server-side optimizer (default: the algorithm's)", "choices": OPTIMIZERS})
    aggregate: int | None = field(default=None, metadata={
        "help": "semi-async: counted pushes per update (default 20)"})
    count_within: int | None = field(default=None, metadata={
        "help": "semi-async: staleness up to which a push counts (default 3)"})
    accept_within: int | None = field(default=None, metadata={
        "help": "semi-async: staleness up to which a push joins the update (default 5)"})
    max_staleness: int | None = field(default=None, metadata={
        "help": "async: reject pushes staler than this (default: no bound)"})

    def __post_init__(self) -> None:
        validate.choice("algo", self.algo, ALGOS)
        validate.choice("mode", self.mode, MODES)
        validate.choice("runtime", self.runtime, RUNTIMES)
        validate.integer("workers", self.workers, low=1, high=1024)
        validate.integer("shards", self.shards, low=1, high=256)
        validate.integer("seed", self.seed, low=0)
        if self.optimizer is not None:
            validate.choice("optimizer", self.optimizer, OPTIMIZERS)
        if self.address and self.runtime != "ray":
            raise ConfigError("address", "joins a Ray cluster: use it with --runtime ray")
        semi_knobs = {k: getattr(self, k) for k in ("aggregate", "count_within", "accept_within")}
        for name, value in semi_knobs.items():
            if value is not None:
                validate.integer(name, value, low=1 if name == "aggregate" else 0)
                if self.mode != "semi-async":
                    raise ConfigError(name, f"applies to --mode semi-async only (mode is {self.mode})")
        if self.max_staleness is not None:
            validate.integer("max_staleness", self.max_staleness, low=0)
            if self.mode != "async":
                raise ConfigError("max_staleness", f"applies to --mode async only (mode is {self.mode})")
        self.rule()  # e.g. --count-within 5 --accept-within 3 is refused here, before anything starts

    def rule(self, num_workers: int | None = None) -> UpdateRule:
        """The update rule ``mode`` and the rule knobs select; ``num_workers`` (default ``workers``)
        is how many gradients a synchronous update waits for."""
        if self.mode == "sync":
            return UpdateRule.synchronous(num_workers=num_workers or self.workers)
        if self.mode == "async":
            return UpdateRule.asynchronous(max_staleness=self.max_staleness)
        defaults = UpdateRule.semi_async()
        return UpdateRule.semi_async(
            aggregate=defaults.aggregate if self.aggregate is None else self.aggregate,
            count_within=defaults.count_within if self.count_within is None else self.count_within,
            accept_within=defaults.accept_within if self.accept_within is None else self.accept_within)

    def resolved_run_dir(self, env_label: str) -> Path:
        """``run_dir`` or ``runs/<algo>-<env>-<time>``; a directory holding another run is refused."""
        if self.run_dir is None:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            return Path("runs") / f"{self.algo}-{env_label.replace('/', '_')}-{stamp}"
        path = Path(self.run_dir)
        if (path / "metrics.csv").exists():
            raise ConfigError("run_dir", f"{path} already holds a run; continue it with --resume {path} "
                                         "or choose another --run-dir")
        return path


def values_from_json(values: dict) -> dict:
    """Config field values as read back from a run's ``config.json``: JSON has no tuples, so
    tuple fields (e.g. ``hidden``) come back as lists and are turned back into tuples here."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
