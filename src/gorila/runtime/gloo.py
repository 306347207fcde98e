"""The network interface a learner's process group listens on (:mod:`gorila.params.collective`),
named from inside that process: the interface that holds the node's IP as Ray reports it
(``ray.util.get_node_ip_address``), so ``lo`` on a loopback cluster (the embedded Ray, the tests'
clusters) and the cluster's own network elsewhere; None where no interface holds it (gloo then
takes the interface of the host's name). Ray and psutil (a dependency of Ray) are imported only
when it is called: every process that unpickles a server refers to this function."""

from __future__ import annotations


def gloo_interface() -> str | None:
    """The interface name of this node's Ray IP (``GLOO_SOCKET_IFNAME``), or None."""
    import psutil  # type: ignore[import-untyped]
    import ray

    address = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]  # Ray leaves it unannotated
    for name, addresses in psutil.net_if_addrs().items():
        if any(entry.address == address for entry in addresses):
            return str(name)
    return None
