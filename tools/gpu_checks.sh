#!/usr/bin/env bash
# The checks of a lent GPU machine (one GPU, 16 cores), in one command that ends within its budget:
#   tools/gpu_checks.sh [SECONDS [PART...]]   # SECONDS default 560; PARTs: cuda curves pong (default: all three)
# Outputs under $OUT (or ./gpu-out).
# Run through the device tool with .whl carried (see tools/gpu_machine_setup.sh). Each step has its own
# time limit and its log; after every step all outputs are packed again into $OUT/results.tgz (no
# checkpoints), so a command cut short still brings back everything finished before. $OUT/steps.txt
# says which step ended how and when.
set -uo pipefail
BUDGET=${1:-560}
PARTS=" ${*:2} "
[[ $PARTS == "  " ]] && PARTS=" cuda curves pong "
OUT=${OUT:-$PWD/gpu-out}
export W=/tmp/gpu-work
mkdir -p "$OUT" "$W"
START=$(date +%s)
export PYTHONUNBUFFERED=1 RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0

elapsed() { echo $(( $(date +%s) - START )); }
# written aside and renamed: the minute's pack of a long step and the pack after it never write one file at once
pack() { local part; part=$(mktemp "$OUT/.results.XXXX")
         tar czf "$part" --exclude='checkpoints' --exclude='*.safetensors' -C "$W" . 2>/dev/null; mv -f "$part" "$OUT/results.tgz"; }
# step NAME SECONDS COMMAND...: the command's output in $W/NAME.log; skipped when too little budget is left.
step() {
    local name=$1 limit=$2; shift 2
    local left=$(( BUDGET - $(elapsed) - 15 ))
    if (( left < 20 )); then echo "$(elapsed)s $name: skipped (budget spent)" | tee -a "$OUT/steps.txt"; return; fi
    (( limit > left )) && limit=$left
    local t0=$(date +%s)
    # packed every minute as well, so that a command cut short still brings back a long step's curve
    ( while sleep 60; do pack; done ) & local packer=$!
    timeout -k 5 "$limit" "$@" > "$W/$name.log" 2>&1
    local rc=$?
    kill "$packer" 2>/dev/null
    echo "$(elapsed)s $name: rc=$rc in $(( $(date +%s) - t0 ))s (limit ${limit}s)" | tee -a "$OUT/steps.txt"
    tail -n 4 "$W/$name.log"
    pack
}

source tools/gpu_machine_setup.sh install > "$W/setup.log" 2>&1 || { cat "$W/setup.log"; exit 1; }
set +e  # the setup script's -e: a failed step is logged and the next one runs
cat "$W/setup.log"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc; uptime; } > "$W/machine.txt" 2>&1
cat "$W/machine.txt"

wanted() { [[ $PARTS == *" $1 "* ]]; }

# 1. CUDA paths: the GPU unit tests, the learner with and without copying the next minibatch ahead,
#    and a short CartPole run of each learner / inference server on the GPU (three at once: 16 cores).
wanted cuda && step gpu_tests 60 python3 -m pytest -q -p no:cacheprovider tests/unit/test_device_copy.py tests/unit/test_builder_kit.py
wanted cuda && step learner_pong 90 gorila bench learner --env ALE/Pong-v5 --device cuda --device-copy both --batch-size 256 \
    --fill 3000 --seconds 8 --rounds 8 --out "$W/learner_pong"
cartpole() {  # two embedded Rays at once are avoided: DQN on the local runtime beside Ape-X, then IMPALA
    gorila train --algo dqn --runtime local --device cuda --time-limit-s 45 --run-dir "$W/cp_dqn_cuda" > "$W/cp_dqn.log" 2>&1 &
    gorila train --algo apex --device cuda --time-limit-s 45 --run-dir "$W/cp_apex_cuda" > "$W/cp_apex.log" 2>&1
    wait
    gorila train --algo impala --inference central --device cuda --inference-device cuda --time-limit-s 40 \
        --run-dir "$W/cp_impala_cuda" > "$W/cp_impala.log" 2>&1
    for f in "$W"/cp_*/summary.json; do python3 -c "import json,sys; s=json.load(open(sys.argv[1])); \
print(sys.argv[1], 'reached', s.get('reached_target'), 'best', s.get('best_eval_return'), \
'T', s.get('time_to_target_s'), 'steps', s.get('env_steps'))" "$f"; done
}
export -f cartpole  # a shell function runs under timeout through bash -c
wanted cuda && step cartpole_cuda 110 bash -c cartpole

# 3. Curves past 2 workers, beside the machine limit measured in the same run, and the simulator's predictions.
wanted curves && step speedup_lstsq 60 gorila bench speedup --algo lstsq --workers 1,2,4,8,16 --repeats 1 --out "$W/speedup_lstsq"
# Runs of 60 k steps took 80 s for five counts on 16 cores, too short to judge a worker's steady state:
# 200 k steps, and a whole step's time for them.
wanted curves && step speedup_a3c 150 gorila bench speedup --algo a3c --mode async --workers 1,2,4,8,16 --repeats 1 \
    --total-steps 200000 --limit-seconds 3 --out "$W/speedup_a3c"
wanted curves && step speedup_impala 150 gorila bench speedup --algo impala --mode async --workers 1,2,4,8,16 \
    --repeats 1 --total-steps 200000 --limit-seconds 3 --out "$W/speedup_impala"
wanted curves && step menger_writes 45 gorila bench menger --part writes --writers 64 --payloads 1M --seconds 3 --out "$W/menger_writes"
simulate() {
    gorila simulate --calibrate --seconds 1 --out "$W/calibration.json" &&
    gorila simulate --calibration "$W/calibration.json" --algo lstsq --mode sync --workers 1,2,4,8,16 --out "$W/sim_lstsq" &&
    gorila simulate --calibration "$W/calibration.json" --algo a3c --mode async --workers 1,2,4,8,16 --out "$W/sim_a3c"
}  # the calibration measures lstsq's and A3C's gradients only
export -f simulate
wanted curves && step simulate 60 bash -c simulate

# 2. Pong with IMPALA, central inference and the learner on the GPU, for what is left of the budget: batches of
#    4 segments of 20 steps x 8 envs (640 env steps a gradient, the IMPALA paper's 32 x 20), Adam at 2.5e-4; four
#    learners and shards, as one learner made 14.5 updates/s there, too few to learn Pong in 10 minutes.
wanted pong && (( BUDGET - $(elapsed) > 100 )) && step pong_impala 560 gorila train --algo impala --env ALE/Pong-v5 --inference central --device cuda \
    --inference-device cuda --actors 12 --learners 4 --shards 4 --envs-per-actor 8 --unroll-length 20 --batch-size 4 --optimizer adam \
    --lr 0.00025 --entropy-coef 0.01 --max-grad-norm 40 --eval-every-s 45 --eval-episodes 3 --total-steps 100000000 \
    --time-limit-s $(( BUDGET - $(elapsed) - 90 )) --run-dir "$W/pong_impala"
echo "done in $(elapsed)s"
