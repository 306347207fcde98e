#!/usr/bin/env bash
# Seed 003's figure on this machine: the score on LunarLander-v3 against wall time, a synchronous DQN
# (one actor and its learner in one process, each waiting for the other) beside the decoupled
# asynchronous pipeline (Ape-X: actors, replay as a service, a learner that prefetches), 3 seeds each,
# the same training-time budget each, one run after another:
#
#   tools/seed003_figure.sh OUTDIR            # about 6 x (BUDGET_S + ~15 s); BUDGET_S=900 by default
#   BUDGET_S=600 SEEDS="0 1 2" tools/seed003_figure.sh OUTDIR
#
# Run it on a machine with nothing else running. Before each run it prints the load average. It keeps
# every run directory (OUTDIR/dqn-sync-sS, OUTDIR/apex-sS; each one's final summary line in
# OUTDIR/stdout/), then writes
#   OUTDIR/seed003.png          gorila plot --group of the six runs: each setting's median and range,
#                               by env steps and by seconds of training
#   OUTDIR/seed003-curves.csv   every evaluation of every run (setting, seed, time_s, env_steps, eval_return,
#                               at the training second and env step its parameters were taken): the
#                               curves to commit under docs/data/
#   OUTDIR/seed003.txt          per run: seconds of training to the first evaluation >= TARGET (200,
#                               LunarLander's threshold), best evaluation, env steps/s, the learner's wait
#                               for data; and the speed-up (median seconds to TARGET, sync over async)
# GORILA (default: gorila) and PYTHON (default: python3) name the commands used.
set -euo pipefail
OUT=${1:?usage: tools/seed003_figure.sh OUTDIR}
BUDGET_S=${BUDGET_S:-900}
SEEDS=${SEEDS:-"0 1 2"}
TARGET=${TARGET:-200}
GORILA=${GORILA:-gorila}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT/stdout"

# The same flags for both: the env, a greedy evaluation every 10 s, and no stop at the target, so that
# every curve covers the whole budget.
COMMON=(--env LunarLander-v3 --time-limit-s "$BUDGET_S" --eval-every-s 10 --no-stop-at-target)
# The synchronous baseline: Gorila DQN's one bundle (actor, replay, learner) on the local runtime,
# which steps it in one process, acting and learning in turn, as the seed's synchronous baselines do.
SYNC=(--algo dqn --runtime local --actors 1 --mode sync)
# The decoupled pipeline: Ape-X on the embedded Ray, its defaults (actors on the spare cores).
ASYNC=(--algo apex)

for seed in $SEEDS; do
    for setting in dqn-sync apex; do
        run_dir="$OUT/$setting-s$seed"
        if [[ -f $run_dir/summary.json ]]; then echo "$run_dir: done already, kept"; continue; fi
        rm -rf "$run_dir"
        echo "== $setting seed $seed, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -Is)"
        if [[ $setting == dqn-sync ]]; then flags=("${SYNC[@]}"); else flags=("${ASYNC[@]}"); fi
        "$GORILA" train "${flags[@]}" "${COMMON[@]}" --seed "$seed" --run-dir "$run_dir" > "$OUT/stdout/$setting-s$seed.json"
    done
done

"$GORILA" plot --group --title "LunarLander-v3: synchronous DQN against Ape-X, seeds $SEEDS" \
    --out "$OUT/seed003.png" "$OUT"/dqn-sync-s*/ "$OUT"/apex-s*/

"$PYTHON" - "$OUT" "$TARGET" <<'EOF' | tee "$OUT/seed003.txt"
import csv, json, statistics, sys
from pathlib import Path

out, target = Path(sys.argv[1]), float(sys.argv[2])
rows, to_target = [], {}
print(f"{'run':<16} {'s to ' + format(target, 'g'):>9} {'best eval':>10} {'env steps/s':>12} {'learner waits':>14}")
for run in sorted(p for p in out.glob("*-s*") if p.is_dir()):
    setting, seed = run.name.rsplit("-s", 1)
    summary = json.loads((run / "summary.json").read_text())
    reached = None
    for row in csv.DictReader(open(run / "metrics.csv")):
        if row["eval_return"]:  # placed where its parameters were taken, as gorila plot places it
            ret, taken_s = float(row["eval_return"]), float(row["eval_train_time_s"])
            rows.append({"setting": setting, "seed": seed, "time_s": taken_s, "env_steps": row["eval_env_steps"],
                         "eval_return": ret})
            if reached is None and ret >= target:
                reached = taken_s
    to_target.setdefault(setting, []).append(reached)
    wait = summary.get("learner_wait_fraction")
    print(f"{run.name:<16} {'not' if reached is None else format(reached, '.1f'):>9} "
          f"{summary.get('best_eval_return', float('nan')):>10.1f} {summary.get('env_steps_per_s', 0):>12.0f} "
          f"{'' if wait is None else format(wait, '.1%'):>14}")
with open(out / "seed003-curves.csv", "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=["setting", "seed", "time_s", "env_steps", "eval_return"])
    writer.writeheader()
    writer.writerows(rows)
medians = {s: statistics.median(t) for s, t in to_target.items() if t and all(x is not None for x in t)}
for setting, times in to_target.items():
    print(f"{setting}: seconds of training to {target:g}: {times}; median {medians.get(setting, 'not all reached')}")
if {"dqn-sync", "apex"} <= set(medians):
    print(f"speed-up (median seconds to {target:g}, synchronous DQN over Ape-X): "
          f"{medians['dqn-sync'] / medians['apex']:.2f}x")
else:
    print(f"speed-up: not every run reached {target:g} within the budget; read it off the figure")
print(f"wrote {out / 'seed003.png'}, {out / 'seed003-curves.csv'}")
EOF
