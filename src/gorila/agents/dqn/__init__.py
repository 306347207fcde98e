"""Gorila DQN: bundles or actors + global replay + learners, on the parameter server."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gorila.agents.dqn.config import DQNConfig
from gorila.agents.rl_config import RLConfig
from gorila.errors import ConfigError

if TYPE_CHECKING:  # annotations only: importing the registry stays cheap (``gorila --help``)
    from gorila.config import RunConfig
    from gorila.driver.plan import Plan
    from gorila.nets.q import QEvaluationPolicy


class DQNAgent:
    """Gorila DQN as the registry holds it (:class:`~gorila.agents.registry.Builder`): its configs, and
    its builder, :mod:`gorila.agents.dqn.builder` (torch), imported only once a run asks for a plan
    or (``gorila eval``) a policy::

        plan = DQN.make_plan(run, DQNConfig(), RLConfig())
    """

    name = "dqn"
    config_classes = (DQNConfig, RLConfig)

    def make_plan(self, run: RunConfig, cfg: DQNConfig, rl: RLConfig) -> Plan:
        from gorila.agents.dqn.builder import make_plan

        return make_plan(run, cfg, rl)

    def evaluation_policy(self, run: RunConfig, cfg: DQNConfig, rl: RLConfig) -> QEvaluationPolicy:
        from gorila.agents.dqn.builder import evaluation_policy

        return evaluation_policy(run, cfg, rl)

    def check(self, cfg: DQNConfig, rl: RLConfig) -> None:
        """What DQN's settings and the RL config's must agree on: bundles read their parameters with
        their own client, so a parameter cache serves global replay's actors only."""
        if cfg.replay == "local" and rl.param_cache != "none":
            raise ConfigError("param_cache", "serves the actors of --replay global; bundles read the server with "
                                             "their learner's own client")


DQN = DQNAgent()
