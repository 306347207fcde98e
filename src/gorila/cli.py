"""The ``gorila`` command: ``train``, ``eval``, ``bench``, ``info``.

Invalid flags are refused before anything starts, naming the flag, with exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gorila.algos.registry import ALGORITHMS
from gorila.cliargs import add_flags, from_flags
from gorila.config import RunConfig, values_from_json
from gorila.errors import ConfigError, GorilaError

EXIT_USAGE = 2


def _train_parser(algo: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gorila train", description="Train an algorithm on the parameter server.")
    run_group = parser.add_argument_group("run")
    add_flags(run_group, RunConfig, skip=("algo",))
    run_group.add_argument("--algo", default=RunConfig.algo, choices=sorted(ALGORITHMS), help="algorithm")
    for cls in ALGORITHMS[algo].config_classes():
        add_flags(parser.add_argument_group(f"{cls.__name__} (--algo {algo})"), cls)
    return parser


def _saved_defaults(run_dir: Path) -> tuple[str, dict]:
    """The algorithm and flag values a run was started with (its ``config.json``)."""
    path = run_dir / "config.json"
    if not path.is_file():
        raise ConfigError("resume", f"{run_dir} has no config.json: not a gorila run directory")
    saved = json.loads(path.read_text())
    algo = saved.get("algo")
    if algo not in ALGORITHMS or "run" not in saved:
        raise ConfigError("resume", f"{path} does not describe a gorila training run")
    return algo, values_from_json({**saved["run"], **saved.get(algo, {})})


def _configs(argv: list[str]):
    # --algo (or the run being resumed) decides which flags exist, so read it first.
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--algo", default=RunConfig.algo, choices=sorted(ALGORITHMS))
    pre.add_argument("--resume", type=Path, default=None)
    known, _ = pre.parse_known_args(argv)
    saved: dict = {}
    algo = known.algo
    if known.resume is not None:
        try:
            algo, saved = _saved_defaults(known.resume)
        except ConfigError as err:
            pre.exit(EXIT_USAGE, f"gorila train: error: {err.flag}: {err.message}\n")
        saved.update(algo=algo, run_dir=None)  # flags given now override what the run started with
    parser = _train_parser(algo)
    parser.set_defaults(**saved)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        flag = next((u for u in unknown if u.startswith("-")), unknown[0])
        other = sorted(name for name, a in ALGORITHMS.items() if name != algo and _has_flag(name, flag))
        hint = f" (it is a flag of --algo {', '.join(other)})" if other else ""
        parser.exit(EXIT_USAGE, f"gorila train: error: {flag.split('=')[0]}: not a flag of --algo {algo}{hint}; "
                                f"gorila train --algo {algo} --help lists them\n")
    try:
        run = from_flags(RunConfig, args)
        configs = [from_flags(cls, args) for cls in ALGORITHMS[run.algo].config_classes()]
    except ConfigError as err:
        parser.exit(EXIT_USAGE, f"gorila train: error: {err.flag}: {err.message}\n")
    return run, configs


def _has_flag(algo: str, flag: str) -> bool:
    return any(flag.split("=")[0] in action.option_strings for action in _train_parser(algo)._actions)


def cmd_train(argv: list[str]) -> int:
    from gorila.driver.loop import run as run_plan

    run, configs = _configs(argv)
    plan = ALGORITHMS[run.algo].plan_fn()(run, *configs)
    summary = run_plan(run, plan)
    print(json.dumps({k: v for k, v in summary.items() if not isinstance(v, (dict, list))}, indent=2))
    return 0


def cmd_eval(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="gorila eval", description="Evaluate a saved run's newest checkpoint with no-op starts.")
    parser.add_argument("path", type=Path, help="run directory (or its checkpoints/ directory)")
    parser.add_argument("--episodes", type=int, default=10, help="evaluation episodes (default: 10)")
    parser.add_argument("--epsilon", type=float, default=None,
                        help="exploration rate (default: the one the run evaluated with; 0.05 for dqn, 0 for a3c)")
    parser.add_argument("--noop-max", type=int, default=30, help="no-op actions at most before acting (default: 30)")
    parser.add_argument("--seed", type=int, default=12345, help="evaluation seed (default: 12345)")
    args = parser.parse_args(argv)
    from gorila.policy import evaluate_saved

    print(json.dumps(evaluate_saved(args.path, args.episodes, args.epsilon, args.noop_max, args.seed), indent=2))
    return 0


def cmd_info(argv: list[str]) -> int:
    import platform

    from gorila import __version__
    parser = argparse.ArgumentParser(prog="gorila info", description="Versions and hardware.")
    parser.parse_args(argv)
    lines = {"gorila": __version__, "python": platform.python_version()}
    for module in ("numpy", "torch", "ray", "gymnasium", "ale_py", "envpool"):
        try:
            lines[module] = __import__(module).__version__
        except ImportError:
            lines[module] = "not installed"
    import os

    import torch
    lines["cpus"] = str(os.cpu_count())
    lines["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "not available"
    lines["algorithms"] = ", ".join(sorted(ALGORITHMS))
    for key, value in lines.items():
        print(f"{key:>10}: {value}")
    return 0


def cmd_bench(argv: list[str]) -> int:
    from gorila.bench import BENCHMARKS

    parser = argparse.ArgumentParser(prog="gorila bench", description="Measure a figure next to its limit.")
    parser.add_argument("name", choices=sorted(BENCHMARKS), help="which benchmark")
    if argv and argv[0] in BENCHMARKS:  # the benchmark parses the rest, --help included
        return BENCHMARKS[argv[0]](argv[1:])
    parser.parse_args(argv)  # prints usage (exit 0 for --help, 2 for an unknown name)
    return EXIT_USAGE


COMMANDS = {"train": cmd_train, "eval": cmd_eval, "bench": cmd_bench, "info": cmd_info}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print("usage: gorila {train,eval,bench,info} [flags]   (gorila COMMAND --help for its flags)",
              file=sys.stderr if argv and argv[0] not in ("-h", "--help") else sys.stdout)
        return 0 if argv and argv[0] in ("-h", "--help") else EXIT_USAGE
    try:
        return COMMANDS[argv[0]](argv[1:])
    except ConfigError as err:
        print(f"gorila {argv[0]}: error: {err.flag}: {err.message}", file=sys.stderr)
        return EXIT_USAGE
    except GorilaError as err:
        print(f"gorila {argv[0]}: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"gorila {argv[0]}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
