"""Where on a Ray cluster a process runs: node ids and node affinity (Menger's placement).

The same command runs on one machine (one node: every group lands there) and on a cluster
(node-placed groups spread over the nodes in a fixed order)::

    nodes = alive_nodes()
    options = pinned(nodes, index=3)   # Ray options: on nodes[3 % len(nodes)], never elsewhere
"""

from __future__ import annotations

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


def node_id() -> str:
    """The Ray node this process runs on: the key of its node's parameter cache."""
    return ray.get_runtime_context().get_node_id()


def alive_nodes() -> list[str]:
    """The alive nodes with CPUs, in a fixed order."""
    return sorted(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0)


def pinned(nodes: list[str], index: int) -> dict:
    """Ray options that place a process on ``nodes[index % len(nodes)]`` only."""
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(nodes[index % len(nodes)], soft=False)}
