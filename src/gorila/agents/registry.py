"""Which algorithms ``gorila train --algo`` knows: each folder of :mod:`gorila.agents` hands the
registry one :class:`~gorila.agents.agent.Agent`, imported here by name.

An agent's config classes come with it; its builder module (torch) only once a run asks for a plan,
so that, say, ``--algo lstsq`` or ``gorila --help`` never imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from gorila.agents.a3c import A3C
from gorila.agents.agent import Agent
from gorila.agents.apex import APEX
from gorila.agents.dqn import DQN
from gorila.agents.impala import IMPALA
from gorila.agents.lstsq import LSTSQ
from gorila.agents.ppo import PPO
from gorila.agents.rl_config import RLConfig
from gorila.config import LEARNER_OWNED, default_server
from gorila.errors import ConfigError

if TYPE_CHECKING:  # the plan's module belongs to the driver: a run loads it when it builds one
    from gorila.driver.plan import Plan


class MainConfig(Protocol):
    """An algorithm's first config class, as :meth:`Algorithm.flag_defaults` reads it."""

    optimizer: ClassVar[str]


class MainRLConfig(MainConfig, Protocol):
    """An RL algorithm's first config class: it also names its evaluation's ε."""

    EVAL_EPSILON: ClassVar[float]


@dataclass(frozen=True)
class Algorithm:
    """An algorithm as the CLI and the Python API see it: its :class:`~gorila.agents.agent.Agent` and
    what follows from it::

        algo = ALGORITHMS["a3c"]
        configs = [cls() for cls in algo.config_classes()]       # A3CConfig(), RLConfig()
        plan = algo.plan_fn()(run_config, *configs)              # then gorila.driver.loop.run
    """

    agent: Agent

    @property
    def name(self) -> str:
        return self.agent.name

    @property
    def is_rl(self) -> bool:
        return RLConfig in self.agent.config_classes

    def config_classes(self) -> list[type]:
        return list(self.agent.config_classes)

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
        if self.agent.check is not None:
            self.agent.check(*configs)

    def plan_fn(self) -> Callable[..., Plan]:
        """``(run, *configs) -> Plan``: the builder's ``make_plan``."""
        return self.agent.builder().make_plan

    def policy_fn(self) -> Callable[..., tuple[Any, Any]]:
        """``(run, *configs) -> (network_fn, policy_fn)``: what ``gorila eval`` plays."""
        if not self.agent.plays:
            raise ConfigError("algo", f"{self.name} has no policy to play")
        return self.agent.evaluation_policy()

    def label(self, configs: list) -> str:
        """What a run directory is named after besides the algorithm, before its plan is built (the
        builder's ``Plan.label``): the env id, or lstsq's synthetic data."""
        return configs[-1].env if self.is_rl else "synthetic"


ALGORITHMS = {agent.name: Algorithm(agent) for agent in (LSTSQ, A3C, DQN, APEX, IMPALA, PPO)}
