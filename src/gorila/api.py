"""Training from Python, with the command line's names and checks::

    import gorila

    summary = gorila.train("a3c", env="CartPole-v1", workers=2, runtime="local", time_limit_s=60)
    summary = gorila.train("a3c", runtime="local", callback=lambda row: row.get("eval_return", 0) < 200)
    policy = gorila.load_policy(summary["run_dir"])     # gorila.policy.load_policy
    action = policy(observation)

Reached lazily as ``gorila.train`` (``import gorila`` alone loads neither PyTorch nor Ray).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gorila.agents.presets import algo_of
from gorila.config import RunConfig
from gorila.errors import ConfigError
from gorila.launch import configs_from_values, file_values, launch, saved_values
from gorila.metrics.terminal import Terminal

__all__ = ["train"]


def train(algo: str | None = None, *, verbose: bool | int = False,
          callback: Callable[[dict[str, float]], bool | None] | None = None, **settings: Any) -> dict[str, Any]:
    """Train ``algo`` (``"dqn"``, ``"apex"``, ``"a3c"``, ``"impala"``, ``"ppo"``, ``"lstsq"``) and return its
    summary (``summary.json``'s dict).

    ``settings`` are the flags of ``gorila train --algo ALGO`` as keywords, dashes as underscores
    (``--time-limit-s 60`` is ``time_limit_s=60``); they are checked as the command checks them,
    and a name the algorithm does not have raises :class:`~gorila.errors.ConfigError` naming it.
    ``resume=RUN_DIR`` continues a saved run with its own settings (``algo`` may be left out; an
    env of the ``module:EnvId`` form is made only when ``env=`` names it again, as ``--env`` does, and
    a Ray cluster it ran on is joined only when ``address=`` names one again),
    ``preset=NAME`` fills the settings not given with a published one (``algo`` defaults to its), and
    ``config=FILE`` reads settings from a YAML or JSON file as ``gorila train --config`` does, the
    keywords given beside it overriding it.
    Nothing is printed unless ``verbose`` (``True``: the run directory, start-up stages and
    progress on stderr, as the command shows them; ``2``: Ray's own logs too). Ctrl-C stops the
    run as the command does, saving a final checkpoint and the summary, then raises
    :class:`~gorila.driver.stop.Interrupted` (a ``KeyboardInterrupt``) whose ``summary`` is it.

    ``callback(row)`` is called with every row ``metrics.csv`` gets, as a dict: ``step`` (env steps,
    or updates for lstsq), ``time_s`` (seconds of training) and the columns filled in that row
    (``eval_return`` only in rows an evaluation came in with). Returning ``False`` (not merely a
    falsy value) stops the run there as at its budget, everything saved, with ``stop_reason``
    ``"callback"``; what it raises ends the run, with the summary saying so.
    """
    started = time.time()
    values = dict(settings)
    if values.get("resume") is not None:
        saved_algo, saved = saved_values(Path(values["resume"]), values.get("env"), values.get("address"))
        if algo is not None and algo != saved_algo:
            raise ConfigError("algo", f"{values['resume']} is a {saved_algo} run, not {algo}")
        algo, values = saved_algo, {**{k: v for k, v in saved.items() if v is not None}, **values}
    config = values.pop("config", None)
    if config is not None:
        if values.get("resume") is not None:
            raise ConfigError("config", "a resumed run keeps its own settings; give the ones to change as keywords")
        algo, from_file = file_values(Path(config), algo, values.get("env"), values.get("address"))
        values = {**from_file, **values}
    run, configs = configs_from_values(algo or algo_of(values.get("preset")) or RunConfig.algo, values)
    return launch(run, configs, Terminal(int(verbose), started_at=started), callback=callback)
