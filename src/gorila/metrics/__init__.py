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
from typing import Any

#: Each name this package gives, by the module that defines it. They are imported when first asked
#: for: every worker process reads its CPU clock from :mod:`gorila.metrics.cputime`, and importing
#: the package must not load the logger, the terminal's progress (rich) and the plots there too.
_MODULE_OF = {
    "CpuClock": "cputime", "process_cpu_seconds": "cputime", "RunCurve": "curves", "read_series": "curves",
    "plot_learning_curve": "plots", "plot_predictions": "plots", "plot_runs": "plots", "plot_speedup": "plots",
    "SHOWN_COLUMNS": "run_logger", "RunLogger": "run_logger",
}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_MODULE_OF[name]}"), name)
