"""Ape-X: many actors with their own exploration, prioritized replay as a sharded service, n-step returns,
and a learner fed by prefetch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gorila.agents.apex.config import ApexConfig
from gorila.agents.rl_config import RLConfig

if TYPE_CHECKING:  # annotations only: importing the registry stays cheap (``gorila --help``)
    from gorila.config import RunConfig
    from gorila.driver.plan import Plan
    from gorila.nets.q import QEvaluationPolicy


class ApexAgent:
    """Ape-X as the registry holds it (:class:`~gorila.agents.registry.Builder`): its configs, and
    its builder, :mod:`gorila.agents.apex.builder` (torch), imported only once a run asks for a plan
    or (``gorila eval``) a policy::

        plan = APEX.make_plan(run, ApexConfig(), RLConfig())
    """

    name = "apex"
    config_classes = (ApexConfig, RLConfig)
    check = None  # no setting of Ape-X's rules out one of the RL config's

    def make_plan(self, run: RunConfig, cfg: ApexConfig, rl: RLConfig) -> Plan:
        from gorila.agents.apex.builder import make_plan

        return make_plan(run, cfg, rl)

    def evaluation_policy(self, run: RunConfig, cfg: ApexConfig, rl: RLConfig) -> QEvaluationPolicy:
        from gorila.agents.apex.builder import evaluation_policy

        return evaluation_policy(run, cfg, rl)


APEX = ApexAgent()
