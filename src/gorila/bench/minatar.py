"""``gorila bench minatar``: each MinAtar game × algorithm trained for a wall-time budget, its return
against frames and against wall time beside Young & Tian's (2019) published scores::

    gorila bench minatar --games Breakout,SpaceInvaders --algo dqn,a3c --minutes 20 --out bench-out/minatar

Every run goes through :func:`gorila.train`, the path of ``gorila train`` (the MinAtar preset
included), into ``OUT/<Game>-<algo>/``. Then ``OUT/curves.csv`` (every run's curve),
``OUT/<Game>.png`` (the game's runs and its reference scores, by frames and by seconds from the
command's start) and ``OUT/bench.json``: per run, the frames and seconds it took to reach each
reference score (null if it did not). MinAtar has no frame skip: a frame is an env step.
"""

from __future__ import annotations

import argparse
import csv
import json
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

from gorila import validate
from gorila.bench.report import bench_dir, write_bench_json
from gorila.cliargs import command_parser
from gorila.errors import ConfigError
from gorila.metrics.curves import TIME_COLUMN, read_series
from gorila.metrics.plots import plot_against_references

#: The return measured against the references: the mean of the latest training episodes (the
#: published curves average training returns too), as ``metrics.csv`` logs it.
RETURN_COLUMN = "train_return"
GAMES = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")
ALGORITHMS = ("dqn", "apex", "a3c", "impala", "ppo")


@cache
def references() -> dict:
    """``gorila/data/minatar_reference.json``: the published scores, their frames and their source."""
    return json.loads(resources.files("gorila").joinpath("data/minatar_reference.json").read_text())


def reference_scores(game: str) -> dict[str, float]:
    """``agent -> score`` of the published agents that report ``game``."""
    return {agent: entry["scores"][game] for agent, entry in references()["agents"].items() if game in entry["scores"]}


def first_reach(frames: np.ndarray, seconds: np.ndarray, returns: np.ndarray, score: float) -> dict:
    """The frames and seconds at the first point where ``returns`` reach ``score`` (None if never)."""
    reached = np.flatnonzero(returns >= score)
    if len(reached) == 0:
        return {"score": score, "frames": None, "seconds": None}
    i = int(reached[0])
    return {"score": score, "frames": int(frames[i]), "seconds": round(float(seconds[i]), 1)}


def curve(run_dir: Path, summary: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(frames, seconds from the command's start, returns)`` of a finished run: ``metrics.csv``'s
    seconds count training only, so the run's start-up is added."""
    csv_path = run_dir / "metrics.csv"
    frames, returns = read_series(csv_path, "env_steps", RETURN_COLUMN)
    seconds, _ = read_series(csv_path, TIME_COLUMN, RETURN_COLUMN)
    startup = summary["wall_time_from_start_s"] - summary["train_time_s"]
    return frames, seconds + startup, returns


def run_one(game: str, algo: str, args: argparse.Namespace, out: Path) -> tuple[dict, tuple]:
    """Train ``algo`` on ``game`` for the budget; its row of ``bench.json`` and its curve."""
    from gorila.api import train

    run_dir = out / f"{game}-{algo}"
    settings = dict(env=f"MinAtar/{game}-v1", time_limit_s=args.minutes * 60, total_steps=args.max_frames,
                    stop_at_target=False, seed=args.seed, runtime=args.runtime, run_dir=run_dir)
    summary = train(algo, verbose=args.verbose, **settings)
    frames, seconds, returns = curve(run_dir, summary)
    reached = {agent: first_reach(frames, seconds, returns, score) for agent, score in reference_scores(game).items()}
    row = {"game": game, "algo": algo, "seed": args.seed, "run_dir": str(run_dir), "frames": summary["env_steps"],
           "wall_time_from_start_s": summary["wall_time_from_start_s"],
           "final_return": float(returns[-1]) if len(returns) else None,
           "best_return": float(returns.max()) if len(returns) else None,
           "best_eval_return": summary.get("best_eval_return"), "to_reference": reached}
    return row, (frames, seconds, returns)


def write_curves(path: Path, curves: dict[tuple[str, str], tuple]) -> None:
    """``curves.csv``: one line per logged point of every run."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["game", "algo", "frames", "seconds_from_start", RETURN_COLUMN])
        for (game, algo), (frames, seconds, returns) in curves.items():
            writer.writerows([game, algo, int(n), round(float(s), 3), float(r)]
                             for n, s, r in zip(frames, seconds, returns))


def _names(text: str, known: tuple[str, ...], flag: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if not names or unknown:
        raise ConfigError(flag, f"choose from {', '.join(known)}; got {text!r}")
    return names


def main(argv: list[str]) -> int:
    parser = command_parser("gorila bench minatar", __doc__.split("::")[0])
    parser.add_argument("--games", default="Breakout,SpaceInvaders", help=f"comma-separated, of {', '.join(GAMES)}")
    parser.add_argument("--algo", default="dqn,a3c", help=f"comma-separated, of {', '.join(ALGORITHMS)}")
    parser.add_argument("--minutes", type=float, default=20.0, help="training time of each run")
    parser.add_argument("--max-frames", type=int, default=5_000_000, help="a run also stops after this many frames")
    parser.add_argument("--seed", type=int, default=0, help="random seed of every run")
    parser.add_argument("--runtime", default="ray", choices=("ray", "local"), help="where each run's workers run")
    parser.add_argument("--verbose", action="store_true", help="show each run's progress")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for curves.csv, the PNGs and bench.json (default: bench-out/minatar-<time>)")
    args = parser.parse_args(argv)
    try:
        games = _names(args.games, GAMES, "games")
        algos = _names(args.algo, ALGORITHMS, "algo")
        validate.number("minutes", args.minutes, low=0.0, low_open=True)
        validate.integer("max_frames", args.max_frames, low=1)
    except ConfigError as err:
        parser.exit(2, f"gorila bench minatar: error: --{err.flag.replace('_', '-')}: {err.message}\n")
    out = bench_dir(args.out, "minatar")
    rows, curves = [], {}
    for game in games:
        for algo in algos:
            row, curves[game, algo] = run_one(game, algo, args, out)
            rows.append(row)
            reached = ", ".join(f"{agent} {r['score']:g}: {'not reached' if r['frames'] is None else r['frames']}"
                                for agent, r in row["to_reference"].items())
            print(f"{game} {algo}: {row['frames']:,} frames, final {RETURN_COLUMN} {row['final_return']} ({reached})")
        labels = {agent: references()["agents"][agent]["label"] for agent in reference_scores(game)}
        plot_against_references({algo: curves[game, algo] for algo in algos},
                                {labels[a]: s for a, s in reference_scores(game).items()}, out / f"{game}.png",
                                f"MinAtar/{game}-v1: {RETURN_COLUMN} (seed {args.seed})",
                                reference_frames=references()["frames"])
    write_curves(out / "curves.csv", curves)
    write_bench_json(out, "minatar", {**vars(args), "out": str(out)}, rows, return_column=RETURN_COLUMN,
                     reference_source=references()["source"], reference_frames=references()["frames"])
    return 0
