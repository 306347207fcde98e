"""``gorila bench sampling``: env steps/s of the DQN actor pipeline, with each actor's own network
(``--inference local``) or the run's inference server (``central``), beside what the machine allows
for the same envs and network on the same cores, measured in the same run."""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import gymnasium as gym
import numpy as np

from gorila import validate
from gorila.agents.dqn.bundle import Bundle
from gorila.bench.report import bench_dir, write_bench_json
from gorila.cliargs import command_parser
from gorila.config import RunConfig
from gorila.core import Worker, WorkerFactory, WorkerGroup
from gorila.driver.plan import Plan
from gorila.envs import make_env
from gorila.params import ParameterServer
from gorila.params.owned import PublishingWorker
from gorila.runtime import RUNTIMES, make_runtime

if TYPE_CHECKING:
    from gorila.agents.dqn.config import DQNConfig

INFERENCE_MODES = ("local", "central")
L = TypeVar("L")


class SamplingWorker:
    """The actor half of a real :class:`~gorila.agents.dqn.bundle.Bundle` (``Bundle.act``: ε-greedy
    steps of its envs, every transition added to its replay; the greedy actions from its own network
    copy, or from the inference server) and, in the same process, the limit's env half: copies of
    the same envs stepped with random actions in a plain loop."""

    def __init__(self, worker_id: int, server: ParameterServer, *, bundle: WorkerFactory, env_id: str,
                 num_envs: int, seed: int, network_fn: Callable[[], Any] | None = None, batch: int = 1):
        self.bundle = measured_learner(bundle(worker_id, server), Bundle)
        seed += 1000 * worker_id
        self.bare_envs = [make_env(env_id, seed=seed + 500 + i, training=True) for i in range(num_envs)]
        self.rng = np.random.default_rng(seed)
        self.network_fn, self.batch = network_fn, batch
        self.bare_policy: Callable[[np.ndarray], np.ndarray] | None = None

    def step(self) -> None:
        self.bundle.act(1)

    def report(self) -> dict[str, Any]:
        return {"env_steps": self.bundle.actor.tally.env_steps}

    def pipeline_rate(self, seconds: float) -> float:
        """Transitions per second (an env's reset-only step makes none and is not counted)."""
        start, t0 = self.bundle.actor.tally.env_steps, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            self.bundle.act(1)
        return (self.bundle.actor.tally.env_steps - start) / (time.perf_counter() - t0)

    def limit_rate(self, seconds: float) -> float:
        """``env.step`` calls per second; an episode's end resets that env within the same step."""
        space = self.bare_envs[0].action_space
        if not isinstance(space, gym.spaces.Discrete):
            raise TypeError(f"the sampling benchmark's actors take discrete actions, not {space}")
        n_actions = int(space.n)
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            # numpy integers, as the vectorised envs pass them (Discrete.contains checks them faster than ints)
            for env, action in zip(self.bare_envs, self.rng.integers(n_actions, size=len(self.bare_envs))):
                _, _, terminated, truncated, _ = env.step(action)
                if terminated or truncated:
                    env.reset()
            steps += len(self.bare_envs)
        return steps / (time.perf_counter() - t0)

    def infer_rate(self, seconds: float) -> float:
        """The limit's network half: observations per second through the same network alone
        (greedy actions for batches of ``batch`` observations), in this process."""
        if self.bare_policy is None:
            from gorila.inference.policies import GreedyQPolicy

            if self.network_fn is None:
                raise ValueError("infer_rate runs the network of the worker's network_fn: none was given")
            self.bare_policy = GreedyQPolicy(self.network_fn)
            space = self.bare_envs[0].observation_space
            self.bare_obs = np.stack([space.sample() for _ in range(self.batch)])
        done, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            self.bare_policy(self.bare_obs)
            done += self.batch
        return done / (time.perf_counter() - t0)

    def close(self) -> None:
        self.bundle.close()
        for env in self.bare_envs:
            env.close()


def bundle_factory(plan: Plan, services: dict | None = None) -> WorkerFactory:
    """The bundle factory of a bundled-mode DQN plan: what ``gorila train`` would run, given the
    endpoints of the plan's services (an inference server's, for central inference)."""
    (bundles,) = plan.groups(services or {})
    return bundles.factory


@contextmanager
def placed_workers(runtime_name: str, address: str | None, plan: Plan, factory: WorkerFactory | None, count: int,
                   name: str, factory_for: Callable[[dict], WorkerFactory] | None = None) -> Iterator[WorkerGroup]:
    """``count`` workers, ``plan``'s parameter server and services, placed by the runtime
    ``runtime_name``; the workers are built by ``factory``, or by ``factory_for(endpoints)`` given
    the services' endpoints by name. Workers are closed and the runtime shut down on exit."""
    runtime = make_runtime(runtime_name, address=address)
    try:
        runtime.plan(count + plan.spec.num_shards + sum(s.count for s in plan.services))
        shards = runtime.start_shards(plan.spec, plan.initial_params())
        services = {s.name: runtime.start_services(s.bound(shards.server), s.count, name=s.name)
                    for s in plan.services}
        if factory is None:
            if factory_for is None:
                raise ValueError("placed_workers builds its workers by factory or by factory_for: neither was given")
            factory = factory_for({n: g.endpoints() for n, g in services.items()})
        group = runtime.start_workers(factory, count, shards.server, name=name)
        yield group
        group.call("close")  # in-process workers outlive the runtime otherwise
    finally:
        runtime.shutdown()


def bench_run_config(runtime: str, address: str | None, seed: int, algo: str = "dqn",
                     server: str = "process") -> RunConfig:
    """The run settings a benchmark's plan is built with: asynchronous, one shard."""
    return RunConfig(algo=algo, mode="async", runtime=runtime, address=address, seed=seed, server=server)


def learner_table(names: list[str], address: str | None, build: Callable[[str], tuple[Plan, WorkerFactory]],
                  seconds: float, rounds: int, unit: str, **columns: Any) -> list[dict[str, Any]]:
    """``gorila bench learner``'s table: one learner worker placed on each runtime of ``names``, its
    pipeline rate beside its limit (:func:`measure_interleaved`), printed a row each and returned as
    bench.json rows (``{unit}_per_s``, ``limit_{unit}_per_s``, ``ratio``, ``columns`` and, from the
    worker's report at the end, ``updates``, the updates its parameters took, and ``publications``,
    how often a learner that owns them sent them to the store: 0 where it pushed to the server).
    ``build(runtime)`` gives the plan and the worker factory for a runtime, its plan built with that
    runtime's run settings, so that a learner that owns its parameters publishes as a run there does
    (after each of its steps on the local runtime, at most every 0.1 s on Ray)."""
    print(f"{'runtime':>8} {f'pipeline {unit}/s':>19} {f'limit {unit}/s':>16} {'ratio':>6} {'publications':>12}")
    rows = []
    for name in names:
        plan, factory = build(name)
        with placed_workers(name, address, plan, factory, 1, "learner") as group:
            pipeline, limit = measure_interleaved(group, seconds, rounds)
            (report,) = group.call("report")
        publications = report.get("publications", 0)
        print(f"{name:>8} {pipeline:>19,.1f} {limit:>16,.1f} {pipeline / limit:>6.2f} {publications:>12,}")
        rows.append({"runtime": name, **columns, f"{unit}_per_s": pipeline, f"limit_{unit}_per_s": limit,
                     "ratio": pipeline / limit, "updates": report["updates_pushed"], "publications": publications})
    return rows


def measured_learner(worker: Worker, kind: type[L]) -> L:
    """The learner a benchmark times in a plan's learner worker: ``worker`` itself or, under
    ``--server learner``, the learner its :class:`~gorila.params.owned.PublishingWorker` wraps
    (whose pushes are applied and published in its process); checked to be a ``kind``::

        bundle = measured_learner(factory(worker_id, server), Bundle)
    """
    learner = worker.learner if isinstance(worker, PublishingWorker) else worker
    if not isinstance(learner, kind):
        raise TypeError(f"the plan's learner worker is a {type(learner).__name__}, not a {kind.__name__}")
    return learner


def measure_interleaved(group: WorkerGroup, seconds: float, rounds: int,
                        limits: tuple[str, ...] = ("limit_rate",)) -> tuple[float, ...]:
    """Median over ``rounds`` of the group's summed ``pipeline_rate`` and of each of its summed
    ``limits`` (``limit_rate``; with ``infer_rate``, the network's half of the limit), taken in
    alternation so that load from elsewhere on the machine hits them alike."""
    round_s = seconds / rounds
    for method in ("pipeline_rate", *limits):  # warm-up: first calls pay for page faults and caches
        group.call(method, min(0.5, round_s))
    figures: dict[str, list[float]] = {method: [] for method in ("pipeline_rate", *limits)}
    for _ in range(rounds):
        for method in (*limits, "pipeline_rate"):
            figures[method].append(sum(group.call(method, round_s)))
    return tuple(float(np.median(values)) for values in figures.values())


def add_common_flags(parser: argparse.ArgumentParser, seconds: float) -> None:
    parser.add_argument("--seconds", type=float, default=seconds,
                        help="measuring time of each figure, per runtime, split into --rounds alternating rounds")
    parser.add_argument("--rounds", type=int, default=20,
                        help="alternating rounds; short ones keep load from elsewhere from hitting one figure only")
    parser.add_argument("--runtime", default="both", choices=[*RUNTIMES, "both"], help="where the workers run")
    parser.add_argument("--address", default=None, help="Ray cluster to join (default: embedded)")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for bench.json (default: bench-out/<bench>-<time>)")


def check_common_flags(args: argparse.Namespace) -> list[str]:
    """Refuse bad measuring flags before anything starts; returns the runtimes to measure on."""
    validate.number("seconds", args.seconds, low=0.0, low_open=True)
    validate.integer("rounds", args.rounds, low=1)
    return list(RUNTIMES) if args.runtime == "both" else [args.runtime]


def combined_limit(env_rate: float, infer_rate: float) -> float:
    """Steps/s when every step needs an env step and a forward pass on the same cores, each at its
    bare rate: ``1 / (1/env_rate + 1/infer_rate)``."""
    return 1.0 / (1.0 / env_rate + 1.0 / infer_rate)


def main(argv: list[str]) -> int:
    from gorila.agents.dqn.builder import make_plan
    from gorila.agents.dqn.config import DQNConfig
    from gorila.agents.rl_config import RLConfig

    parser = command_parser("gorila bench sampling", __doc__)
    parser.add_argument("--env", default="CartPole-v1", help="Gymnasium id (ALE/Pong-v5: the Nature CNN)")
    parser.add_argument("--inference", default="both", choices=[*INFERENCE_MODES, "both"],
                        help="who runs the network: each actor (local), the inference server (central), or both "
                             "in turn")
    parser.add_argument("--actors", type=int, default=2, help="actor workers under the Ray runtime")
    parser.add_argument("--envs-per-actor", type=int, default=8,
                        help="envs each actor steps (central: two groups of half of them, alternating)")
    parser.add_argument("--inference-batch", type=int, default=None,
                        help="central: observations that close a batch (default: half of all envs)")
    parser.add_argument("--inference-wait-ms", type=float, default=2.0,
                        help="central: ... or how long the oldest may wait")
    add_common_flags(parser, seconds=5.0)
    parser.set_defaults(runtime="ray")
    args = parser.parse_args(argv)
    names = check_common_flags(args)
    validate.integer("actors", args.actors, low=1)
    validate.integer("envs_per_actor", args.envs_per_actor, low=1)
    modes = list(INFERENCE_MODES) if args.inference == "both" else [args.inference]
    out = bench_dir(args.out, "sampling")
    rows = []
    header = False
    for name in names:
        count = args.actors if name == "ray" else 1
        # Gymnasium envs on both sides: the limit steps the very env objects make_env builds.
        cfg = DQNConfig(envs_per_actor=args.envs_per_actor, actors=count, replay_capacity=10_000,
                        learning_starts=1_000)
        for mode in modes:
            rl = RLConfig(env=args.env, env_backend="gymnasium", inference=mode, inference_batch=args.inference_batch,
                          inference_wait_ms=args.inference_wait_ms)
            plan = make_plan(bench_run_config("local", None, args.seed), cfg, rl)
            # The limit's network runs the batches the pipeline's network runs: an actor's own envs
            # with local inference, the server's batches with central inference.
            server_batch = rl.batching_rule(count * cfg.envs_per_actor).max_batch
            batch = cfg.envs_per_actor if mode == "local" else server_batch
            if not header:
                _describe(args, cfg, server_batch)
                header = True
            def factory_for(endpoints: dict, plan: Plan = plan, batch: int = batch,
                            num_envs: int = cfg.envs_per_actor) -> WorkerFactory:
                return functools.partial(SamplingWorker, bundle=bundle_factory(plan, endpoints), env_id=args.env,
                                         num_envs=num_envs, seed=args.seed, network_fn=plan.network_fn, batch=batch)

            with placed_workers(name, args.address, plan, None, count, "actor", factory_for) as group:
                pipeline, env_rate, infer_rate = measure_interleaved(group, args.seconds, args.rounds,
                                                                     ("limit_rate", "infer_rate"))
            limit = combined_limit(env_rate, infer_rate)
            print(f"{name:>8} {mode:>9} {count:>6} {pipeline:>17,.0f} {env_rate:>14,.0f} {infer_rate:>14,.0f} "
                  f"{limit:>14,.0f} {pipeline / limit:>6.2f}")
            rows.append({"runtime": name, "inference": mode, "actors": count, "envs_per_actor": cfg.envs_per_actor,
                         "batch": batch, "steps_per_s": pipeline, "env_steps_per_s": env_rate,
                         "inference_obs_per_s": infer_rate, "limit_steps_per_s": limit, "ratio": pipeline / limit})
    headline: dict[str, Any] = ({k: rows[0][k] for k in ("steps_per_s", "limit_steps_per_s", "ratio")}
                                if len(rows) == 1 else {})
    write_bench_json(out, "sampling", vars(args), rows, **headline)
    return 0


def _describe(args: argparse.Namespace, cfg: DQNConfig, batch: int) -> None:
    k = cfg.envs_per_actor
    print(f"gorila bench sampling: {args.env}, {k} envs per actor, medians of {args.rounds} alternating rounds, "
          f"{args.seconds:g} s per figure")
    print(f"  pipeline: Bundle.act, ε-greedy (ε = {cfg.eps_start:g}, the schedule's start) on greedy actions from "
          f"each actor's network (local, one forward pass per step of its {k} envs) or from the inference server "
          f"(central: two groups of envs per actor, batches of up to {batch} observations); each transition added "
          "to its replay")
    print(f"  limit:    1 / (1/env + 1/infer): env = {k} copies of the same env per actor stepped with random "
          f"actions in a plain loop, infer = the same network alone on the pipeline's batches ({k} local, "
          f"{batch} central); both in the same processes, side by side")
    print("  counted:  env steps that yield a transition (the pipeline's reset-only steps are not counted)")
    print(f"{'runtime':>8} {'inference':>9} {'actors':>6} {'pipeline steps/s':>17} {'env steps/s':>14} "
          f"{'infer obs/s':>14} {'limit steps/s':>14} {'ratio':>6}")
