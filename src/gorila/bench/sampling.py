"""``gorila bench sampling``: the DQN actor pipeline's env steps/s vs the same envs stepped bare."""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import torch
from torch import nn

from gorila import validate
from gorila.algos.dqn.agent import QActor, build_q_network
from gorila.algos.dqn.config import DQNConfig
from gorila.envs import make_env
from gorila.nets import FlatParams
from gorila.params import ParameterClient, ServerSpec, ShardEndpoint, ShardLayout, UpdateRule
from gorila.replay import make_storage
from gorila.runtime import RUNTIMES, WorkerFactory, WorkerGroup, make_runtime


class SamplingWorker:
    """The actor half of a bundle as it runs (ε-greedy steps of ``cfg.envs_per_actor`` envs with one
    batched forward pass, every transition added to its own replay, parameters reloaded every
    ``cfg.actor_refresh`` steps) and, in the same process, the limit: copies of the same envs
    stepped with random actions in a plain loop."""

    def __init__(self, worker_id: int, endpoints: list[ShardEndpoint], *, env_id: str, cfg: DQNConfig,
                 seed: int, network_fn: Callable[[], nn.Module]):
        torch.set_num_threads(1)
        self.worker_id, self.cfg = worker_id, cfg
        seed += 1000 * worker_id
        self.actor = QActor(env_id, cfg, seed, network_fn)
        space = self.actor.runner.observation_space
        self.replay = make_storage(cfg.replay_capacity, space.shape, space.dtype, num_streams=cfg.envs_per_actor)
        self.client = ParameterClient(endpoints, ShardLayout(self.actor.flat.size, len(endpoints)),
                                      worker_id=worker_id)
        self.bare_envs = [make_env(env_id, seed=seed + 500 + i, training=True) for i in range(cfg.envs_per_actor)]
        self.rng = np.random.default_rng(seed)
        self.steps = 0

    def step(self) -> None:
        if self.steps % self.cfg.actor_refresh == 0:
            self.actor.load(self.client.params())
        t = self.actor.act(self.cfg.epsilon(self.worker_id, self.client.version))
        self.replay.add_batch(t.obs, t.action, t.reward, t.next_obs, t.terminated, streams=t.env_index)
        self.steps += 1

    def report(self) -> dict:
        return {"env_steps": self.actor.env_steps}

    def pipeline_rate(self, seconds: float) -> float:
        """Transitions per second (an env's reset-only step makes none and is not counted)."""
        start, t0 = self.actor.env_steps, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            self.step()
        return (self.actor.env_steps - start) / (time.perf_counter() - t0)

    def limit_rate(self, seconds: float) -> float:
        """``env.step`` calls per second; an episode's end resets that env within the same step."""
        n_actions = int(self.bare_envs[0].action_space.n)
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            # numpy integers, as the vectorised envs pass them (Discrete.contains checks them faster than ints)
            for env, action in zip(self.bare_envs, self.rng.integers(n_actions, size=len(self.bare_envs))):
                _, _, terminated, truncated, _ = env.step(action)
                if terminated or truncated:
                    env.reset()
            steps += len(self.bare_envs)
        return steps / (time.perf_counter() - t0)

    def close(self) -> None:
        self.actor.close()
        for env in self.bare_envs:
            env.close()


@contextmanager
def placed_workers(runtime_name: str, address: str | None, network_fn: Callable[[], nn.Module], lr: float,
                   factory: WorkerFactory, count: int, name: str) -> Iterator[WorkerGroup]:
    """``count`` workers and one asynchronous AdaGrad parameter-server shard holding ``network_fn()``'s
    parameters, placed by the runtime ``runtime_name``; the workers are closed and the runtime shut down on exit."""
    runtime = make_runtime(runtime_name, address=address)
    try:
        if runtime_name == "ray":
            runtime.plan(count + 1)
        spec = ServerSpec(rule=UpdateRule.asynchronous(), num_shards=1, optimizer="adagrad", lr=lr)
        shards = runtime.start_shards(spec, FlatParams(network_fn()).get())
        group = runtime.start_workers(factory, count, shards.endpoints, name=name)
        yield group
        group.call("close")  # in-process workers outlive the runtime otherwise
    finally:
        runtime.shutdown()


def measure_interleaved(group: WorkerGroup, seconds: float, rounds: int) -> tuple[float, float]:
    """Median over ``rounds`` of the group's summed ``pipeline_rate`` and of its summed ``limit_rate``,
    taken in alternation so that load from elsewhere on the machine hits both alike."""
    round_s = seconds / rounds
    group.call("pipeline_rate", min(0.5, round_s))  # warm-up: first calls pay for page faults and caches
    group.call("limit_rate", min(0.5, round_s))
    pipeline, limit = [], []
    for _ in range(rounds):
        limit.append(sum(group.call("limit_rate", round_s)))
        pipeline.append(sum(group.call("pipeline_rate", round_s)))
    return float(np.median(pipeline)), float(np.median(limit))


def add_common_flags(parser: argparse.ArgumentParser, seconds: float) -> None:
    parser.add_argument("--seconds", type=float, default=seconds,
                        help="measuring time of each figure, per runtime, split into --rounds alternating rounds")
    parser.add_argument("--rounds", type=int, default=20,
                        help="alternating rounds; short ones keep load from elsewhere from hitting one figure only")
    parser.add_argument("--runtime", default="both", choices=[*RUNTIMES, "both"], help="where the workers run")
    parser.add_argument("--address", default=None, help="Ray cluster to join (default: embedded)")
    parser.add_argument("--seed", type=int, default=0)


def check_common_flags(args: argparse.Namespace) -> list[str]:
    """Refuse bad measuring flags before anything starts; returns the runtimes to measure on."""
    validate.number("seconds", args.seconds, low=0.0, low_open=True)
    validate.integer("rounds", args.rounds, low=1)
    return list(RUNTIMES) if args.runtime == "both" else [args.runtime]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="gorila bench sampling", description=__doc__)
    parser.add_argument("--env", default="CartPole-v1", help="Gymnasium id")
    parser.add_argument("--actors", type=int, default=2, help="actor workers under the Ray runtime")
    parser.add_argument("--envs-per-actor", type=int, default=128,
                        help="envs each actor steps together (one forward pass per step of all of them)")
    add_common_flags(parser, seconds=5.0)
    args = parser.parse_args(argv)
    names = check_common_flags(args)
    # Gymnasium envs on both sides: the limit steps the very env objects make_env builds.
    cfg = replace(DQNConfig(), envs_per_actor=args.envs_per_actor, actors=args.actors, env_backend="gymnasium")
    network_fn = functools.partial(build_q_network, args.env, cfg.hidden, args.seed)
    factory = functools.partial(SamplingWorker, env_id=args.env, cfg=cfg, seed=args.seed, network_fn=network_fn)
    k = cfg.envs_per_actor
    print(f"gorila bench sampling: {args.env}, {k} envs per actor, 1 torch thread per process, "
          f"medians of {args.rounds} alternating rounds, {args.seconds:g} s per figure")
    print(f"  pipeline: QActor ε-greedy (ε = {cfg.epsilon(0, 0):g}, the schedule's start) with one forward pass "
          f"per step of its {k} envs, each transition added to a replay, parameters reloaded every "
          f"{cfg.actor_refresh} steps")
    print(f"  limit:    {k} copies of the same env stepped with random actions in a plain loop, in the same "
          f"process(es)")
    print("  counted:  env steps that yield a transition (the pipeline's reset-only steps are not counted)")
    print(f"{'runtime':>8} {'actors':>6} {'pipeline steps/s':>17} {'limit steps/s':>14} {'ratio':>6}")
    for name in names:
        count = args.actors if name == "ray" else 1
        with placed_workers(name, args.address, network_fn, cfg.lr, factory, count, "actor") as group:
            pipeline, limit = measure_interleaved(group, args.seconds, args.rounds)
        print(f"{name:>8} {count:>6} {pipeline:>17,.0f} {limit:>14,.0f} {pipeline / limit:>6.2f}")
    return 0
