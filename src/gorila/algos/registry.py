"""Which algorithms ``gorila train --algo`` knows: each has a config class and a ``train`` function.

Imports are lazy so that, say, ``--algo lstsq`` never imports torch.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Algorithm:
    name: str
    configs: tuple[str, ...]  # "module:Class" of each config, in train()'s argument order
    train: str  # "module:function(run: RunConfig, *configs) -> summary dict"
    policy: str | None = None  # "module:function(run, cfg) -> (network_fn, policy_fn)" for gorila eval
    # Evaluation's exploration rate unless --eval-epsilon says otherwise: the DQN papers
    # evaluate with 0.05; a policy-gradient method is judged by its greedy policy.
    eval_epsilon: float = 0.05

    def config_classes(self) -> list[type]:
        return [_load(path) for path in self.configs]

    def train_fn(self):
        return _load(self.train)

    def policy_fn(self):
        return _load(self.policy)


def _load(path: str):
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


_TRAIN = "gorila.rl.config:TrainConfig"


ALGORITHMS = {
    "lstsq": Algorithm("lstsq", ("gorila.algos.lstsq.config:LstsqConfig",), "gorila.algos.lstsq.run:train"),
    "a3c": Algorithm("a3c", ("gorila.algos.a3c.config:A3CConfig", _TRAIN), "gorila.algos.a3c.run:train",
                     "gorila.algos.a3c.run:evaluation_policy", eval_epsilon=0.0),
    "dqn": Algorithm("dqn", ("gorila.algos.dqn.config:DQNConfig", _TRAIN), "gorila.algos.dqn.builder:train",
                     "gorila.algos.dqn.builder:evaluation_policy"),
}
