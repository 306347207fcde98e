"""``gorila bench startup``: from the command to the first env step and the first applied update,
stage by stage, beside the limit measured in the same run: a bare embedded ``ray.init`` plus one
Ray process importing torch."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from gorila import validate
from gorila.cliargs import command_parser
from gorila.bench.report import bench_dir, write_bench_json

STAGES = ("plan_s", "runtime_s", "processes_s", "first_step_s", "first_update_s")


def time_command(argv: list[str], run_dir: Path) -> dict[str, float]:
    """The start-up stages of ``gorila train argv`` (seconds from its start), from its summary."""
    done = subprocess.run([sys.executable, "-m", "gorila.cli", "train", *argv, "--run-dir", str(run_dir)],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"gorila train {' '.join(argv)} failed: {done.stderr[-2000:]}")
    return json.loads((run_dir / "summary.json").read_text())["startup"]


def time_limit() -> float:
    """A bare embedded Ray plus one Ray process importing torch (:mod:`gorila.runtime.bare_ray`)."""
    done = subprocess.run([sys.executable, "-m", "gorila.runtime.bare_ray"], capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"the bare Ray start failed: {done.stderr[-2000:]}")
    return float(done.stdout.split()[-1])


def main(argv: list[str]) -> int:
    parser = command_parser("gorila bench startup", __doc__)
    parser.add_argument("--algo", default="dqn", help="the algorithm whose `gorila train` is timed")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each, interleaved; figures are medians")
    parser.add_argument("--out", type=Path, default=None, help="directory for bench.json (default: bench-out/startup-<time>)")
    args, train_flags = parser.parse_known_args(argv)
    validate.integer("repeats", args.repeats, low=1)
    out = bench_dir(args.out, "startup")
    command = ["--algo", args.algo, "--total-steps", "3000", "--no-stop-at-target", "--eval-every-s", "1000",
               *train_flags]
    runs, limits = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            limits.append(time_limit())
            runs.append(time_command(command, Path(tmp) / f"run{repeat}"))
    limit = statistics.median(limits)
    stages = {stage: statistics.median(r.get(stage, float("nan")) for r in runs) for stage in STAGES}
    print(f"gorila bench startup: gorila train {' '.join(command)}; medians of {args.repeats} interleaved runs")
    print(f"  limit: embedded ray.init + one Ray process importing torch   {limit:6.2f} s")
    labels = {"plan_s": "imports and the plan built", "runtime_s": "Ray up", "processes_s": "every process up",
              "first_step_s": "first env step", "first_update_s": "first applied update"}
    for stage, seconds in stages.items():
        print(f"  {labels[stage]:<58} {seconds:6.2f} s  {seconds / limit:5.2f} x limit")
    write_bench_json(out, "startup", vars(args), [{"limit_s": lim, **run} for lim, run in zip(limits, runs)],
                     limit_s=limit, ratio=stages["first_step_s"] / limit, **stages)
    return 0
