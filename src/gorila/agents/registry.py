"""Which algorithms ``gorila train --algo`` knows: each has its config classes and a builder.

Imports are lazy so that, say, ``--algo lstsq`` never imports torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from gorila.config import LEARNER_OWNED, default_server

if TYPE_CHECKING:  # the builders' modules import torch: loaded only when a run asks for one
    from gorila.driver.plan import Plan

_RL = "gorila.agents.rl_config:RLConfig"


class MainConfig(Protocol):
    """An algorithm's first config class, as :meth:`Algorithm.flag_defaults` reads it."""

    optimizer: ClassVar[str]


class MainRLConfig(MainConfig, Protocol):
    """An RL algorithm's first config class: it also names its evaluation's ε."""

    EVAL_EPSILON: ClassVar[float]


@dataclass(frozen=True)
class Algorithm:
    """An algorithm as the CLI and the Python API see it::

        algo = ALGORITHMS["a3c"]
        configs = [cls() for cls in algo.config_classes()]       # A3CConfig(), RLConfig()
        plan = algo.plan_fn()(run_config, *configs)              # then gorila.driver.loop.run
    """

    name: str
    configs: tuple[str, ...]  # "module:Class" of each config, in make_plan's argument order after RunConfig
    builder: str  # the module with make_plan(run, *configs) and, for RL, evaluation_policy(run, *configs)
    checks: str | None = None  # "module:function" checking the configs together, before anything starts

    @property
    def is_rl(self) -> bool:
        return _RL in self.configs

    def config_classes(self) -> list[type]:
        return [_load(path) for path in self.configs]

    def flag_defaults(self) -> dict:
        """The run's settings whose default the algorithm decides, as its help shows them: the
        server's optimizer and (RL) the evaluation's ε, class attributes of its first config, and
        ``--server`` for its default settings on the default runtime."""
        classes = self.config_classes()
        main: type[MainConfig] = classes[0]
        defaults: dict[str, object] = {"optimizer": main.optimizer,
                                       "server": self.default_server([cls() for cls in classes], "ray")}
        if self.is_rl:
            rl_main: type[MainRLConfig] = classes[0]
            defaults["eval_epsilon"] = rl_main.EVAL_EPSILON
        return defaults

    def default_server(self, configs: list, runtime: str) -> str:
        """``--server`` for a run of ``configs`` on ``runtime`` that names none
        (:func:`gorila.config.default_server`, by how many learners the run has)."""
        if self.name not in LEARNER_OWNED:
            return "process"
        main = configs[0]
        # Gorila DQN's learners follow from its replay (one per bundle, or --learners with global replay)
        learners = main.num_learners if self.name == "dqn" else main.learners
        return default_server(self.name, learners, runtime)

    def check(self, configs: list) -> None:
        """Raise a :class:`~gorila.errors.ConfigError` where the configs, each valid alone,
        disagree (a setting of the RL config that the algorithm's own settings rule out)."""
        if self.is_rl:
            configs[-1].check_algorithm(self.name)
        if self.checks is not None:
            _load(self.checks)(*configs)

    def plan_fn(self) -> Callable[..., Plan]:
        """``(run, *configs) -> Plan``: the builder's ``make_plan``."""
        plan: Callable[..., Plan] = _load(f"{self.builder}:make_plan")
        return plan

    def policy_fn(self) -> Callable[..., tuple[Any, Any]]:
        """``(run, *configs) -> (network_fn, policy_fn)``: what ``gorila eval`` plays."""
        policy: Callable[..., tuple[Any, Any]] = _load(f"{self.builder}:evaluation_policy")
        return policy

    def label(self, configs: list) -> str:
        """What a run directory is named after besides the algorithm, before its plan is built (the
        builder's ``Plan.label``): the env id, or lstsq's synthetic data."""
        return configs[-1].env if self.is_rl else "synthetic"


def _load(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


ALGORITHMS = {
    "lstsq": Algorithm("lstsq", ("gorila.agents.lstsq.config:LstsqConfig",), "gorila.agents.lstsq.builder"),
    "a3c": Algorithm("a3c", ("gorila.agents.a3c.config:A3CConfig", _RL), "gorila.agents.a3c.builder"),
    "dqn": Algorithm("dqn", ("gorila.agents.dqn.config:DQNConfig", _RL), "gorila.agents.dqn.builder",
                     checks="gorila.agents.dqn.config:check_settings"),
    "apex": Algorithm("apex", ("gorila.agents.apex.config:ApexConfig", _RL), "gorila.agents.apex.builder"),
    "impala": Algorithm("impala", ("gorila.agents.impala.config:ImpalaConfig", _RL), "gorila.agents.impala.builder"),
    "ppo": Algorithm("ppo", ("gorila.agents.ppo.config:PPOConfig", _RL), "gorila.agents.ppo.builder"),
}
