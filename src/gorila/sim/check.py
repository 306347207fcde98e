"""``gorila simulate --check RUN_DIR...``: the simulator's prediction for each run's own settings,
beside what the run measured.

::

    checks = [check_run(Path("runs/a3c-2"), calibration)]   # a Check per run
    print(CHECK_HEADER); print(checks[0].line())             # updates/s, env steps/s, staleness, errors

A run is predicted from its ``config.json`` (the update rule it ran under, its shards, parameter
cache and straggler), the number of its workers that pushed (``summary.json``) and the calibrated
workload of its algorithm, on this machine as calibrated. What the run measured is its
``summary.json``: updates and env steps per second of training, and the mean staleness of its
pushes. The error is (predicted − measured) / measured for the rates and predicted − measured for
the staleness (a mean near 0 makes a ratio meaningless). The model leaves out what a run does
beside pushing (acting, evaluating, start-up, the driver), so where those share the CPUs the
rates are predicted high; the errors say by how much.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gorila.errors import ConfigError
from gorila.params import UpdateRule
from gorila.sim.calibration import Calibration
from gorila.sim.cluster import Cluster
from gorila.sim.model import Setup, simulate

#: Each algorithm's group of workers that push gradients to the shards (``--server process``).
PUSHERS = {"lstsq": "worker", "a3c": "worker", "impala": "learner", "ppo": "learner", "apex": "learner",
           "dqn": "bundle"}
#: Pushes simulated per worker, and at least this many in all (as ``gorila simulate``'s sweeps).
GRADIENTS_PER_WORKER, MIN_GRADIENTS = 5, 1000
_SAME_SETTINGS = ("run with the calibration's settings (gorila simulate --calibrate measures lstsq with --n 25000 "
                  "--d 400 --condition 100, a3c and impala with their CartPole-v1 defaults)")
CHECK_HEADER = (f"{'run':<40} {'algo':>6} {'rule':>10} {'workers':>7} {'updates/s':>21} {'env steps/s':>23} "
                f"{'staleness':>17}")


@dataclass(frozen=True)
class Check:
    """One run's measured figures beside the prediction for its settings."""

    run_dir: str
    algo: str
    mode: str
    workers: int
    measured_updates_per_s: float
    predicted_updates_per_s: float
    measured_env_steps_per_s: float | None
    predicted_env_steps_per_s: float
    measured_staleness_mean: float
    predicted_staleness_mean: float

    @property
    def updates_error(self) -> float:
        return _relative(self.predicted_updates_per_s, self.measured_updates_per_s)

    @property
    def env_steps_error(self) -> float | None:
        if self.measured_env_steps_per_s is None:
            return None
        return _relative(self.predicted_env_steps_per_s, self.measured_env_steps_per_s)

    @property
    def staleness_error(self) -> float:
        return self.predicted_staleness_mean - self.measured_staleness_mean

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "updates_error": self.updates_error, "env_steps_error": self.env_steps_error,
                "staleness_error": self.staleness_error}

    def line(self) -> str:
        """Measured → predicted (error), per figure."""
        steps = (f"{self.measured_env_steps_per_s:>7.0f} → {self.predicted_env_steps_per_s:>7.0f} "
                 f"({self.env_steps_error:+.0%})" if self.env_steps_error is not None else f"{'—':>23}")
        return (f"{Path(self.run_dir).name[-40:]:<40} {self.algo:>6} {self.mode:>10} {self.workers:>7} "
                f"{self.measured_updates_per_s:>6.1f} → {self.predicted_updates_per_s:>6.1f} "
                f"({self.updates_error:+.0%}) {steps} "
                f"{self.measured_staleness_mean:>5.2f} → {self.predicted_staleness_mean:>5.2f} "
                f"({self.staleness_error:+.2f})")


def _relative(predicted: float, measured: float) -> float:
    return (predicted - measured) / measured if measured else math.inf


def _read(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ConfigError("check", f"cannot read {path} ({what}): {err}") from None
    if not isinstance(data, dict):
        raise ConfigError("check", f"{path} ({what}) is not a JSON object")
    return data


def _rule(recorded: dict[str, Any]) -> UpdateRule:
    """The rule a run's ``config.json`` recorded (infinity written as ``"inf"``); a run recorded
    before rules said how clients push pipelined under every rule without a barrier."""
    values: dict[str, Any] = {k: (math.inf if v == "inf" else v) for k, v in recorded.items()}
    values.setdefault("pipelined", not values.get("barrier", False))
    return UpdateRule(**values)


def check_run(run_dir: Path, calibration: Calibration, seed: int = 0) -> Check:
    """The prediction for the run in ``run_dir`` beside what it measured (see the module doc).
    A run the model cannot describe is a :class:`ConfigError` saying why: no summary (unfinished),
    a learner that owns the parameters (nothing pushes to the shards), or a workload other than the
    calibrated one (another network or problem)."""
    config = _read(run_dir / "config.json", "the run's settings")
    summary = _read(run_dir / "summary.json", "written when a run ends")
    algo, run = config.get("algo"), config.get("run", {})
    if algo not in PUSHERS:
        raise ConfigError("check", f"{run_dir}: algorithm {algo!r} has no pushing workers to predict")
    if run.get("server") == "learner":
        raise ConfigError("check", f"{run_dir}: --server learner (the learner owns the parameters): no gradient "
                                   "reaches the shards, so there is nothing for the model to predict; run with "
                                   "--server process")
    work = calibration.workload(algo)
    settings = config.get(algo, {})
    pushes = sum(int(summary.get(f"pushes_{k}", 0)) for k in ("counted", "accepted", "rejected"))
    params = int(summary.get("bytes_pushed", 0)) // max(pushes, 1) // 4  # a gradient weighs what the parameters do
    if pushes and params != work.params:
        raise ConfigError("check", f"{run_dir}: its network (or problem) has {params:,} parameters, the calibrated "
                                   f"{algo} workload's {work.params:,}: {_SAME_SETTINGS}")
    steps = _env_steps_per_gradient(algo, settings)
    if steps is not None and steps != work.env_steps_per_gradient:
        raise ConfigError("check", f"{run_dir}: a gradient of this run covers {steps:g} env steps (rows), the "
                                   f"calibrated {algo} workload's {work.env_steps_per_gradient:g}: {_SAME_SETTINGS}")
    workers = int(summary.get("workers", {}).get(PUSHERS[algo], 0))
    if workers < 1:
        raise ConfigError("check", f"{run_dir}: summary.json names no {PUSHERS[algo]} workers")
    shards = int(run.get("shards", 1))
    slice_params = -(-work.params // shards)
    apply_s = (calibration.apply_s(work.optimizer, slice_params),) * shards
    setup = Setup(rule=_rule(config["rule"]), workers=workers, shards=shards, workload=work,
                  cluster=Cluster.of(calibration), apply_s=apply_s, param_cache=settings.get("param_cache") == "node",
                  slow_worker=float(settings.get("straggler", 1.0)),
                  gradients=max(MIN_GRADIENTS, GRADIENTS_PER_WORKER * workers))
    prediction = simulate(setup, seed=seed)
    staleness = {int(k): int(v) for k, v in summary.get("staleness_histogram", {}).items()}
    judged = sum(staleness.values())
    return Check(run_dir=str(run_dir), algo=algo, mode=str(run.get("mode")), workers=workers,
                 measured_updates_per_s=float(summary["updates_per_s"]),
                 predicted_updates_per_s=prediction.updates_per_s,
                 measured_env_steps_per_s=summary.get("env_steps_per_s"),
                 predicted_env_steps_per_s=prediction.env_steps_per_s,
                 measured_staleness_mean=sum(s * n for s, n in staleness.items()) / judged if judged else 0.0,
                 predicted_staleness_mean=prediction.staleness_mean)


def _env_steps_per_gradient(algo: str, settings: dict[str, Any]) -> float | None:
    """What one worker's gradient covers under a run's settings, as the calibration counts it
    (None where the algorithm's calibration does not say)."""
    if algo == "lstsq":
        return float(settings["n"]) if "n" in settings else None
    if algo not in ("a3c", "impala") or "envs_per_actor" not in settings or "unroll_length" not in settings:
        return None
    batch = settings.get("batch_size", 1) if algo == "impala" else 1
    return float(settings["envs_per_actor"] * settings["unroll_length"] * batch)
