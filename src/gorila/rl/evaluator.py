"""The evaluation worker: the latest server parameters, greedy play with no-op starts."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from gorila.envs.evaluation import evaluate
from gorila.nets import FlatParams
from gorila.params import ParameterClient, ShardEndpoint, ShardLayout


class Evaluator:
    """Each ``step()`` pulls the newest parameters and plays ``episodes`` episodes with them::

        ev = Evaluator(0, endpoints, env_id="CartPole-v1", network_fn=..., policy_fn=greedy_policy,
                       episodes=10, epsilon=0.05, seed=0)
        ev.step(); ev.report()   # {"eval_return": 500.0, "eval_version": 812, ...}

    ``network_fn()`` builds the architecture; ``policy_fn(net)`` turns it into a function from a
    batch of observations to greedy actions.
    """

    def __init__(self, worker_id: int, endpoints: list[ShardEndpoint], *, env_id: str,
                 network_fn: Callable[[], nn.Module], policy_fn: Callable[[nn.Module], Callable],
                 episodes: int, epsilon: float, seed: int, noop_max: int = 30, timeout_s: float = 120.0):
        torch.set_num_threads(1)
        self.env_id, self.episodes, self.epsilon, self.noop_max = env_id, episodes, epsilon, noop_max
        self.seed = seed + 10_000
        self.net = network_fn().eval()
        self.flat = FlatParams(self.net)
        self.policy = policy_fn(self.net)
        self.client = ParameterClient(endpoints, ShardLayout(self.flat.size, len(endpoints)), timeout_s=timeout_s)
        self.evaluations = 0
        self.last: dict[str, Any] = {}

    def step(self) -> None:
        self.flat.set(self.client.pull())
        started = time.perf_counter()
        with torch.no_grad():
            returns = evaluate(self.policy, self.env_id, self.episodes, self.epsilon,
                               seed=self.seed + self.evaluations, noop_max=self.noop_max)
        self.evaluations += 1
        self.last = {"eval_return": float(np.mean(returns)), "eval_min": float(np.min(returns)),
                     "eval_returns": [float(r) for r in returns], "eval_version": self.client.version,
                     "eval_seconds": time.perf_counter() - started}

    def report(self) -> dict[str, Any]:
        return dict(self.last)
