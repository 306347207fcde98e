"""The update rule: which pushes a shard takes, and when it applies them.

For a push computed on version ``X`` arriving at a shard at version ``C`` the staleness is
``s = C - X``:

=======================================  ==========================================
``s <= count_within``                    **counted**: joins the aggregate, ``R += 1``
``count_within < s <= accept_within``    **accepted**: joins the aggregate, not counted
``s > accept_within``                    **rejected**: dropped; the pusher gets fresh params
=======================================  ==========================================

When ``R`` reaches ``aggregate`` the mean of everything joined since the last update is
applied and the version increases by one. With ``barrier`` a pusher waits until that
version exists (the runtime implements the wait).

The rule also says how a client pushes. Without ``pipelined`` every push waits for its reply,
which brings the server's parameters whenever the pusher is behind, so the next gradient is
computed on them (the semi-asynchronous write-up's client: "if it is behind, it blocks and waits
for the server to send it the new parameters"). With ``pipelined`` (the asynchronous rules) the
client computes its next gradient while the reply travels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gorila import validate
from gorila.errors import ConfigError

Outcome = Literal["counted", "accepted", "rejected"]
OUTCOMES: tuple[Outcome, ...] = ("counted", "accepted", "rejected")
#: The presets by the names ``--mode`` takes, each with the knobs it takes; read through
#: :meth:`UpdateRule.for_mode` (and ``for_mode_knobs``), the only place a mode name is read.
MODE_KNOBS: dict[str, tuple[str, ...]] = {"sync": (), "async": ("max_staleness",),
                                          "semi-async": ("aggregate", "count_within", "accept_within")}
MODES = tuple(MODE_KNOBS)
#: ``--semi-async-client``: the write-up's client, which waits for every reply (``blocks``), or one
#: that computes its next gradient while the reply travels and waits only once a reply said it fell
#: behind (``pipelines``).
SEMI_ASYNC_CLIENTS = ("blocks", "pipelines")


@dataclass(frozen=True)
class UpdateRule:
    """A value object: four numbers decide every push. Build one with a preset::

        UpdateRule.synchronous(num_workers=4)      # standard (mini-batch) gradient descent
        UpdateRule.asynchronous(max_staleness=10)  # Hogwild-style, Gorila's max delay
        UpdateRule.semi_async()                    # aggregate 20, counted <= 3, accepted <= 5
        rule.classify(staleness=4)                 # -> "accepted"

    ``pipelined``: a client computes its next gradient while its push travels (see the module doc).
    """

    aggregate: int
    count_within: float
    accept_within: float
    barrier: bool = False
    pipelined: bool = False

    def __post_init__(self) -> None:
        validate.integer("aggregate", self.aggregate, low=1)
        for field in ("count_within", "accept_within"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
                raise ConfigError(field, f"must be an integer >= 0 or infinity, got {value!r}")
            if value < 0 or (math.isfinite(value) and value != int(value)):
                raise ConfigError(field, f"must be an integer >= 0 or infinity, got {value!r}")
        if self.barrier and self.pipelined:
            raise ConfigError("pipelined", "a barrier rule's pushes wait for the next version: they cannot be "
                                           "pipelined")
        if self.accept_within < self.count_within:
            raise ConfigError(
                "accept_within",
                f"must be >= count_within ({self.count_within}), got {self.accept_within}",
            )

    @classmethod
    def synchronous(cls, num_workers: int) -> UpdateRule:
        """Every worker's gradient of version ``v`` is averaged into version ``v + 1``."""
        validate.integer("workers", num_workers, low=1)
        return cls(aggregate=num_workers, count_within=0, accept_within=0, barrier=True)

    @classmethod
    def asynchronous(cls, max_staleness: int | None = None) -> UpdateRule:
        """Each push is applied at once; pushes staler than ``max_staleness`` are rejected. Pipelined:
        a client computes while its push travels."""
        if max_staleness is None:
            return cls(aggregate=1, count_within=math.inf, accept_within=math.inf, pipelined=True)
        validate.integer("max_staleness", max_staleness, low=0)
        return cls(aggregate=1, count_within=max_staleness, accept_within=max_staleness, pipelined=True)

    @classmethod
    def semi_async(cls, aggregate: int = 20, count_within: float = 3, accept_within: float = 5,
                   pipelined: bool = False) -> UpdateRule:
        """Aggregate ``aggregate`` counted pushes; tolerate a little staleness. A client waits for
        each push's reply, and a client behind receives the new parameters in it before its next
        gradient (the write-up's); ``pipelined``: it computes while the reply travels, and waits
        only once a reply said it fell behind."""
        return cls(aggregate=aggregate, count_within=count_within, accept_within=accept_within,
                   pipelined=pipelined)

    @classmethod
    def for_mode(cls, mode: str, num_workers: int, *, aggregate: int | None = None,
                 count_within: int | None = None, accept_within: int | None = None,
                 max_staleness: int | None = None, client: str | None = None) -> UpdateRule:
        """The preset ``mode`` names (one of :data:`MODES`), with the knobs given::

            UpdateRule.for_mode("sync", num_workers=4)                 # synchronous(4)
            UpdateRule.for_mode("semi-async", 4, aggregate=10)         # semi_async(10, 3, 5)
            UpdateRule.for_mode("semi-async", 4, client="pipelines")   # semi_async(pipelined=True)
            UpdateRule.for_mode("async", 4, max_staleness=2)           # asynchronous(2)

        ``num_workers`` is how many gradients a synchronous update waits for. A knob of another
        mode is a ``ConfigError`` naming it; so is ``client`` (:data:`SEMI_ASYNC_CLIENTS`) outside
        ``semi-async``.
        """
        validate.choice("mode", mode, MODES)
        if client is not None:
            validate.choice("semi_async_client", client, SEMI_ASYNC_CLIENTS)
            if mode != "semi-async":
                raise ConfigError("semi_async_client", f"applies to --mode semi-async only (mode is {mode})")
        knobs = {"aggregate": aggregate, "count_within": count_within, "accept_within": accept_within,
                 "max_staleness": max_staleness}
        own = MODE_KNOBS[mode]
        for name, value in knobs.items():
            if value is not None and name not in own:
                raise ConfigError(name, f"applies to --mode {'async' if name == 'max_staleness' else 'semi-async'}"
                                        f" only (mode is {mode})")
        if mode == "sync":
            return cls.synchronous(num_workers=num_workers)
        if mode == "async":
            return cls.asynchronous(max_staleness=max_staleness)
        defaults = cls.semi_async()
        for name in own:
            if knobs[name] is not None:
                validate.integer(name, knobs[name], low=1 if name == "aggregate" else 0)
        return cls.semi_async(
            aggregate=defaults.aggregate if aggregate is None else aggregate,
            count_within=defaults.count_within if count_within is None else count_within,
            accept_within=defaults.accept_within if accept_within is None else accept_within,
            pipelined=client == "pipelines")

    @classmethod
    def for_mode_knobs(cls, mode: str, num_workers: int, knobs: Mapping[str, int]) -> UpdateRule:
        """:meth:`for_mode` with those of ``knobs`` that ``mode`` takes (a sweep over several modes
        gives every mode the same knobs)::

            UpdateRule.for_mode_knobs("async", 4, {"max_staleness": 2, "aggregate": 10})  # asynchronous(2)
        """
        validate.choice("mode", mode, MODES)
        taken: dict[str, Any] = {name: knobs[name] for name in MODE_KNOBS[mode] if name in knobs}
        return cls.for_mode(mode, num_workers, **taken)

    def classify(self, staleness: int) -> Outcome:
        """The outcome of a push with this staleness (``>= 0``)."""
        if staleness <= self.count_within:
            return "counted"
        if staleness <= self.accept_within:
            return "accepted"
        return "rejected"

    @property
    def waits_when_behind(self) -> bool:
        """Whether a pipelined client whose push came back uncounted or rejected waits for the
        reply of the push in flight before computing again: true for pipelined rules that bound
        staleness (async with ``max_staleness``, semi-async's ``pipelines`` client). A client that
        is not pipelined waits for every reply anyway."""
        return self.pipelined and math.isfinite(self.count_within)

    def describe(self) -> str:
        """A one-line human description, e.g. for the run header."""
        def fmt(x: float) -> str:
            return "inf" if math.isinf(x) else str(int(x))
        return (f"aggregate={self.aggregate} count_within={fmt(self.count_within)} "
                f"accept_within={fmt(self.accept_within)} barrier={self.barrier} pipelined={self.pipelined}")
