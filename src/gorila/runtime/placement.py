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
    nodes = ray.nodes()  # type: ignore[no-untyped-call]  # Ray leaves ray.nodes unannotated
    return sorted(n["NodeID"] for n in nodes if n["Alive"] and n["Resources"].get("CPU", 0) > 0)


def node_cpus() -> list[float]:
    """The CPUs of every alive node (as Ray counts them)."""
    nodes = ray.nodes()  # type: ignore[no-untyped-call]  # Ray leaves ray.nodes unannotated
    return [n["Resources"].get("CPU", 0.0) for n in nodes if n["Alive"]]


def cluster_resources() -> dict[str, float]:
    """The cluster's resources, as Ray counts them (``{"CPU": 8.0, "GPU": 1.0, ...}``)."""
    return ray.cluster_resources()  # type: ignore[no-untyped-call]  # Ray leaves it unannotated


def available_resources() -> dict[str, float]:
    """The cluster's resources no process holds now."""
    return ray.available_resources()  # type: ignore[no-untyped-call]  # Ray leaves it unannotated


def fitting_share(cpus: list[float], processes: int) -> float:
    """The largest CPU share (in hundredths, at most 1, at least 0.01) at which ``processes``
    processes fit on nodes of ``cpus`` CPUs each, a node holding only whole shares: on one node the
    CPUs divided equally, on several less where a node's remainder would strand a process (two
    nodes of 1 CPU hold six processes of 0.28, not seven; of 0.25, eight)::

        fitting_share([1.0, 1.0], 7)   # 0.25
    """
    hundredths = [int(round(100 * c)) for c in cpus]
    share = max(1, min(100, sum(hundredths) // max(processes, 1)))
    while share > 1 and sum(h // share for h in hundredths) < processes:
        share -= 1
    return share / 100


def pinned(nodes: list[str], index: int) -> dict:
    """Ray options that place a process on ``nodes[index % len(nodes)]`` only."""
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(nodes[index % len(nodes)], soft=False)}
