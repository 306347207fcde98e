"""A3C / A2C: workers that act and compute policy-gradient updates, on the parameter server."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gorila.agents.a3c.config import A3CConfig
from gorila.agents.rl_config import RLConfig

if TYPE_CHECKING:  # annotations only: importing the registry stays cheap (``gorila --help``)
    from gorila.config import RunConfig
    from gorila.driver.plan import Plan
    from gorila.nets.actor_critic_env import EvaluationPolicy


class A3CAgent:
    """A3C as the registry holds it (:class:`~gorila.agents.registry.Builder`): its configs, and
    its builder, :mod:`gorila.agents.a3c.builder` (torch), imported only once a run asks for a plan
    or (``gorila eval``) a policy::

        plan = A3C.make_plan(run, A3CConfig(), RLConfig())
    """

    name = "a3c"
    config_classes = (A3CConfig, RLConfig)
    check = None  # no setting of A3C's rules out one of the RL config's

    def make_plan(self, run: RunConfig, cfg: A3CConfig, rl: RLConfig) -> Plan:
        from gorila.agents.a3c.builder import make_plan

        return make_plan(run, cfg, rl)

    def evaluation_policy(self, run: RunConfig, cfg: A3CConfig, rl: RLConfig) -> EvaluationPolicy:
        from gorila.agents.a3c.builder import evaluation_policy

        return evaluation_policy(run, cfg, rl)


A3C = A3CAgent()
