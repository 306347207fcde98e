#!/usr/bin/env bash
# The recurrent agents' acceptance measurements (issue 63), one run after another on this machine, each output kept:
#
#   tools/recurrent_acceptance.sh OUT_DIR            # from the repository root, after `make setup`
#
# 1. gorila/StatelessCartPole-v1 (CartPole-v1 without its velocities, target 475): LSTM IMPALA and LSTM PPO on
#    seeds 0-2, each to the target (presets stateless-cartpole-impala, stateless-cartpole-ppo);
# 2. the same algorithms without the core (--core none), each given the budget the recurrent runs used (the most env
#    steps any of its seeds took, and the same time limit), seeds 0-2;
# 3. SB3-contrib's RecurrentPPO with RL-Zoo's CartPoleNoVel-v1 settings (tools/sb3_recurrent_peer.py), seeds 0-2, in
#    a virtual environment of its own made under OUT_DIR (never gorila's);
# 4. gorila/MemoryLength-v0 (a cue recalled 10 steps later, target 1): LSTM IMPALA and LSTM PPO (presets
#    memory-length-impala, memory-length-ppo) against both without the core, the same budget, seeds 0-2.
#
# Before each run the load average is printed and logged (runs/<name>.load); each run's terminal output goes to
# OUT_DIR/logs/<name>.log, its run directory to OUT_DIR/runs/<name>; OUT_DIR/summary.md and summary.json gather
# time to target, best evaluation and env steps of every run, and the medians. Settings by environment:
#   TIME_LIMIT_S   each run's training time limit (default 600)
#   SEEDS          the seeds (default "0 1 2")
#   RUNTIME        gorila's runtime (default local, one process: on 2 cores the smoke runs of these small tasks
#                  reached the target sooner there than on the embedded Ray; "ray" for that)
#   PEER_TIME_LIMIT_S  the peer's training time limit (default 1800: RecurrentPPO made 4-30 env steps a second on
#                  the 2-core development machine, so a run not at the target by then gives a lower bound)
#   PEER_VENV      an existing virtual environment with sb3-contrib, instead of making OUT_DIR/peer-venv
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 OUT_DIR" >&2
    exit 2
fi
OUT=$(realpath -m "$1")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GORILA="$ROOT/.venv/bin/gorila"
PYTHON="$ROOT/.venv/bin/python"
TIME_LIMIT_S=${TIME_LIMIT_S:-600}
PEER_TIME_LIMIT_S=${PEER_TIME_LIMIT_S:-1800}
SEEDS=${SEEDS:-"0 1 2"}
RUNTIME=${RUNTIME:-local}
[[ -x "$GORILA" ]] || { echo "no $GORILA: run make setup first" >&2; exit 2; }
mkdir -p "$OUT/logs" "$OUT/runs"

load() {  # the load average before a run, on the terminal and beside the run's log
    local name=$1
    echo "== $name: load average $(cut -d' ' -f1-3 /proc/loadavg) ($(date -u +%H:%M:%S) UTC)" | tee "$OUT/logs/$name.load"
}

train() {  # NAME gorila-train-flags...: one gorila run, its summary in runs/NAME/summary.json
    local name=$1
    shift
    load "$name"
    "$GORILA" train --runtime "$RUNTIME" --time-limit-s "$TIME_LIMIT_S" --run-dir "$OUT/runs/$name" "$@" \
        > "$OUT/logs/$name.log" 2>&1 || echo "   $name exited $? (see logs/$name.log)"
    "$PYTHON" - "$OUT/runs/$name/summary.json" <<'EOF' || true
import json, sys
s = json.load(open(sys.argv[1]))
print(f"   reached_target {s['reached_target']}  time_to_target_s {s['time_to_target_s']}  "
      f"best_eval_return {s['best_eval_return']}  env_steps {s['env_steps']}")
EOF
}

most_steps() {  # PREFIX: the most env steps any run named PREFIX-seed* took (the budget of its feed-forward peers)
    "$PYTHON" - "$OUT/runs" "$1" <<'EOF'
import json, pathlib, sys
runs = sorted(pathlib.Path(sys.argv[1]).glob(f"{sys.argv[2]}-seed*/summary.json"))
print(max(json.loads(p.read_text())["env_steps"] for p in runs))
EOF
}

# 1-2. CartPole without velocities: recurrent to the target, then feed-forward on the same budget. PPO keeps its
# preset's 100 k steps, RL-Zoo's (its learning rate falls to 0 over them); IMPALA gets 2 M.
for algo in impala ppo; do
    steps=()
    [[ $algo == impala ]] && steps=(--total-steps 2000000)
    for seed in $SEEDS; do
        train "stateless-$algo-lstm-seed$seed" --preset "stateless-cartpole-$algo" --seed "$seed" "${steps[@]}"
    done
    budget=$(most_steps "stateless-$algo-lstm")
    for seed in $SEEDS; do
        train "stateless-$algo-ff-seed$seed" --preset "stateless-cartpole-$algo" --core none --seed "$seed" \
            --total-steps "$budget"
    done
done

# 3. The single-process recurrent peer, one seed after another on the same machine.
PEER_VENV=${PEER_VENV:-$OUT/peer-venv}
if [[ ! -x "$PEER_VENV/bin/python" ]]; then
    echo "== making $PEER_VENV (torch, sb3-contrib): the peer's own, never gorila's"
    python3 -m venv "$PEER_VENV"
    "$PEER_VENV/bin/pip" install -q torch==2.13.0 sb3-contrib > "$OUT/logs/peer-venv.log" 2>&1
fi
for seed in $SEEDS; do
    load "peer-recurrentppo-seed$seed"
    "$PEER_VENV/bin/python" "$ROOT/tools/sb3_recurrent_peer.py" --target 475 --seed "$seed" \
        --time-limit-s "$PEER_TIME_LIMIT_S" > "$OUT/logs/peer-recurrentppo-seed$seed.log" 2>&1 \
        || echo "   peer seed $seed exited $?"
    tail -n 1 "$OUT/logs/peer-recurrentppo-seed$seed.log" | tee "$OUT/runs/peer-recurrentppo-seed$seed.json"
done

# 4. The memory task: recurrent against feed-forward on the same budget.
for algo in impala ppo; do
    for seed in $SEEDS; do
        train "memory-$algo-lstm-seed$seed" --preset "memory-length-$algo" --seed "$seed"
    done
    budget=$(most_steps "memory-$algo-lstm")
    for seed in $SEEDS; do
        train "memory-$algo-ff-seed$seed" --preset "memory-length-$algo" --core none --seed "$seed" \
            --total-steps "$budget"
    done
done

# The figures side by side: each run's, then each group's medians.
"$PYTHON" - "$OUT" <<'EOF'
import json, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
rows = []
for path in sorted((out / "runs").iterdir()):
    name = path.name.removesuffix(".json")
    if path.suffix != ".json" and not (path / "summary.json").exists():
        continue  # a run that failed before its summary: its log says why
    group, seed = name.rsplit("-seed", 1)
    if path.suffix == ".json":  # the peer's last line
        s = json.loads(path.read_text())
        row = dict(reached=s["reached"], time_to_target_s=s["seconds"] if s["reached"] else None,
                   best=s.get("best"), env_steps=s["env_steps"])
    else:
        s = json.loads((path / "summary.json").read_text())
        row = dict(reached=s["reached_target"], time_to_target_s=s["time_to_target_s"], best=s["best_eval_return"],
                   env_steps=s["env_steps"])
    load = (out / "logs" / f"{name}.load").read_text().split("load average ")[1].split(" (")[0]
    rows.append(dict(group=group, seed=int(seed), load=load, **row))
groups = {}
for row in rows:
    groups.setdefault(row["group"], []).append(row)
lines = ["| run | seed | load before | reached | time to target (s) | best evaluation | env steps |",
         "|---|---|---|---|---|---|---|"]
lines += [f"| {r['group']} | {r['seed']} | {r['load']} | {r['reached']} | {r['time_to_target_s']} | {r['best']} | "
          f"{r['env_steps']} |" for r in rows]
lines += ["", "| group | reached | median time to target (s) | median best evaluation |", "|---|---|---|---|"]
medians = {}
for group, runs in groups.items():
    times = [r["time_to_target_s"] for r in runs if r["time_to_target_s"] is not None]
    bests = [r["best"] for r in runs if r["best"] is not None]
    medians[group] = dict(reached=sum(r["reached"] for r in runs), runs=len(runs),
                          median_time_to_target_s=statistics.median(times) if len(times) == len(runs) else None,
                          median_best=statistics.median(bests) if bests else None)
    m = medians[group]
    lines.append(f"| {group} | {m['reached']}/{m['runs']} | {m['median_time_to_target_s']} | {m['median_best']} |")
(out / "summary.md").write_text("\n".join(lines) + "\n")
(out / "summary.json").write_text(json.dumps({"runs": rows, "groups": medians}, indent=2))
print("\n".join(lines))
EOF
