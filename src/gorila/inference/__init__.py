"""Central batched inference (the SEED / Sample Factory split): rollout workers step environments,
one inference server per run batches their observations and answers with actions.

===========================  ==============================================================
module                       what it holds
===========================  ==============================================================
``batching``                 ``BatchingRule`` (max batch, max wait) and the ``BatchQueue`` it judges
``channel``                  shared-memory slots and the socket protocol between the two sides
``client``                   ``InferenceClient``: a rollout worker's requests, across server restarts
``server``                   ``InferenceServer``: the service that batches, runs the policy, replies
``policies``                 ``GreedyQPolicy``, ``SampledPolicy``: networks on a device
===========================  ==============================================================

A plan places the server with :func:`gorila.agents.kit.inference_service`.
"""
