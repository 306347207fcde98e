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

import importlib
from typing import TYPE_CHECKING

#: Each name this package gives, by the module that defines it. They are imported when first asked
#: for: every worker process reads its CPU clock from :mod:`gorila.metrics.cputime`, and importing
#: the package must not load the logger, the terminal's progress (rich) and the plots there too.
_MODULE_OF = {
    "CpuClock": "cputime", "process_cpu_seconds": "cputime", "RunCurve": "curves", "read_series": "curves",
    "plot_learning_curve": "plots", "plot_predictions": "plots", "plot_runs": "plots", "plot_speedup": "plots",
    "SHOWN_COLUMNS": "run_logger", "RunLogger": "run_logger",
}

__all__ = sorted(_MODULE_OF)


if TYPE_CHECKING:
    # the type checker sees the names themselves, so a name not here is an error rather than `Any`
    from gorila.metrics.cputime import CpuClock as CpuClock
    from gorila.metrics.cputime import process_cpu_seconds as process_cpu_seconds
    from gorila.metrics.curves import RunCurve as RunCurve
    from gorila.metrics.curves import read_series as read_series
    from gorila.metrics.plots import plot_learning_curve as plot_learning_curve
    from gorila.metrics.plots import plot_predictions as plot_predictions
    from gorila.metrics.plots import plot_runs as plot_runs
    from gorila.metrics.plots import plot_speedup as plot_speedup
    from gorila.metrics.run_logger import SHOWN_COLUMNS as SHOWN_COLUMNS
    from gorila.metrics.run_logger import RunLogger as RunLogger
else:
    def __getattr__(name: str) -> object:
        if name not in _MODULE_OF:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{__name__}.{_MODULE_OF[name]}"), name)
