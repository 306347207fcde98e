"""The run's log: :func:`open_log` opens its :class:`~gorila.metrics.RunLogger` (``metrics.csv``'s
columns, TensorBoard's tags and hyperparameters, what the progress line shows), and :func:`plot`
draws its learning curve at the end. The loop (:mod:`gorila.driver.loop`) calls both::

    logger = open_log(plan, run_config, run_dir, config, display, resumed=meta)
    ...
    plot(run_dir, plan, run_config)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gorila.config import RunConfig
from gorila.driver.plan import Plan
from gorila.metrics import RunLogger, plot_learning_curve
from gorila.metrics.progress import Display

#: What TensorBoard's step axis counts, by the budget's unit.
_STEP_AXIS = {"env_steps": "env steps, summed over all actors", "updates": "parameter-server updates"}
_PS_COLUMNS = ("updates", "pushes_rejected", "pushes_rejected_nonfinite", "bytes_pushed", "bytes_pulled")
#: Counts of faults, shown beside the progress and warned about on the terminal once they rise above zero.
#: (Stale rejections are not among them: under a semi-asynchronous rule they are routine.)
_FLAGGED = ("env_failures", "pushes_rejected_nonfinite", "eval_env_failures")
#: Shown beside the progress after them, the headline first (the steps are in the line already).
_SHOWN = ("train_return", "updates")


def _columns(plan: Plan) -> tuple[str, ...]:
    """metrics.csv's columns: progress first, then the evaluation's headline."""
    rl = plan.budget.unit == "env_steps"
    head = ("env_steps", "updates") if rl else ("updates",)
    headline, *other = plan.evaluation.columns
    return (*head, headline, *(("train_return",) if rl else ()), *other,
            *(("loss", "env_steps_per_s") if rl else ()),
            "updates_per_s", "pushes_rejected", "pushes_rejected_nonfinite", "bytes_pushed", "bytes_pulled",
            "worker_restarts", *(("env_failures",) if rl else ()),
            *(metric.replace(".", "_") for metric in plan.metrics))


def _tags(plan: Plan, columns: tuple[str, ...]) -> dict[str, str]:
    """TensorBoard's tag of each column, grouped: ``eval/`` (what the evaluation fills), ``ps/``
    (the parameter server's counters), ``time/`` (rates), ``replay/``, and ``train/`` (the rest)."""
    out: dict[str, str] = {}
    for column in columns:
        if column in plan.evaluation.columns:
            out[column] = "eval/" + column.removeprefix("eval_")
        elif column in _PS_COLUMNS:
            out[column] = "ps/" + column
        elif column.endswith("_per_s"):
            out[column] = "time/" + column
        elif column.startswith("replay_"):
            out[column] = "replay/" + column.removeprefix("replay_")
        else:
            out[column] = "train/" + column.removeprefix("train_")
    return out


def _hparams(config: dict[str, Any]) -> dict[str, Any]:
    """The run's settings as TensorBoard hyperparameters: ``section.field`` -> value (paths left out)."""
    sections = {name: config[name] for name in ("run", config["algo"], "rule")}
    return {f"{section}.{key}": value for section, values in sections.items() for key, value in values.items()
            if key not in ("run_dir", "resume")}


def open_log(plan: Plan, run_config: RunConfig, run_dir: Path, config: dict[str, Any], display: Display,
             resumed: dict[str, Any]) -> RunLogger:
    """The run's :class:`~gorila.metrics.RunLogger` (``config`` is ``config.json``'s record, shown
    as TensorBoard hyperparameters; ``display`` the terminal's progress), resuming with ``--resume``
    from the checkpoint whose meta is ``resumed``: the rows after it are cut."""
    columns = _columns(plan)
    tags = _tags(plan, columns)
    return RunLogger(run_dir, config, columns, tags=tags, step_axis=_STEP_AXIS[plan.budget.unit],
                     hparams=_hparams(config), hparam_metrics=[tags[plan.evaluation.columns[0]]],
                     display=display, resume=run_config.resume is not None, flagged=_FLAGGED,
                     shown=(plan.evaluation.columns[0], *_SHOWN),
                     resume_at=resumed.get(plan.budget.unit) if run_config.resume is not None else None)


def prepare_plot() -> None:
    """Load what :func:`plot` draws with (matplotlib: about half a second of imports), so that a
    thread can do it while the run's end waits on its processes rather than after."""
    from gorila.metrics.plots import load_matplotlib

    load_matplotlib()


def plot(run_dir: Path, plan: Plan, run_config: RunConfig) -> None:
    """The learning curve, ``learning_curve.png``, from the run's ``metrics.csv``."""
    x = "env_steps" if plan.budget.unit == "env_steps" else "updates"
    series = [c for c in (plan.evaluation.columns[0], "train_return") if c in _columns(plan)]
    title = f"{plan.algo} on {plan.label}: {run_config.mode}, {run_config.runtime} runtime, seed {run_config.seed}"
    plot_learning_curve(run_dir / "metrics.csv", x, series, run_dir / "learning_curve.png", title=title,
                        target=plan.evaluation.target)
