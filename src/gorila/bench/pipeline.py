"""``gorila bench pipeline --algo A --env E``: a real training run's steady-state frames/s beside
the machine's limit for it, measured in the same command.

The run is ``gorila train`` with the flags given (``--seconds`` of training, no stop at the
target). Its steady rate is read from its metrics rows after the first quarter of its training
time (start-up, the first chunks and the replay's warm-up are not steady). The limit is what the
machine's cores allow if they did nothing but the work each frame needs, each part timed on one
thread after the run, by one process per core at the same time::

    limit = cores / (env step + acting forward pass at the actors' batch + learner work per frame)

A run keeps every core busy, and cores that share a physical core, its caches or its memory
bandwidth do less each when all of them work (on a 2-vCPU virtual machine a learner's update took
25-35 % longer with a busy loop on the other vCPU): each part is therefore timed with every core
timing it, and the mean of their figures is its cost. The same parts timed by this process alone
give ``limit_alone_frames_per_s`` and ``ratio_alone`` beside it, the ceiling of an idle machine. A
learner is one process, so a run also learns no faster than its learners each on one core:
``learner_bound_frames_per_s`` (``--learners`` / the learner term) and the run's ratio to it.

The acting term is the actors' own way of acting: through the policy's numpy twin where it has one.

The learner's work per frame is its bare PyTorch loop on the same network, loss and batches
(the limit of :mod:`gorila.bench.learner`): for IMPALA and PPO the frames it learns from per second (PPO's
epochs included), for DQN and Ape-X (its dueling network where the run has one) its updates per
second times the run's updates per frame (the replay ratio). The report also says where each kind
of process spent the run (CPU seconds over training seconds, and the learner's share of time
waiting for data) and, for IMPALA and PPO, where the actors' own CPU went a frame (their forward
pass and draw, the env step, pulls of the parameters, sending segments), beside what the first two
cost when timed.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gorila import validate
from gorila.bench.machine_limit import gather_at_once
from gorila.bench.report import bench_dir, write_bench_json
from gorila.cliargs import command_parser
from gorila.errors import ConfigError

if TYPE_CHECKING:
    from multiprocessing.queues import Queue
    from multiprocessing.synchronize import Barrier

ALGOS = ("impala", "ppo", "dqn", "apex")
#: What a segment actor reports of its time (``actor_<part>_us`` in a run's summary).
ACTOR_PARTS = ("act", "env", "pull", "send")
#: The share of the run's training time left out of the steady rate, from its start.
WARM_UP = 0.25


def main(argv: list[str]) -> int:
    parser = command_parser("gorila bench pipeline", __doc__)
    parser.add_argument("--algo", default=None, choices=ALGOS, help="the algorithm trained (default: impala)")
    parser.add_argument("--env", default=None, help="Gymnasium id (default: MinAtar/Breakout-v1)")
    parser.add_argument("--seconds", type=float, default=40.0, help="training seconds of the run")
    parser.add_argument("--runtime", default="ray", choices=("ray", "local"), help="where the run's processes run")
    parser.add_argument("--server", default=None, choices=("process", "learner"),
                        help="where the updates are applied: process (the shards) or learner (it owns its parameters) "
                             "(default: the run's own, as gorila train chooses it)")
    parser.add_argument("--mode", default=None, choices=("sync", "async", "semi-async"),
                        help="the run's update rule, as gorila train takes it (ppo: async is APPO) (default: the "
                             "algorithm's own)")
    parser.add_argument("--preset", default=None,
                        help="the run's preset (gorila presets), whose settings the run and the limit's parts take; "
                             "--algo and --env default to its")
    parser.add_argument("--seed", type=int, default=0, help="the run's seed")
    parser.add_argument("--limit-seconds", type=float, default=3.0, help="timing of each part of the limit")
    parser.add_argument("--out", default=None, help="directory for bench.json and the run (default: bench/pipeline)")
    args = parser.parse_args(argv)
    _fill_from_preset(args)
    validate.number("seconds", args.seconds, low=5.0)
    validate.number("limit_seconds", args.limit_seconds, low=0.2)
    out = bench_dir(args.out, "pipeline")
    figures = measure(args, out)
    write_bench_json(out, "pipeline", vars(args), [figures])
    return 0


def _fill_from_preset(args: Any) -> None:
    """``--algo`` and ``--env`` from ``--preset`` where not given (a preset of another algorithm is
    refused, naming ``preset``), else their defaults."""
    from gorila.agents import presets

    chosen = None if args.preset is None else presets.named(args.preset, args.algo or presets.algo_of(args.preset)
                                                             or "impala")
    args.algo = args.algo or (chosen.algo if chosen else "impala")
    if args.algo not in ALGOS:
        raise ConfigError("preset", f"{args.preset} is a setting of --algo {args.algo}, which this bench does not run")
    args.env = args.env or (chosen.settings["env"] if chosen else "MinAtar/Breakout-v1")
    if chosen is not None:
        chosen.check_env(args.env)


def measure(args: Any, out: Path) -> dict[str, Any]:
    import gorila

    load = os.getloadavg()[0]
    chosen = {name: getattr(args, name) for name in ("preset", "server", "mode") if getattr(args, name) is not None}
    asked = "".join(f" --{name} {value}" for name, value in chosen.items())
    print(f"gorila bench pipeline --algo {args.algo} --env {args.env} --runtime {args.runtime}{asked}: "
          f"{args.seconds:g} s of training (load average {load:.2f} before)")
    run_dir = out / "run"
    summary = gorila.train(args.algo, env=args.env, runtime=args.runtime, **chosen, seed=args.seed,
                           time_limit_s=args.seconds, stop_at_target=False, run_dir=run_dir,
                           eval_every_s=args.seconds)
    steady = steady_rate(run_dir / "metrics.csv")
    _wait_for_children(30.0)  # the run's processes still exiting would take CPU from the parts' timing
    saved = json.loads((run_dir / "config.json").read_text())
    server = saved["run"]["server"]  # the run's, default or given
    updates_per_frame = summary["updates"] / max(summary["env_steps"], 1)
    segments = segments_per_batch(args.algo, saved[args.algo])
    cores = os.cpu_count() or 1
    alone = limit_parts(args, updates_per_frame, segments)
    parts = alone if cores == 1 else limit_parts_at_once(args, updates_per_frame, segments, cores)
    limit = cores / (sum(parts.values()) / 1e6)
    limit_alone = cores / (sum(alone.values()) / 1e6)
    # A learner is one process: however many cores, a run learns no faster than its learners each on one
    # (Gorila DQN names no learners: its bundles act and learn in the same processes, which the cores' limit bounds).
    learners = int(saved[args.algo].get("learners") or 0)
    learner_bound = learners * 1e6 / parts["learn"] if learners else None
    train_s = summary["train_time_s"]
    busy = {kind: cpu / train_s for kind, cpu in summary["cpu_s_by_process_kind"].items()}
    figures = {"frames_per_s": steady, "limit_frames_per_s": limit, "ratio": steady / limit, "cores": cores,
               "server": server, "mode": saved["run"]["mode"],
               "limit_alone_frames_per_s": limit_alone, "ratio_alone": steady / limit_alone,
               "learner_bound_frames_per_s": learner_bound,
               "ratio_to_learner_bound": steady / learner_bound if learner_bound else None,
               **{f"{name}_us_per_frame": us for name, us in parts.items()},
               **{f"{name}_us_per_frame_alone": us for name, us in alone.items()},
               "updates_per_frame": updates_per_frame, "segments_per_batch": segments, "load_before": load,
               "busy_cores_by_process_kind": busy, "busy_cores": summary["cpu_time_s"] / train_s,
               "learner_wait_fraction": summary.get("learner_wait_fraction"),
               "policy_lag_mean": summary.get("learner_policy_lag_mean"),
               "final_train_return": summary.get("final_train_return"),
               "actor_us_per_frame": {part: summary.get(f"actor_{part}_us") for part in ACTOR_PARTS}}
    print(f"  run:   --server {server}, {steady:,.0f} frames/s steady ({summary['env_steps']:,} frames, "
          f"{summary['updates']:,} updates in {train_s:.1f} s of training), {figures['busy_cores']:.2f} of {cores} "
          "cores busy")
    print("  where: " + ", ".join(f"{kind} {share:.2f} cores" for kind, share in busy.items())
          + (f"; learner waiting for data {figures['learner_wait_fraction']:.0%} of its time"
             if figures["learner_wait_fraction"] is not None else ""))
    actor = {part: us for part, us in figures["actor_us_per_frame"].items() if us is not None}
    if actor:  # the segment actors' own account (IMPALA, PPO), beside the parts alone
        timed = {"act": parts["act"], "env": parts["env"]}
        print("  actors: " + ", ".join(f"{part} {us:.1f} µs" + (f" (timed {timed[part]:.1f})" if part in timed else "")
                                       for part, us in actor.items()) + " a frame, each actor's own CPU time")
    print(f"  limit: {cores} cores / ({' + '.join(f'{us:.1f} µs {name}' for name, us in parts.items())} a frame, "
          f"every core timing each part) = {limit:,.0f} frames/s")
    print(f"         alone: {cores} cores / ({' + '.join(f'{us:.1f} µs {name}' for name, us in alone.items())}) = "
          f"{limit_alone:,.0f} frames/s")
    if learner_bound is not None:
        print(f"         its {learners} learner process{'es' if learners > 1 else ''}, each on one core: "
              f"{learners} / {parts['learn']:.1f} µs learn = {learner_bound:,.0f} frames/s "
              f"({steady / learner_bound:.2f} of it)")
    print(f"  ratio: {figures['ratio']:.2f} of the limit ({figures['ratio_alone']:.2f} of the idle machine's)")
    return figures


def _wait_for_children(timeout_s: float) -> None:
    """Until every process this one started has exited (Ray's, after the run), or ``timeout_s``."""
    import psutil  # type: ignore[import-untyped]  # psutil ships no type hints

    psutil.wait_procs(psutil.Process().children(recursive=True), timeout=timeout_s)


def steady_rate(metrics: Path) -> float:
    """Frames per training second between the first row past :data:`WARM_UP` of the run's
    training time and its last row."""
    with open(metrics, newline="") as f:
        rows = [(float(r["time_s"]), int(r["env_steps"])) for r in csv.DictReader(f) if r["env_steps"]]
    if len(rows) < 3:
        raise ConfigError("seconds", f"the run logged {len(rows)} rows: too short to read a steady rate")
    end_t, end_frames = rows[-1]
    start_t, start_frames = next((t, n) for t, n in rows if t >= WARM_UP * end_t)
    if end_t <= start_t:
        start_t, start_frames = rows[0]
    return (end_frames - start_frames) / (end_t - start_t)


def segments_per_batch(algo: str, settings: dict[str, Any]) -> int:
    """The segments each batch of the run's IMPALA or PPO learner held (``settings``: the algorithm's
    part of its ``config.json``), which the limit's bare loop learns from too: PPO's default is one
    segment of every actor a learner serves, so its minibatches grow with the actors. 1 for the
    replay algorithms, whose learner term does not read it."""
    if algo == "ppo":
        return int(settings["batch_size"] or math.ceil(settings["actors"] / settings["learners"]))
    return int(settings["batch_size"]) if algo == "impala" else 1


def limit_parts(args: Any, updates_per_frame: float, segments: int = 1,
                together: Callable[[], object] = lambda: None) -> dict[str, float]:
    """Microseconds of one core a frame costs, each part timed in this process (IMPALA's and PPO's
    learner on batches of ``segments`` segments); ``together`` is called before each part's clock
    starts (where processes timing at once meet)."""

    torch.set_num_threads(1)
    plan, cfg, rl = _plan(args)
    runner = rl.env_spec(cfg.envs_per_actor).runner(args.seed)  # the actors' envs, as one actor steps them
    try:
        together()
        env = _env_us(runner, args.seed, args.limit_seconds)
        together()
        act = _act_us(plan.network_fn(), runner.observations, args.algo, args.limit_seconds)
    finally:
        runner.close()
    return {"env": env, "act": act, "learn": _learn_us(args, plan, cfg, updates_per_frame, segments, together)}


def limit_parts_at_once(args: Any, updates_per_frame: float, segments: int, copies: int, timeout_s: float = 600.0
                        ) -> dict[str, float]:
    """:func:`limit_parts` timed by ``copies`` fresh processes at once, each on one thread, every
    part started together: the mean of their figures, part by part."""
    timed = gather_at_once(_time_parts_together, [(args, updates_per_frame, segments)] * copies, timeout_s)
    return {part: float(np.mean([t[part] for t in timed])) for part in timed[0]}


def _time_parts_together(args: Any, updates_per_frame: float, segments: int, barrier: Barrier,
                         results: Queue[dict[str, float]], timeout_s: float) -> None:
    results.put(limit_parts(args, updates_per_frame, segments, functools.partial(barrier.wait, timeout_s)))


def _plan(args: Any) -> tuple[Any, Any, Any]:
    """The plan ``gorila train`` builds for ``args.algo`` on ``args.env`` with its presets (and
    ``args.preset``), on the local runtime with one actor: whose network, batches and learner are
    timed; and the algorithm's config and the RL config it was built from."""
    from gorila.agents.registry import ALGORITHMS
    from gorila.launch import configs_from_values

    given = {name: getattr(args, name) for name in ("mode", "preset") if getattr(args, name) is not None}
    run, configs = configs_from_values(args.algo, {"env": args.env, "runtime": "local", "seed": args.seed,
                                                   "actors": 1, "device": "cpu", "inference": "local", **given})
    make_plan = ALGORITHMS[args.algo].plan_fn()
    return make_plan(run, *configs), configs[0], configs[-1]


def _env_us(runner: Any, seed: int, seconds: float) -> float:
    """The env step of ``runner``'s envs with random actions, in CPU microseconds a frame: this
    process's CPU time, which counts the threads EnvPool steps its envs in (wall time would count
    the cores they spread over as one)."""
    rng = np.random.default_rng(seed)
    envs, actions = runner.num_envs, runner.action_space.n
    frames, t0, cpu0 = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - t0 < seconds:
        runner.step(rng.integers(actions, size=envs))
        frames += envs
    return (time.process_time() - cpu0) / frames * 1e6


def _act_us(network: torch.nn.Module, observations: np.ndarray, algo: str, seconds: float) -> float:
    """The acting forward pass at the actors' batch, and the action drawn from it, as the actors
    draw it: IMPALA's and PPO's through their policy's numpy twin where it has one
    (:class:`~gorila.nets.numpy_policy.PolicySampler`), Ape-X's greedy through its Q-network's twin
    where it has one, Gorila DQN's bundles greedy through torch (their learner shares the process)."""
    from gorila.nets import FlatParams
    from gorila.nets.numpy_policy import PolicySampler
    from gorila.nets.q import TorchQNetwork, numpy_q_network

    obs = np.asarray(observations)
    params = FlatParams(network).get()
    act: Callable[[np.ndarray], object]
    if algo in ("impala", "ppo"):
        sampler = PolicySampler(network, seed=0)
        sampler.set(params)
        act = sampler.sample_with_log_prob
    else:
        q_network = (numpy_q_network(network) if algo == "apex" else None) or TorchQNetwork(network)
        q_network.set(params)
        act = q_network.greedy
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        act(obs)
        calls += 1
    return (time.perf_counter() - t0) / (calls * len(obs)) * 1e6


def _learn_us(args: Any, plan: Any, cfg: Any, updates_per_frame: float, segments: int,
              together: Callable[[], object]) -> float:
    """The learner's bare loop (:mod:`gorila.bench.learner`'s limit) per frame: on the run's own
    network, loss and batches (IMPALA's and PPO's of ``segments`` segments, as the run's), Ape-X's
    dueling network included."""
    if args.algo in ("impala", "ppo"):
        from gorila.agents.kit import QUEUES
        from gorila.bench.segment_learner import SegmentLearnerWorker

        actor_spec, learner_spec = plan.groups({QUEUES: []})
        factory: Callable[..., Any] = functools.partial(
            SegmentLearnerWorker, actor=actor_spec.factory, learner=learner_spec.factory, batch_size=segments,
            pushes_per_batch=1, optimizer=cfg.optimizer, lr=cfg.lr)
        frames_per_s = _bare_rate(dataclasses.replace(plan, services=()), factory, args.limit_seconds, together)
        return 1e6 / frames_per_s
    if args.algo == "apex":
        from gorila.bench.apex_learner import ApexLearnerWorker

        actor_spec, learner_spec = plan.groups({"replay": []})  # the worker binds its own in-process replay
        (replay,) = plan.services
        factory = functools.partial(ApexLearnerWorker, actor=actor_spec.factory, learner=learner_spec.factory,
                                    replay=replay.factory, fill=cfg.learning_starts,
                                    request_rows=cfg.batch_size * cfg.prefetch, prefetch=cfg.prefetch,
                                    optimizer=plan.spec.optimizer, lr=cfg.lr)
        updates_per_s = _bare_rate(dataclasses.replace(plan, services=()), factory, args.limit_seconds, together)
        return updates_per_frame * 1e6 / updates_per_s
    from gorila.bench.bundle_learner import LearnerWorker
    from gorila.bench.sampling import bundle_factory

    factory = functools.partial(LearnerWorker, bundle=bundle_factory(plan), fill=2_000, optimizer=plan.spec.optimizer,
                                lr=cfg.lr)
    return updates_per_frame * 1e6 / _bare_rate(plan, factory, args.limit_seconds, together)


def _bare_rate(plan: Any, factory: Callable[..., Any], seconds: float, together: Callable[[], object]) -> float:
    """The bare loop's rate of one bench learner worker (``factory``) placed in this process."""
    from gorila.bench.sampling import placed_workers

    with placed_workers("local", None, plan, factory, 1, "learner") as group:
        group.call("limit_rate", 0.5)  # warm-up: first calls pay for page faults
        together()
        (rate,) = group.call("limit_rate", seconds)
    return float(rate)
