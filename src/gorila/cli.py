"""The ``gorila`` command: ``train``, ``eval``, ``plot``, ``bench``, ``simulate``, ``presets``, ``info``.

Invalid flags are refused before anything starts, naming the flag, with exit code 2. Progress and
logs go to stderr; stdout carries only the result (``train``: the summary as JSON). A run stopped
by SIGINT, SIGTERM or SIGHUP saves everything, prints its summary and exits with 130, 143 or 129.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

from gorila import __version__
from gorila.agents.registry import ALGORITHMS
from gorila.cliargs import add_flags, command_parser, renamed
from gorila.config import RunConfig
from gorila.errors import CheckpointError, ClusterUnreachableError, ConfigError, GorilaError

EXIT_USAGE = 2

COMMANDS_HELP = """commands:
  train     train an algorithm (gorila train --algo NAME --help lists its flags)
  eval      play a saved run's policy, and record videos of it
  plot      overlay the learning curves of runs, by env steps and by time
  bench     measure a figure next to its limit
  simulate  predict speedup, staleness and load of the update rules for 1 to 4096 workers
  presets   the published settings gorila train --preset NAME fills the flags with, and their sources
  info      versions, CPUs, GPU

gorila COMMAND --help shows a command's flags."""

_GROUP_TITLES = {"RLConfig": "environment, budget and evaluation"}


def _train_parser(algo: str) -> argparse.ArgumentParser:
    others = ", ".join(sorted(a for a in ALGORITHMS if a != algo))
    parser = command_parser(
        "gorila train",
        description=f"Train an algorithm on the parameter server.\n\nThe run's flags come first, then those "
                    f"of --algo {algo}. gorila train --algo NAME --help\nlists another algorithm's flags "
                    f"({others}).")
    run_group = parser.add_argument_group("run (every algorithm)")
    run_group.add_argument("--algo", default=RunConfig.algo, choices=sorted(ALGORITHMS),
                           help=f"algorithm (default: {RunConfig.algo})")
    defaults = ALGORITHMS[algo].flag_defaults()
    add_flags(run_group, RunConfig, skip=("algo",), defaults=defaults)
    run_group.add_argument("--config", type=Path, default=None, metavar="FILE",
                           help="settings from a YAML or JSON file (a run's own config.json too); "
                                "flags given beside it override it")
    terminal = parser.add_argument_group("terminal").add_mutually_exclusive_group()
    terminal.add_argument("-q", "--quiet", action="store_true",
                          help="show nothing on stderr but errors (stdout still gets the summary)")
    terminal.add_argument("-v", "--verbose", action="store_true", help="also show Ray's own logs")
    for cls in ALGORITHMS[algo].config_classes():
        title = _GROUP_TITLES.get(cls.__name__, algo)
        add_flags(parser.add_argument_group(f"{title} (--algo {algo})"), cls, defaults=defaults)
    return parser


def _configs(argv: list[str]) -> tuple[RunConfig, list, int]:
    """The run's configs from the command line, and the terminal's verbosity."""
    from gorila.agents.presets import algo_of
    from gorila.launch import configs_from_values, file_values, saved_values
    from gorila.metrics.terminal import NORMAL, QUIET, VERBOSE

    # --algo (or the run being resumed) decides which flags exist, so read it first.
    pre = argparse.ArgumentParser(allow_abbrev=False, add_help=False)
    pre.add_argument("--algo", default=None, choices=sorted(ALGORITHMS))
    pre.add_argument("--resume", type=Path, default=None)
    pre.add_argument("--preset", default=None)
    pre.add_argument("--config", type=Path, default=None)
    # A run's config.json chooses neither the module an env is made by nor the cluster joined: given again, or refused.
    pre.add_argument("--env", default=None)
    pre.add_argument("--address", default=None)
    known, _ = pre.parse_known_args(argv)
    saved: dict = {}
    algo = known.algo or algo_of(known.preset) or RunConfig.algo
    if known.resume is not None and known.config is not None:
        pre.exit(EXIT_USAGE, "gorila train: error: --config: a resumed run keeps its own settings; "
                             "give the ones to change as flags\n")
    try:
        if known.resume is not None:
            algo, saved = saved_values(known.resume, known.env, known.address)
        elif known.config is not None:
            algo, saved = file_values(known.config, known.algo, known.env, known.address)
    except ConfigError as err:
        pre.exit(EXIT_USAGE, f"gorila train: error: {err.flag}: {err.message}\n")
    if known.resume is not None and known.algo not in (None, algo):
        pre.exit(EXIT_USAGE, f"gorila train: error: --algo: {known.resume} is a {algo} run, not {known.algo}\n")
    parser = _train_parser(algo)
    parser.set_defaults(**saved)  # flags given now override the run's or the file's settings
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        flag = next((u for u in unknown if u.startswith("-")), unknown[0])
        other = sorted(name for name, a in ALGORITHMS.items() if name != algo and _has_flag(name, flag))
        close = difflib.get_close_matches(flag.split("=")[0], _flags(parser), n=1, cutoff=0.6)
        now = renamed([RunConfig, *ALGORITHMS[algo].config_classes()]).get(flag.split("=")[0][2:].replace("-", "_"))
        hint = (f" (it is now --{now.replace('_', '-')})" if now
                else f" (it is a flag of --algo {', '.join(other)})" if other
                else f" (did you mean {close[0]}?)" if close else "")
        parser.exit(EXIT_USAGE, f"gorila train: error: {flag.split('=')[0]}: not a flag of --algo {algo}{hint}; "
                                f"gorila train --algo {algo} --help lists them\n")
    verbosity = QUIET if args.quiet else VERBOSE if args.verbose else NORMAL
    values = {k: v for k, v in vars(args).items()
              if v is not None and k not in ("algo", "quiet", "verbose", "config")}
    try:
        run, configs = configs_from_values(algo, values)
    except ConfigError as err:
        if known.config is not None and err.field in saved and values.get(err.field) is saved[err.field]:
            parser.exit(EXIT_USAGE, f"gorila train: error: --config: {known.config}: {err.field}: {err.message}\n")
        parser.exit(EXIT_USAGE, f"gorila train: error: {err.flag}: {err.message}\n")
    return run, configs, verbosity


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    """The flags a misspelt one may be close to: the shown ones, not hidden ones."""
    return [option for action in parser._actions for option in action.option_strings
            if option.startswith("--") and action.help is not argparse.SUPPRESS]


def _has_flag(algo: str, flag: str) -> bool:
    return any(flag.split("=")[0] in action.option_strings for action in _train_parser(algo)._actions)


def cmd_train(argv: list[str]) -> int:
    from gorila.driver.stop import Interrupted, StopSignals
    from gorila.launch import launch
    from gorila.metrics.terminal import VERBOSE, Terminal

    try:
        # From the first moment, not only once the run starts: SIGTERM or SIGHUP while the flags
        # are read and the modules load ends the command with 143 or 129 as well (SIGINT: 130).
        with StopSignals():
            run, configs, verbosity = _configs(argv)
            terminal = Terminal(verbosity)
            with _stdout_kept_for_the_summary(shown=verbosity == VERBOSE):
                summary = launch(run, configs, terminal)
    except Interrupted as stop:
        # A SIGHUP may mean the terminal is gone: what is left to say is said where it can be.
        with contextlib.suppress(OSError):
            if stop.summary is None:  # stopped while starting: nothing was trained or saved
                print(f"gorila train: {stop} while starting; nothing was trained", file=sys.stderr)
                return stop.exit_code
            _print_summary(stop.summary)
            print(f"gorila train: {stop}; everything is saved in {stop.summary['run_dir']} "
                  f"(continue with gorila train --resume {stop.summary['run_dir']})", file=sys.stderr)
            terminal.stamp("exiting")
        return stop.exit_code
    _print_summary(summary)
    terminal.stamp("exiting")  # the last of the run's end's stages (--verbose), as summary.json's shutdown has them
    return 0


@contextlib.contextmanager
def _stdout_kept_for_the_summary(shown: bool) -> Iterator[None]:
    """While a run goes, whatever is written to file descriptor 1 goes to stderr where ``shown``
    (--verbose), else nowhere, so that stdout carries the summary alone: Ray prints its raylet's
    messages (a worker that died, a task retried, in colour) to the driver's stdout, and the
    run says what it makes of them in its own words (worker_restarts)."""
    sys.stdout.flush()
    saved = os.dup(1)
    if shown:
        os.dup2(2, 1)
    else:
        nowhere = os.open(os.devnull, os.O_WRONLY)
        os.dup2(nowhere, 1)
        os.close(nowhere)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


#: summary.json's records that stdout's summary keeps (the others, histograms and the evaluations, stay in the file)
_PRINTED_RECORDS = ("best_checkpoint",)


def _print_summary(summary: dict) -> None:
    print(json.dumps({k: v for k, v in summary.items() if not isinstance(v, (dict, list)) or k in _PRINTED_RECORDS},
                     indent=2))


def cmd_eval(argv: list[str]) -> int:
    parser = command_parser(
        "gorila eval",
        description="Play a saved run's best (or last) checkpoint with no-op starts; print the scores as JSON.")
    parser.add_argument("run_dir", metavar="RUN_DIR", type=Path, help="run directory (or its checkpoints/ directory)")
    parser.add_argument("--checkpoint", choices=("best", "last"), default="best",
                        help="best: the parameters of the run's best evaluation (the last checkpoint while it has "
                             "none); last: the newest periodic checkpoint")
    parser.add_argument("--episodes", type=int, default=10, help="evaluation episodes")
    parser.add_argument("--epsilon", type=float, default=None,
                        help="exploration rate (default: the one the run evaluated with; 0.05 for dqn, 0 for a3c)")
    parser.add_argument("--noop-max", type=int, default=30, help="no-op actions at most before acting")
    parser.add_argument("--seed", type=int, default=12345, help="evaluation seed")
    parser.add_argument("--env", default=None, metavar="ID",
                        help="the run's env id, given again where it names a module to import (module:EnvId): "
                             "a run directory never makes gorila import code, you do")
    parser.add_argument("--video", type=Path, default=None, metavar="DIR",
                        help="record every episode into DIR as MP4 (envs that render rgb_array frames; "
                             "needs pip install 'gorila[video]')")
    args = parser.parse_args(argv)
    from gorila.policy import evaluate

    try:
        report = evaluate(args.run_dir, args.episodes, epsilon=args.epsilon, noop_max=args.noop_max, seed=args.seed,
                          video_dir=args.video, checkpoint=args.checkpoint, env=args.env)
    except ConfigError as err:  # name the argument as the user gave it
        name = {"run_dir": "RUN_DIR", "eval_episodes": "--episodes", "eval_epsilon": "--epsilon"}.get(
            err.field, err.flag)
        parser.exit(EXIT_USAGE, f"gorila eval: error: {name}: {err.message}\n")
    except CheckpointError as err:  # no checkpoint of the run's that can be played: the directory is at fault
        parser.exit(EXIT_USAGE, f"gorila eval: error: RUN_DIR: {err}\n")
    if "checkpoint_fallback" in report:
        print(f"gorila eval: {report['checkpoint_fallback']}", file=sys.stderr)
    print(json.dumps(report, indent=2))
    return 0


def cmd_plot(argv: list[str]) -> int:
    parser = command_parser(
        "gorila plot",
        description="Overlay runs (e.g. sync, async and semi-async on one env) in one PNG: their headline "
                    "metric\n(the evaluation return, or lstsq's suboptimality) by steps and by seconds of "
                    "training, each\nevaluation where its parameters were taken, in a band from its worst to "
                    "its best episode;\nwith --group, the median of the runs of each setting in a band from "
                    "the lowest to the highest seed.\nPrints the PNG's path.")
    parser.add_argument("run_dirs", metavar="RUN_DIR", type=Path, nargs="+", help="run directories")
    parser.add_argument("--out", type=Path, default=Path("plot.png"), help="the PNG to write")
    parser.add_argument("--metric", default=None, help="metrics.csv column to plot (default: the runs' headline)")
    parser.add_argument("--title", default=None,
                        help="figure title (default: the metric, the algorithms and env, and how many runs)")
    parser.add_argument("--group", action="store_true",
                        help="one line per setting: runs that differ only in --seed drawn as their median and range")
    args = parser.parse_args(argv)
    from gorila.metrics import plot_runs

    try:
        out = plot_runs(args.run_dirs, args.out, metric=args.metric, title=args.title, group=args.group)
    except ConfigError as err:
        # a column the runs lack is --metric's fault when it was given, else the run's (its headline missing)
        name = "--out" if err.field == "out" else "--metric" if err.field == "metric" and args.metric else "RUN_DIR"
        parser.exit(EXIT_USAGE, f"gorila plot: error: {name}: {err.message}\n")
    print(out)
    return 0


def cmd_presets(argv: list[str]) -> int:
    from gorila.agents.presets import table

    parser = command_parser(
        "gorila presets",
        description="The published settings gorila train --preset NAME fills the flags with (a flag given still "
                    "wins),\neach with its algorithm, what it sets and its source.")
    parser.parse_args(argv)
    print(table(), end="")
    return 0


def cmd_info(argv: list[str]) -> int:
    import os
    import platform
    from importlib import metadata

    parser = command_parser("gorila info", "Versions and hardware.")
    parser.parse_args(argv)
    lines = {"gorila": __version__, "python": platform.python_version()}
    for module in ("numpy", "torch", "ray", "gymnasium", "ale_py", "envpool"):
        try:
            lines[module] = __import__(module).__version__
        except ImportError:
            lines[module] = "not installed"
    try:  # read from its metadata: gorila never imports the GPL-3 package itself
        lines["minatar"] = metadata.version("minatar")
    except metadata.PackageNotFoundError:
        lines["minatar"] = "not installed"
    import torch

    lines["cpus"] = str(os.cpu_count())
    lines["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "not available"
    lines["algorithms"] = ", ".join(sorted(ALGORITHMS))
    for key, value in lines.items():
        print(f"{key:>10}: {value}")
    return 0


def cmd_bench(argv: list[str]) -> int:
    from gorila.bench import BENCHMARKS

    parser = command_parser("gorila bench", "Measure a figure next to its limit.",
                            epilog="gorila bench NAME --help shows a benchmark's flags and defaults.")
    parser.add_argument("name", choices=sorted(BENCHMARKS), help="which benchmark")
    if argv and argv[0] in BENCHMARKS:  # the benchmark parses the rest, --help included
        return BENCHMARKS[argv[0]](argv[1:])
    parser.parse_args(argv)  # prints usage (exit 0 for --help, 2 for an unknown name)
    return EXIT_USAGE


def cmd_simulate(argv: list[str]) -> int:
    from gorila.sim.cli import main

    return main(argv)


COMMANDS = {"train": cmd_train, "eval": cmd_eval, "plot": cmd_plot, "bench": cmd_bench, "simulate": cmd_simulate,
            "presets": cmd_presets, "info": cmd_info}


def _command_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "gorila", epilog=COMMANDS_HELP,
        description="Parallel and distributed deep reinforcement learning: actors, learners and a sharded "
                    "parameter server\nwith sync, async and semi-async update rules, on Ray and PyTorch.")
    parser.add_argument("--version", action="version", version=f"gorila {__version__}")
    parser.add_argument("command", metavar="COMMAND", choices=list(COMMANDS), help="one of " + ", ".join(COMMANDS))
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # The command alone first: --help, --version, a missing or unknown one exit here
    # (an unknown one with "invalid choice" and the list).
    command = _command_parser().parse_args(argv[:1]).command
    try:
        return COMMANDS[command](argv[1:])
    except ConfigError as err:
        print(f"gorila {command}: error: {err.flag}: {err.message}", file=sys.stderr)
        return EXIT_USAGE
    except ClusterUnreachableError as err:  # the address given (flag or RAY_ADDRESS) is the thing to fix
        print(f"gorila {command}: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_USAGE
    except GorilaError as err:
        print(f"gorila {command}: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as stop:  # before a run could take over the signal (e.g. loading PyTorch)
        print(f"gorila {command}: {stop or 'interrupted'}", file=sys.stderr)
        return getattr(stop, "exit_code", 130)


def command() -> NoReturn:
    """The ``gorila`` executable and ``python -m gorila``: :func:`main` in a process of its own,
    which ends as soon as the command has returned."""
    code = main()
    # Every command has written and closed its files by now, and a run has shut its Ray down. The
    # interpreter's own exit would still collect garbage through every object torch made and run
    # torch's and Ray's C++ destructors: from half a second to several on a busy small machine,
    # after the run is over (a stopped run promises its exit within seconds). Only the buffered
    # output and the log handlers need flushing; the process ends here.
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError):  # a terminal gone (SIGHUP) takes nothing more
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    command()
