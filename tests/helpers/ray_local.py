"""A real multi-node Ray cluster on this machine, every address on loopback (for tests and benches)."""

from __future__ import annotations

import os
import sys

LOOPBACK = "127.0.0.1"


def loopback_cluster(nodes: int = 2, cpus_per_node: int = 1):
    """A head with no CPUs and ``nodes`` worker nodes of ``cpus_per_node`` CPUs, all bound to loopback.

    Ray replaces 127.0.0.1 by the machine's routable address unless it runs as a single-machine
    cluster: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` says so to every Ray process started from here,
    and the same switch is set in this process's Ray if it was imported before.
    Returns ``(cluster, [node, ...])``; the caller shuts it down.
    """
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    if "ray" in sys.modules:
        from ray._private import ray_constants

        ray_constants.ENABLE_RAY_CLUSTER = False
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "node_ip_address": LOOPBACK})
    added = [cluster.add_node(num_cpus=cpus_per_node, node_ip_address=LOOPBACK) for _ in range(nodes)]
    cluster.wait_for_nodes()
    return cluster, added
