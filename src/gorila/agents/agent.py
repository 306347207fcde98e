"""An algorithm as its folder of :mod:`gorila.agents` hands it to the registry: its name, its config
classes and its builder module, which imports torch and so is imported only once a run asks for a
plan or a policy (``--algo lstsq`` and ``gorila --help`` never load torch)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the plan's module belongs to the driver: a run loads it when it builds one
    from gorila.driver.plan import Plan


class PlanBuilder(Protocol):
    """What an algorithm's ``builder.py`` offers: ``make_plan(run, *configs)``, the configs in the
    order of the algorithm's ``config_classes``; an RL algorithm's also ``evaluation_policy(run,
    *configs)``, the ``(network_fn, policy_fn)`` that ``gorila eval`` plays."""

    @property
    def make_plan(self) -> Callable[..., Plan]: ...


@dataclass(frozen=True)
class Agent:
    """An algorithm for the registry (``agents/<name>/__init__.py`` makes one)::

        def _builder() -> PlanBuilder:
            from gorila.agents.impala import builder   # torch: only when asked for

            return builder

        IMPALA = Agent("impala", (ImpalaConfig, RLConfig), _builder)
        IMPALA.builder().make_plan(run, ImpalaConfig(), RLConfig())

    ``check(*configs)`` raises a :class:`~gorila.errors.ConfigError` where configs valid alone
    disagree (None where they cannot); ``plays``: whether the builder has an ``evaluation_policy``
    (lstsq's data are synthetic: no policy to play).
    """

    name: str
    config_classes: tuple[type, ...]
    builder: Callable[[], PlanBuilder]
    check: Callable[..., None] | None = None
    plays: bool = True

    def evaluation_policy(self) -> Callable[..., tuple[Any, Any]]:
        """The builder's ``evaluation_policy`` (the builder imported); only where ``plays``."""
        policy: Callable[..., tuple[Any, Any]] = getattr(self.builder(), "evaluation_policy")
        return policy
