"""Central batched inference (the SEED / Sample Factory split): rollout workers step environments,
an inference server per node batches their observations and answers with actions.

===========================  ==============================================================
module                       what it holds
===========================  ==============================================================
``batching``                 ``BatchingRule`` (max batch, max wait) and the ``BatchQueue`` it judges
``channel``                  shared-memory slots and the socket protocol between the two sides
``client``                   ``InferenceClient``: a rollout worker's requests, across server restarts
``server``                   ``InferenceServer``: the service that batches, runs the policy, replies
``policies``                 ``GreedyQPolicy``, ``SampledPolicy``: networks on a device
===========================  ==============================================================
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from gorila.driver.plan import ServiceSpec
from gorila.inference.batching import BatchingRule
from gorila.inference.server import InferencePolicy, InferenceServer

#: The inference service's name in a plan (``services["inference"]`` in its ``groups``).
SERVICE = "inference"


def inference_service(policy: Callable[[], InferencePolicy], rule: BatchingRule, refresh_every: int) -> ServiceSpec:
    """The plan's inference server: one, on the driver's node (rollout workers reach it through
    shared memory, so they must share its node)."""
    factory = functools.partial(InferenceServer, policy=policy, rule=rule, refresh_every=refresh_every)
    return ServiceSpec(SERVICE, factory, 1, uses_server=True)
