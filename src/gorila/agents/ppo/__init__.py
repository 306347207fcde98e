"""PPO (``--mode sync``) and APPO (``--mode async``): segment actors, trajectory queues, and learners
running epochs of clipped-surrogate minibatches."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gorila.agents.ppo.config import PPOConfig
from gorila.agents.rl_config import RLConfig

if TYPE_CHECKING:  # annotations only: importing the registry stays cheap (``gorila --help``)
    from gorila.config import RunConfig
    from gorila.driver.plan import Plan
    from gorila.nets.actor_critic_env import EvaluationPolicy


class PPOAgent:
    """PPO as the registry holds it (:class:`~gorila.agents.registry.Builder`): its configs, and
    its builder, :mod:`gorila.agents.ppo.builder` (torch), imported only once a run asks for a plan
    or (``gorila eval``) a policy::

        plan = PPO.make_plan(run, PPOConfig(), RLConfig())
    """

    name = "ppo"
    config_classes = (PPOConfig, RLConfig)
    check = None  # no setting of PPO's rules out one of the RL config's

    def make_plan(self, run: RunConfig, cfg: PPOConfig, rl: RLConfig) -> Plan:
        from gorila.agents.ppo.builder import make_plan

        return make_plan(run, cfg, rl)

    def evaluation_policy(self, run: RunConfig, cfg: PPOConfig, rl: RLConfig) -> EvaluationPolicy:
        from gorila.agents.ppo.builder import evaluation_policy

        return evaluation_policy(run, cfg, rl)


PPO = PPOAgent()
