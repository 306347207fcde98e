"""What a run writes to its run directory: metrics, progress, plots, CPU time.

::

    from gorila.metrics import RunLogger, plot_learning_curve
    with RunLogger(run_dir, config, ["return", "loss"]) as logger:
        logger.log(step, {"loss": loss})
        logger.close({"final_return": ret})
    plot_learning_curve(run_dir / "metrics.csv", "step", "return", run_dir / "return.png", "DQN")

What a run shows on the terminal is in :mod:`gorila.metrics.terminal` and :mod:`gorila.metrics.progress`.

Checkpoints live in :mod:`gorila.checkpoint`.
"""

from gorila.metrics.cputime import CpuClock, process_cpu_seconds
from gorila.metrics.curves import RunCurve, read_series
from gorila.metrics.plots import plot_learning_curve, plot_predictions, plot_runs, plot_speedup
from gorila.metrics.run_logger import SHOWN_COLUMNS, RunLogger

__all__ = [
    "SHOWN_COLUMNS", "CpuClock", "RunCurve", "RunLogger", "plot_learning_curve", "plot_predictions", "plot_runs",
    "plot_speedup", "process_cpu_seconds", "read_series",
]
