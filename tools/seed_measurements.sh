#!/usr/bin/env bash
# The measurements behind three of the seeds' figures in the docs, one command after another, each
# preceded by the load average (run it on a machine with nothing else running):
#
#   tools/seed_measurements.sh OUTDIR [PART...]    # PARTs: semi-async menger simulate-check (default: all)
#
#   semi-async      seed 002's client: A3C on CartPole-v1, --workers 2, --mode semi-async with the client
#                   that blocks (the default) and the one that pipelines, seeds 0-4 in pairs (about 10 x
#                   up to 2 min). OUTDIR/semi-async/summary.txt: per run the seconds to the target from
#                   the command and from the first env step, env steps/s, the workers' share of time
#                   blocked for replies and the mean staleness; each variant's medians
#                   (docs/algorithms.md, "The semi-asynchronous client").
#   menger          seed 004's caches: gorila bench menger --part reads at 16, 64 and 256 readers without a
#                   cache, with caches that poll and with caches the server sends each version (about
#                   3 min). OUTDIR/menger/: reads.csv, reads.png, bench.json; summary.txt: read latency
#                   and the parameters' age per point (docs/benchmarks.md, "Menger: the caches sent each
#                   version against the caches that poll").
#   simulate-check  gorila simulate --calibrate, then lstsq (sync, async), A3C (sync, async) and IMPALA
#                   (async, --server process) at 1 and 2 workers, 30 s of training each, then
#                   gorila simulate --check of all ten (about 10 min). OUTDIR/simulate-check/: the
#                   calibration, the run directories, check.json and summary.txt: each run's measured
#                   and predicted updates/s, env steps/s and staleness with the errors (docs/benchmarks.md,
#                   "gorila simulate against runs on this machine").
#
# Every run directory is kept under OUTDIR. GORILA (default: gorila) and PYTHON (default: python3)
# name the commands used.
set -euo pipefail
OUT=${1:?usage: tools/seed_measurements.sh OUTDIR [semi-async] [menger] [simulate-check]}
PARTS=" ${*:2} "
[[ $PARTS == "  " ]] && PARTS=" semi-async menger simulate-check "
GORILA=${GORILA:-gorila}
PYTHON=${PYTHON:-python3}

load() { echo "== $*, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -Is)"; }
# train RUN_DIR FLAGS...: one run, its final summary line kept beside it; a run already done is kept.
train() {
    local run_dir=$1; shift
    if [[ -f $run_dir/summary.json ]]; then echo "$run_dir: done already, kept"; return; fi
    rm -rf "$run_dir"
    load "gorila train $*"
    "$GORILA" train "$@" --run-dir "$run_dir" > "$run_dir.stdout.json"
}

if [[ $PARTS == *" semi-async "* ]]; then
    dir="$OUT/semi-async"
    mkdir -p "$dir"
    for seed in 0 1 2 3 4; do
        for client in blocks pipelines; do
            train "$dir/$client-s$seed" --algo a3c --env CartPole-v1 --workers 2 --mode semi-async \
                --semi-async-client "$client" --seed "$seed" --time-limit-s 120
        done
    done
    "$PYTHON" - "$dir" <<'EOF' | tee "$dir/summary.txt"
import json, statistics, sys
from pathlib import Path

out = Path(sys.argv[1])
by: dict = {}
print(f"{'run':<16} {'s to target':>11} {'from 1st step':>13} {'env steps/s':>11} {'blocked':>8} {'staleness':>9}")
for run in sorted(p for p in out.iterdir() if p.is_dir()):
    s = json.loads((run / "summary.json").read_text())
    hist = {int(k): v for k, v in s["staleness_histogram"].items()}
    stale = sum(k * v for k, v in hist.items()) / max(sum(hist.values()), 1)
    first = s["startup"].get("first_step_s")
    to_target = s["time_to_target_s"]
    from_step = None if to_target is None or first is None else to_target - first
    by.setdefault(run.name.rsplit("-s", 1)[0], []).append((to_target, from_step, s["env_steps_per_s"],
                                                           s.get("push_blocked_fraction"), stale))
    fmt = lambda x, f: "not" if x is None else format(x, f)
    print(f"{run.name:<16} {fmt(to_target, '.2f'):>11} {fmt(from_step, '.2f'):>13} {s['env_steps_per_s']:>11.0f} "
          f"{fmt(s.get('push_blocked_fraction'), '.1%'):>8} {stale:>9.3f}")
for client, runs in by.items():
    reached = [r[1] for r in runs if r[1] is not None]
    print(f"{client}: {len(reached)} of {len(runs)} reached the target; median s from the first env step "
          f"{statistics.median(reached) if reached else 'none':}; median env steps/s "
          f"{statistics.median(r[2] for r in runs):.0f}; median blocked {statistics.median(r[3] or 0 for r in runs):.1%}")
EOF
fi

if [[ $PARTS == *" menger "* ]]; then
    dir="$OUT/menger"
    mkdir -p "$dir"
    load "gorila bench menger --part reads"
    "$GORILA" bench menger --part reads --readers 16,64,256 --caches none,poll,push --seconds 5 --out "$dir" \
        | tee "$dir/bench.log"
    "$PYTHON" - "$dir" <<'EOF' | tee "$dir/summary.txt"
import csv, sys
from pathlib import Path

print(f"{'cache':>5} {'readers':>7} {'read mean ms':>12} {'p99':>8} {'age versions':>12} {'age ms':>8} {'p99':>8}")
for r in csv.DictReader(open(Path(sys.argv[1]) / "reads.csv")):
    print(f"{r['cache']:>5} {r['readers']:>7} {float(r['read_latency_mean_ms']):>12.2f} "
          f"{float(r['read_latency_p99_ms']):>8.2f} {float(r['age_versions_mean']):>12.2f} "
          f"{float(r['age_ms_mean']):>8.1f} {float(r['age_ms_p99']):>8.1f}")
EOF
fi

if [[ $PARTS == *" simulate-check "* ]]; then
    dir="$OUT/simulate-check"
    mkdir -p "$dir"
    if [[ ! -f $dir/calibration.json ]]; then
        load "gorila simulate --calibrate"
        "$GORILA" simulate --calibrate --out "$dir/calibration.json"
    fi
    runs=()
    for workers in 1 2; do
        for mode in sync async; do
            # the calibrated lstsq problem; the tolerance out of reach, so that the time limit ends it
            train "$dir/lstsq-$mode-$workers" --algo lstsq --mode "$mode" --workers "$workers" --n 25000 --d 400 \
                --condition 100 --iterations 1000000 --tol 1e-12 --time-limit-s 30
            train "$dir/a3c-$mode-$workers" --algo a3c --env CartPole-v1 --mode "$mode" --workers "$workers" \
                --time-limit-s 30 --no-stop-at-target
            runs+=("$dir/lstsq-$mode-$workers" "$dir/a3c-$mode-$workers")
        done
        train "$dir/impala-async-$workers" --algo impala --env CartPole-v1 --server process --mode async \
            --learners "$workers" --time-limit-s 30 --no-stop-at-target
        runs+=("$dir/impala-async-$workers")
    done
    load "gorila simulate --check"
    "$GORILA" simulate --calibration "$dir/calibration.json" --check "${runs[@]}" --out "$dir" | tee "$dir/summary.txt"
fi
