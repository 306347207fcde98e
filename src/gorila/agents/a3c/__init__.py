"""A3C / A2C: workers that act and compute policy-gradient updates, on the parameter server."""

from __future__ import annotations

from gorila.agents.a3c.config import A3CConfig
from gorila.agents.agent import Agent, PlanBuilder
from gorila.agents.rl_config import RLConfig


def _builder() -> PlanBuilder:
    from gorila.agents.a3c import builder  # torch: imported once a run asks for a plan or a policy

    return builder


A3C = Agent("a3c", (A3CConfig, RLConfig), _builder)
