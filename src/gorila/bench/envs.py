"""``gorila bench envs --env ALE/Pong-v5``: env steps per second of each backend an actor can step its
envs on (``--env-backend``), Gymnasium's and EnvPool's, per core and on the whole machine.

Each backend steps ``--envs`` copies of the env with random actions, as one actor steps them
(EnvPool's Atari is set up as :func:`gorila.envs.make.make_env` sets up Gymnasium's, so both play
the same games). Per core, each figure is steps over the CPU time the stepping process used
(EnvPool's threads included): a figure of the work itself, which load from elsewhere on the machine
hits far less than wall time. On the whole machine, Gymnasium's envs step in one process per core
and EnvPool's in one process with a thread per core; those are steps over wall seconds. The
figures are taken in alternating rounds (medians); the ratio is each backend's against Gymnasium's
alone on one core, the bare loop every actor would otherwise run::

    gorila bench envs --env ALE/Pong-v5 --envs 16 --seconds 20 --out bench-out/envs
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from typing import Any

import gymnasium as gym
import numpy as np

from gorila import validate
from gorila.bench.report import bench_dir, write_bench_json
from gorila.cliargs import command_parser
from gorila.errors import ConfigError

#: (name, backend, processes, EnvPool threads): None is one per core.
SETUPS = (("gymnasium, 1 process", "gymnasium", 1, 0), ("envpool, 1 thread", "envpool", 1, 1),
          ("gymnasium, a process per core", "gymnasium", None, 0), ("envpool, a thread per core", "envpool", 1, None))


def main(argv: list[str]) -> int:
    from gorila.envs.vector import envpool_supports

    parser = command_parser("gorila bench envs", __doc__)
    parser.add_argument("--env", default="ALE/Pong-v5", help="Gymnasium id (ALE/<Game>-v5: EnvPool has them all)")
    parser.add_argument("--envs", type=int, default=16, help="envs stepped together, as one actor's")
    parser.add_argument("--seconds", type=float, default=20.0, help="measuring time of each figure, in rounds")
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--out", default=None, help="directory for bench.json (default: bench-out/envs-<time>)")
    args = parser.parse_args(argv)
    validate.integer("envs", args.envs, low=1)
    validate.number("seconds", args.seconds, low=0.0, low_open=True)
    validate.integer("rounds", args.rounds, low=1)
    if not envpool_supports(args.env):
        raise ConfigError("env", f"EnvPool is not installed or has no task for {args.env}: pip install "
                                 "'gorila[envpool]', or name an id it has (ALE/<Game>-v5)")
    cores = os.cpu_count() or 1
    load = os.getloadavg()[0]
    print(f"gorila bench envs: {args.env}, {args.envs} envs stepped together with random actions, {cores} cores, "
          f"medians of {args.rounds} alternating rounds, {args.seconds:g} s per figure (load average {load:.2f} "
          "before)")
    print("  per core: steps over the stepping process's CPU seconds (EnvPool's threads included), one process; "
          "machine: steps over wall seconds, every core stepping")
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name, *_ in SETUPS}
    for _ in range(args.rounds):
        for name, backend, processes, threads in SETUPS:
            figures[name].append(_measure(args, backend, processes or cores, cores if threads is None else threads,
                                          args.seconds / args.rounds))
    base = float(np.median([cpu for cpu, _ in figures[SETUPS[0][0]]]))
    rows: list[dict[str, Any]] = []
    envpool_core = 0.0
    print(f"{'backend':>30} {'steps/s per core':>17} {'steps/s':>10} {'ratio':>6}")
    for name, backend, processes, threads in SETUPS:
        per_core = float(np.median([cpu for cpu, _ in figures[name]]))
        wall = float(np.median([w for _, w in figures[name]]))
        print(f"{name:>30} {per_core:>17,.0f} {wall:>10,.0f} {per_core / base:>6.2f}")
        if backend == "envpool" and threads == 1:
            envpool_core = per_core
        rows.append({"setup": name, "backend": backend, "processes": processes or cores,
                     "threads": cores if threads is None else threads or None, "steps_per_cpu_s": per_core,
                     "steps_per_s": wall, "gymnasium_steps_per_cpu_s": base, "ratio": per_core / base})
    write_bench_json(bench_dir(args.out, "envs"), "envs", vars(args), rows, load_before=load,
                     envpool_steps_per_cpu_s=envpool_core, limit_steps_per_cpu_s=base, ratio=envpool_core / base)
    return 0


def _measure(args: Any, backend: str, processes: int, threads: int, seconds: float) -> tuple[float, float]:
    """``(steps per CPU second, steps per wall second)`` of ``processes`` processes each stepping
    ``args.envs`` envs on ``backend`` for ``seconds`` (EnvPool with ``threads`` threads), at once."""
    ctx = mp.get_context("spawn")  # no Ray, no torch in them: a fresh interpreter each
    results: mp.Queue = ctx.Queue()
    barrier = ctx.Barrier(processes)
    workers = [ctx.Process(target=_step_envs, args=(args.env, args.envs, args.seed + 1000 * k, backend, threads,
                                                    seconds, barrier, results)) for k in range(processes)]
    for worker in workers:
        worker.start()
    try:
        done = [results.get(timeout=seconds + 300.0) for _ in workers]
    finally:
        for worker in workers:
            worker.join(timeout=30.0)
            if worker.is_alive():
                worker.kill()
    steps = sum(n for n, _, _ in done)
    return steps / sum(cpu for _, cpu, _ in done), steps / max(wall for _, _, wall in done)


def _step_envs(env_id: str, num_envs: int, seed: int, backend: str, threads: int, seconds: float,
               barrier: Any, results: Any) -> None:
    """One measuring process: ``(env steps, CPU seconds, wall seconds)`` of ``seconds`` of stepping."""
    from gorila.envs.vector import EnvPoolBackend, EnvRunner, make_env_runner

    runner = (EnvRunner(EnvPoolBackend(env_id, num_envs, seed=seed, training=True, threads=threads))
              if backend == "envpool" else make_env_runner(env_id, num_envs, seed=seed, training=True,
                                                           backend="gymnasium"))
    rng = np.random.default_rng(seed)
    space = runner.action_space
    if not isinstance(space, gym.spaces.Discrete):
        raise ConfigError("env", f"{env_id} has {space}: this bench steps envs of discrete actions (Atari's)")
    n_actions = int(space.n)
    actions = rng.integers(n_actions, size=(1024, num_envs))
    for k in range(20):  # warm-up: the first steps pay for page faults and the threads' start
        runner.step(actions[k])
    barrier.wait(120.0)
    steps, k = 0, 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while time.perf_counter() - wall0 < seconds:
        steps += len(runner.step(actions[k % len(actions)]))
        k += 1
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    runner.close()
    results.put((steps, cpu, wall))
