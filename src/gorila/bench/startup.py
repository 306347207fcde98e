"""``gorila bench startup``: from the command to the first env step and the first applied update,
stage by stage, beside the limit measured in the same run: a bare embedded ``ray.init`` plus one
Ray process importing torch.

A second figure, the run's layout, is the floor beneath this run's own start: a bare ``ray.init``
plus as many Ray processes as the run starts, all at once, its workers importing torch and its
shards and evaluator importing nothing (as a run on an MLP's env does, its shards in processes of
their own as by default; services such as Ape-X's replay are not counted, so the floor errs low).
Where cores are fewer than the run's processes, they share them, and the first env step cannot come
before this layout is up."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from gorila import validate
from gorila.bench.report import bench_dir, write_bench_json
from gorila.cliargs import command_parser

STAGES = ("plan_s", "runtime_s", "processes_s", "first_step_s", "first_update_s")


def time_command(argv: list[str], run_dir: Path) -> tuple[dict[str, float], tuple[int, int]]:
    """The start-up stages of ``gorila train argv`` (seconds from its start), from its summary, and
    its layout: how many processes it started with torch (its workers) and without (its shards and
    evaluator)."""
    done = subprocess.run([sys.executable, "-m", "gorila.cli", "train", *argv, "--run-dir", str(run_dir)],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"gorila train {' '.join(argv)} failed: {done.stderr[-2000:]}")
    summary = json.loads((run_dir / "summary.json").read_text())
    return summary["startup"], (sum(summary["workers"].values()), summary["shards"] + 1)


def time_limit(torch: int = 1, plain: int = 0) -> float:
    """A bare embedded Ray plus ``torch`` Ray processes importing torch and ``plain`` importing
    nothing, up at once (:mod:`gorila.runtime.bare_ray`)."""
    done = subprocess.run([sys.executable, "-m", "gorila.runtime.bare_ray", "--torch", str(torch),
                           "--plain", str(plain)], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"the bare Ray start failed: {done.stderr[-2000:]}")
    return float(done.stdout.split()[-1])


def main(argv: list[str]) -> int:
    parser = command_parser("gorila bench startup", __doc__)
    parser.add_argument("--algo", default="dqn", help="the algorithm whose `gorila train` is timed")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each, interleaved; figures are medians")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for bench.json (default: bench-out/startup-<time>)")
    args, train_flags = parser.parse_known_args(argv)
    validate.integer("repeats", args.repeats, low=1)
    out = bench_dir(args.out, "startup")
    command = ["--algo", args.algo, "--total-steps", "3000", "--no-stop-at-target", "--eval-every-s", "1000",
               *train_flags]
    runs, limits, layouts = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            limits.append(time_limit())
            run, layout = time_command(command, Path(tmp) / f"run{repeat}")
            runs.append(run)
            layouts.append(time_limit(*layout))
    limit, layout_s = statistics.median(limits), statistics.median(layouts)
    stages = {stage: statistics.median(r.get(stage, float("nan")) for r in runs) for stage in STAGES}
    print(f"gorila bench startup: gorila train {' '.join(command)}; medians of {args.repeats} interleaved runs")
    print(f"  limit: embedded ray.init + one Ray process importing torch   {limit:6.2f} s")
    torch, plain = layout  # the same in every run of the command
    layout_label = f"the run's layout: ray.init + {torch} with torch, {plain} without"
    print(f"  {layout_label:<58} {layout_s:6.2f} s  {layout_s / limit:5.2f} x limit")
    labels = {"plan_s": "imports and the plan built", "runtime_s": "Ray up", "processes_s": "every process up",
              "first_step_s": "first env step", "first_update_s": "first applied update"}
    for stage, seconds in stages.items():
        print(f"  {labels[stage]:<58} {seconds:6.2f} s  {seconds / limit:5.2f} x limit")
    against = "first env step against the run's layout"
    print(f"  {against:<58} {stages['first_step_s'] / layout_s:6.2f} x layout")
    figures: dict[str, Any] = {"limit_s": limit, "ratio": stages["first_step_s"] / limit, "layout_s": layout_s,
                               "layout_processes": {"torch": torch, "plain": plain},
                               "layout_ratio": stages["first_step_s"] / layout_s, **stages}
    write_bench_json(out, "startup", vars(args),
                     [{"limit_s": lim, "layout_s": lay, **run} for lim, lay, run in zip(limits, layouts, runs)],
                     **figures)
    return 0
