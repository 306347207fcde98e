"""IMPALA: actors emit segments into trajectory queues, learners push V-trace gradients to the parameter server."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gorila.agents.impala.config import ImpalaConfig
from gorila.agents.rl_config import RLConfig

if TYPE_CHECKING:  # annotations only: importing the registry stays cheap (``gorila --help``)
    from gorila.config import RunConfig
    from gorila.driver.plan import Plan
    from gorila.nets.actor_critic_env import EvaluationPolicy


class ImpalaAgent:
    """IMPALA as the registry holds it (:class:`~gorila.agents.registry.Builder`): its configs, and
    its builder, :mod:`gorila.agents.impala.builder` (torch), imported only once a run asks for a plan
    or (``gorila eval``) a policy::

        plan = IMPALA.make_plan(run, ImpalaConfig(), RLConfig())
    """

    name = "impala"
    config_classes = (ImpalaConfig, RLConfig)
    check = None  # no setting of IMPALA's rules out one of the RL config's

    def make_plan(self, run: RunConfig, cfg: ImpalaConfig, rl: RLConfig) -> Plan:
        from gorila.agents.impala.builder import make_plan

        return make_plan(run, cfg, rl)

    def evaluation_policy(self, run: RunConfig, cfg: ImpalaConfig, rl: RLConfig) -> EvaluationPolicy:
        from gorila.agents.impala.builder import evaluation_policy

        return evaluation_policy(run, cfg, rl)


IMPALA = ImpalaAgent()
