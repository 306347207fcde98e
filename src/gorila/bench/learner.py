"""``gorila bench learner``: DQN learner updates/s through the parameter server vs a bare PyTorch loop."""

from __future__ import annotations

import argparse
import copy
import functools
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch
from torch import nn

from gorila import validate
from gorila.algos.dqn.agent import QLearner, build_q_network
from gorila.algos.dqn.config import DQNConfig
from gorila.bench.sampling import add_common_flags, check_common_flags, measure_interleaved, placed_workers
from gorila.envs.vector import make_env_runner
from gorila.losses.dqn import dqn_loss
from gorila.params import ParameterClient, ShardEndpoint, ShardLayout
from gorila.replay import make_storage
from gorila.replay.prefetch import Prefetcher

# Distinct minibatches the limit cycles through: enough that it does not train on one batch only.
LIMIT_BATCHES = 16


def filled_replay(env_id: str, cfg: DQNConfig, transitions: int, seed: int):
    """A replay of ``transitions`` transitions of random play (its capacity: older ones are overwritten)."""
    with make_env_runner(env_id, cfg.envs_per_actor, seed=seed, training=True, backend=cfg.env_backend) as runner:
        space = runner.observation_space
        replay = make_storage(transitions, space.shape, space.dtype, num_streams=cfg.envs_per_actor)
        rng = np.random.default_rng(seed)
        added = 0
        while added < transitions:
            t = runner.step(rng.integers(runner.action_space.n, size=runner.num_envs))
            replay.add_batch(t.obs, t.action, t.reward, t.next_obs, t.terminated, streams=t.env_index)
            added += len(t)
    return replay


class LearnerWorker:
    """A learner as it runs (minibatches sampled from a filled replay on the prefetch thread, QLearner's
    double-Q gradient on the client's parameters, pushed to the server without waiting for the reply,
    which brings fresh parameters by the next push) and, in the same process, the limit: the same
    network and loss trained by a local AdaGrad step on minibatches already in memory."""

    def __init__(self, worker_id: int, endpoints: list[ShardEndpoint], *, env_id: str, cfg: DQNConfig,
                 seed: int, network_fn: Callable[[], nn.Module], fill: int):
        torch.set_num_threads(1)
        self.cfg = cfg
        self.replay = filled_replay(env_id, cfg, fill, seed + worker_id)
        rng = np.random.default_rng(seed + worker_id)
        self.batches = [self.replay.sample(cfg.batch_size, rng) for _ in range(LIMIT_BATCHES)]
        self.net = network_fn()
        self.target = copy.deepcopy(self.net)
        self.optimizer = torch.optim.Adagrad(self.net.parameters(), lr=cfg.lr)
        self.learner = QLearner(network_fn, cfg)
        self.client = ParameterClient(endpoints, ShardLayout(self.learner.flat.size, len(endpoints)),
                                      worker_id=worker_id)
        # Nothing adds to this replay, so the prefetch thread may sample it without a lock.
        self.prefetch = Prefetcher(lambda: self.replay.sample(cfg.batch_size, rng), depth=2)
        self.updates = 0

    def step(self) -> None:
        batch = self.prefetch.next(timeout_s=60.0)
        grad, _ = self.learner.gradient(self.client.params(), self.client.version, batch)
        if grad is not None:
            self.client.push(grad, wait=False)
            self.updates += 1

    def report(self) -> dict:
        return {"updates_pushed": self.updates, "version": self.client.version}

    def pipeline_rate(self, seconds: float) -> float:
        """Pushed updates per second, the last push's reply included."""
        start, t0 = self.updates, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            self.step()
        self.client.complete()
        return (self.updates - start) / (time.perf_counter() - t0)

    def limit_rate(self, seconds: float) -> float:
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            self.optimizer.zero_grad()
            loss, _ = dqn_loss(self.net, self.target, self.batches[steps % LIMIT_BATCHES], self.cfg.gamma,
                               self.cfg.loss)
            loss.backward()
            if self.cfg.max_grad_norm is not None:
                nn.utils.clip_grad_norm_(self.net.parameters(), self.cfg.max_grad_norm)
            self.optimizer.step()
            steps += 1
        return steps / (time.perf_counter() - t0)

    def close(self) -> None:
        self.prefetch.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="gorila bench learner", description=__doc__)
    parser.add_argument("--env", default="CartPole-v1", help="Gymnasium id (ALE/Pong-v5: the Nature CNN)")
    parser.add_argument("--batch-size", type=int, default=DQNConfig.batch_size, help="minibatch size")
    parser.add_argument("--fill", type=int, default=5_000, help="transitions of random play in the replay")
    add_common_flags(parser, seconds=10.0)
    args = parser.parse_args(argv)
    names = check_common_flags(args)
    validate.integer("fill", args.fill, low=1)
    cfg = replace(DQNConfig(), batch_size=args.batch_size, actors=1)
    network_fn = functools.partial(build_q_network, args.env, cfg.hidden, args.seed)
    size = sum(p.numel() for p in network_fn().parameters())
    factory = functools.partial(LearnerWorker, env_id=args.env, cfg=cfg, seed=args.seed, network_fn=network_fn,
                                fill=args.fill)
    print(f"gorila bench learner: {args.env}, {size:,} parameters ({size * 4 / 1e6:.2f} MB), batch "
          f"{cfg.batch_size}, 1 torch thread per process, medians of {args.rounds} alternating rounds, "
          f"{args.seconds:g} s per figure")
    print(f"  pipeline: minibatches prefetched from a replay of {args.fill:,} transitions -> QLearner double-Q "
          f"gradient ({cfg.loss}, clip {cfg.max_grad_norm}) -> push to 1 parameter-server shard (adagrad, "
          f"asynchronous; the reply, with the new parameters, is collected at the next push)")
    print("  limit:    the same network, batch size and loss; zero_grad, backward, clip, torch Adagrad step in "
          "the learner's process, minibatches already in memory")
    print(f"{'runtime':>8} {'pipeline updates/s':>19} {'limit updates/s':>16} {'ratio':>6}")
    for name in names:
        with placed_workers(name, args.address, network_fn, cfg.lr, factory, 1, "learner") as group:
            pipeline, limit = measure_interleaved(group, args.seconds, args.rounds)
        print(f"{name:>8} {pipeline:>19,.1f} {limit:>16,.1f} {pipeline / limit:>6.2f}")
    return 0
