"""One training run as ``gorila train`` and :func:`gorila.train` start it, with the same names
and the same checks::

    run, configs = configs_from_values("a3c", {"env": "CartPole-v1", "workers": 2})
    summary = launch(run, configs, Terminal(NORMAL))
    algo, values = file_values(Path("a3c.yaml"))        # --config: settings from a file

Settings are the config fields that are flags (``time_limit_s`` is ``--time-limit-s``); a name the
algorithm does not have is a :class:`~gorila.errors.ConfigError` naming it, and saying which
algorithm has it. ``launch`` announces the run directory before anything else, then builds the
plan (loading PyTorch and the env) and runs the driver.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gorila.agents.presets import budget_source, source, with_preset
from gorila.agents.registry import ALGORITHMS
from gorila.cliargs import check_types, from_flags, parse_value, renamed
from gorila.config import RunConfig, values_from_json
from gorila.driver.run_lock import hold_run_dir
from gorila.driver.stop import StopSignals
from gorila.errors import ConfigError
from gorila.metrics.terminal import Terminal
from gorila.run_files import check_recorded_address, check_recorded_env, check_run_dir
from gorila.settings_file import read_settings
from gorila.sizing import check_fits
from gorila.validate import excerpt

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


def settings(algo: str) -> set[str]:
    """The names an algorithm's run accepts: the run's fields and its configs' (``algo`` aside)."""
    classes = [RunConfig, *ALGORITHMS[algo].config_classes()]
    return {f.name for cls in classes for f in dataclasses.fields(cls) if "help" in f.metadata} - {"algo"}


def configs_from_values(algo: str, values: dict[str, Any]) -> tuple[RunConfig, list]:
    """The ``RunConfig`` and the algorithm's configs from ``values`` (name -> value; the rest come
    from the preset ``values["preset"]`` names, then from the env's, see :mod:`gorila.agents.presets`,
    or keep their defaults), each validated on construction."""
    if algo not in ALGORITHMS:
        raise ConfigError("algo", f"unknown algorithm {algo!r}; choose from {', '.join(sorted(ALGORITHMS))}")
    values = current_names(algo, values)
    unknown = sorted(set(values) - settings(algo))
    if unknown:
        name = unknown[0]
        other = sorted(a for a in ALGORITHMS if a != algo and name in settings(a))
        hint = f" (it is a setting of {', '.join(other)})" if other else ""
        raise ConfigError(name, f"not a setting of {algo}{hint}")
    check_types([RunConfig, *ALGORITHMS[algo].config_classes()], values)  # before any of them is read
    # JSON and Python callers give lists where configs hold tuples (hidden=[64, 64]).
    namespace = argparse.Namespace(**values_from_json(with_preset(algo, values)))
    configs: list[DataclassInstance] = [from_flags(cls, namespace) for cls in ALGORITHMS[algo].config_classes()]
    budget = (None if "total_steps" not in settings(algo) else RESUMED_BUDGET if values.get("resume") is not None
              else budget_source(values, _default_env(configs)))
    # --server not given: the algorithm's choice for these learners (a resumed run's is in its config.json)
    server = getattr(namespace, "server", None) or ALGORITHMS[algo].default_server(
        configs, getattr(namespace, "runtime", None) or RunConfig.runtime)
    run = from_flags(RunConfig, namespace, algo=algo, preset_source=source(values.get("preset")), budget_source=budget,
                     server=server)
    ALGORITHMS[algo].check(configs)
    return run, configs


#: Where a resumed run's budget comes from: its config.json holds the total it was started with (where
#: that came from is in its first run's lines), which --total-steps given again replaces.
RESUMED_BUDGET = "the run's own, or --total-steps given again"


def _default_env(configs: list) -> str:
    """The env a run given none steps: the default of its configs' ``env``."""
    env = next(f.default for c in configs for f in dataclasses.fields(c) if f.name == "env")
    assert isinstance(env, str)  # RLConfig's default env
    return env


def budget_line(run: RunConfig, configs: list) -> str | None:
    """The run's step budget, where it came from and what ends the run sooner, as its first lines
    say it (None for a run without env steps, lstsq)::

        budget: 5,000,000 env steps (MinAtar's published budget, Young & Tian 2019); stops early at --target-return 10
    """
    from gorila.agents.rl_config import RLConfig

    rl = next((c for c in configs if isinstance(c, RLConfig)), None)
    if rl is None or run.budget_source is None:
        return None
    # A resumed run's budget is its total, the steps before the resume included (see --resume).
    in_all = " in all, the steps before this resume included" if run.resume else ""
    line = f"budget: {rl.total_steps:,} env steps{in_all} ({run.budget_source})"
    target = rl.target()
    if rl.stop_at_target and target is not None:
        given = "--target-return" if rl.target_return is not None else "the env's reward threshold"
        judged = "the latest 100 training episodes' mean reaches " if rl.target_on == "train100" else ""
        line += f"; stops early {'when ' + judged if judged else 'at '}{given} {target:g}"
    if run.time_limit_s is not None:
        line += f"; or after {run.time_limit_s:g} s of training (--time-limit-s)"
    return line


def current_names(algo: str, values: dict[str, Any], *, where: str = "", recorded: bool = False) -> dict[str, Any]:
    """``values``, a setting under a name it had before a rename refused (a ``ConfigError`` naming
    the current name, ``where`` it came from), unless ``recorded``: a run's own ``config.json``,
    written by an earlier gorila, whose old names are read under the current ones (which win where
    both are there), so that the run resumes as it was."""
    old_names = renamed([RunConfig, *ALGORITHMS[algo].config_classes()])
    given = sorted(values.keys() & old_names.keys())
    if given and not recorded:
        raise ConfigError(given[0], f"{where}now {old_names[given[0]]}")
    out = {k: v for k, v in values.items() if k not in old_names}
    for old in given:
        out.setdefault(old_names[old], values[old])
    return out


def saved_values(run_dir: Path, env: str | None = None, address: str | None = None) -> tuple[str, dict[str, Any]]:
    """The algorithm and settings a run was started with (its ``config.json``), to resume it; an
    env id there that names a module to import is refused unless ``env`` (``--env`` given again)
    is the same id, and a cluster address unless ``address`` names one again (see
    :func:`~gorila.run_files.check_recorded_env` and :func:`~gorila.run_files.check_recorded_address`)."""
    path = Path(run_dir) / "config.json"
    if not os.path.lexists(path):
        raise ConfigError("resume", f"{run_dir} has no config.json: not a gorila run directory")
    saved = read_settings(path, "resume", inside=Path(run_dir))
    algo, values = _recorded_values("resume", path, saved)
    check_recorded_env(Path(run_dir), values.get("env"), env, "resume")
    check_recorded_address(Path(run_dir), values.get("address"), address, "resume")
    return algo, {**values, "run_dir": None}  # the directory is the resumed one


def _recorded_values(field: str, path: Path, saved: Any) -> tuple[str, dict[str, Any]]:
    """The algorithm and settings of a run's ``config.json`` record (what is no setting, such as
    the run's time stamp or the rule it resolved, left out)."""
    algo = saved.get("algo") if isinstance(saved, dict) else None
    if (not isinstance(algo, str) or algo not in ALGORITHMS or not isinstance(saved.get("run"), dict)
            or not isinstance(saved.get(algo, {}), dict)):
        raise ConfigError(field, f"{path} does not describe a gorila training run")
    names = settings(algo)
    recorded = current_names(algo, {**saved["run"], **saved.get(algo, {})}, recorded=True)
    values = {k: v for k, v in recorded.items() if k in names}
    return algo, values_from_json(values)


def file_values(path: Path, algo: str | None = None, env: str | None = None,
                address: str | None = None) -> tuple[str, dict[str, Any]]:
    """The algorithm and settings of a config file (``--config``): YAML or JSON, either a mapping
    of settings (``algo`` among them, or given as ``algo``) or a run's own ``config.json`` as it
    was written (its directory and resume left out: the file describes a new run; an env id there
    that names a module, and a cluster address, are refused unless ``env`` and ``address`` name them
    again, as with ``--resume``). Settings are
    named as the flags are (``time-limit-s`` or ``time_limit_s``); a value written as text is read
    as its flag reads it (``lr: 1e-4``, ``hidden: 64,64``); the dataclasses check the rest."""
    path = Path(path)
    data = read_settings(path, "config")  # its size, depth and aliases bounded before it is parsed
    if not isinstance(data, dict):
        raise ConfigError("config", f"{path} holds a {type(data).__name__}, not a mapping of settings: gorila reads "
                                    "YAML (`lr: 0.001`, a setting a line) or JSON (.json)")
    recorded = isinstance(data.get("run"), dict)  # a run's config.json, which gorila wrote
    if recorded:
        saved_algo, values = _recorded_values("config", path, data)
        values = {k: v for k, v in values.items() if k not in ("run_dir", "resume")}
        check_recorded_env(path.parent, values.get("env"), env, "config")
        check_recorded_address(path.parent, values.get("address"), address, "config")
    else:
        values = {str(k).replace("-", "_"): v for k, v in data.items()}
        saved_algo = values.pop("algo", None) or RunConfig.algo
        if not isinstance(saved_algo, str) or saved_algo not in ALGORITHMS:
            raise ConfigError("config", f"{path}: unknown algorithm {excerpt(saved_algo)}; choose from "
                                        f"{', '.join(sorted(ALGORITHMS))}")
    algo = algo or saved_algo
    values = current_names(algo, values, where=f"{path}: ", recorded=recorded)
    unknown = sorted(set(values) - settings(algo))
    if unknown:
        raise ConfigError("config", f"{path}: {unknown[0]!r} is not a setting of {algo}")
    classes = [RunConfig, *ALGORITHMS[algo].config_classes()]
    out = {}
    for name, value in values_from_json(values).items():
        try:
            out[name] = parse_value(classes, name, value) if isinstance(value, str) else value
        except (ValueError, argparse.ArgumentTypeError) as err:
            raise ConfigError("config", f"{path}: {name}: {err}") from None
    return algo, out


def launch(run: RunConfig, configs: list, terminal: Terminal,
           callback: Callable[[dict[str, float]], bool | None] | None = None) -> dict[str, Any]:
    """Announce the run directory, build the plan, run it; returns the summary (see
    :func:`gorila.driver.loop.run`, which also says what an interrupt raises, and what
    ``callback``, its ``on_row``, is given). A run directory that a live run holds is a
    :class:`~gorila.errors.RunDirLockedError` (see :mod:`gorila.driver.run_lock`)."""
    algorithm = ALGORITHMS[run.algo]
    run_dir = run.resolved_run_dir(algorithm.label(configs))
    # A run this machine cannot hold, and a run directory it could not write or that is damaged,
    # are refused first: nothing started, nothing written.
    check_fits(run, configs)
    check_run_dir(run_dir, "resume" if run.resume is not None else "run_dir", resume=run.resume is not None)
    terminal.line(f"run directory: {run_dir}")
    if run.preset is not None:
        terminal.line(f"preset {run.preset}: {run.preset_source}")
    budget = budget_line(run, configs)
    if budget is not None:
        terminal.line(budget)
    if run.resume is None:
        run = dataclasses.replace(run, run_dir=run_dir)
    # One live run per directory, held before anything is built or written (a second run there is
    # refused at once, exit 2, rather than after Ray's start); the driver holds it again inside.
    with hold_run_dir(run_dir, "resume" if run.resume is not None else "run_dir", terminal.line):
        return _launch(run, configs, terminal, callback)


def _launch(run: RunConfig, configs: list, terminal: Terminal,
            callback: Callable[[dict[str, float]], bool | None] | None) -> dict[str, Any]:
    from gorila.driver.loop import run as run_plan

    algorithm = ALGORITHMS[run.algo]
    what = " (PyTorch, the env, the network)" if algorithm.is_rl else " (the data)"
    if run.runtime == "local":
        with StopSignals(), terminal.stage(f"building the {run.algo} plan{what}"):
            plan = algorithm.plan_fn()(run, *configs)
        return run_plan(run, plan, terminal=terminal, on_row=callback)
    # On Ray the plan is built beside Ray's start (see gorila.driver.loop.run): its stage has a
    # line but no spinner of its own, the runtime's stage showing one meanwhile. The env is made
    # first, here (without PyTorch), so that an id that cannot be made is refused before Ray starts.
    env_id = next((c.env for c in configs if isinstance(getattr(c, "env", None), str)), None)
    if env_id is not None:
        from gorila.envs.make import env_spaces

        env_spaces(env_id)  # kept for the plan's builder, which reads the same spaces
    terminal.line(f"{terminal.elapsed():7.1f} s  building the {run.algo} plan{what}, while Ray starts")
    # With its directories absolute: while Ray starts, this process works in another directory
    # (gorila.runtime.ray_cwd), and Ray's processes, which the plan's paths reach, always do.
    placed = dataclasses.replace(run, run_dir=None if run.run_dir is None else Path(run.run_dir).absolute(),
                                 resume=None if run.resume is None else Path(run.resume).absolute())
    return run_plan(run, lambda: algorithm.plan_fn()(placed, *configs), terminal=terminal, on_row=callback)
