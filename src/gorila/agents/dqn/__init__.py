"""Gorila DQN: bundles or actors + global replay + learners, on the parameter server."""

from __future__ import annotations

from gorila.agents.agent import Agent, PlanBuilder
from gorila.agents.dqn.config import DQNConfig
from gorila.agents.rl_config import RLConfig
from gorila.errors import ConfigError


def _builder() -> PlanBuilder:
    from gorila.agents.dqn import builder  # torch: imported once a run asks for a plan or a policy

    return builder


def _check(cfg: DQNConfig, rl: RLConfig) -> None:
    """What DQN's settings and the RL config's must agree on: bundles read their parameters with
    their own client, so a parameter cache serves global replay's actors only."""
    if cfg.replay == "local" and rl.param_cache != "none":
        raise ConfigError("param_cache", "serves the actors of --replay global; bundles read the server with "
                                         "their learner's own client")


DQN = Agent("dqn", (DQNConfig, RLConfig), _builder, check=_check)
