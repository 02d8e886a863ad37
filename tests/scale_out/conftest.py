"""A real two-node Ray cluster per module (the PostgreSQL database is tests/conftest.py's).

Skipped when ray is not importable or no PostgreSQL server answers at
``INSTEP_TEST_POSTGRES`` (CI starts one; locally ``pg_ctlcluster <ver> main start``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest


@dataclass
class TwoNodes:
    cluster: Any
    head: Any
    doomed: Any  # the second node, with its own devices, which a test may remove

    @property
    def address(self) -> str:
        return self.cluster.address


@pytest.fixture(scope="module")
def ray_cluster():
    """Head (1 fake NPU) + a second raylet (2 fake NPUs), as two Ray nodes on this host."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "resources": {"NPU": 1},
            "include_dashboard": False,
            # notice a lost node within seconds (the default waits ~30 s)
            "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 4},
        },
    )
    doomed = cluster.add_node(num_cpus=2, resources={"NPU": 2})
    cluster.wait_for_nodes()
    yield TwoNodes(cluster, cluster.head_node, doomed)
    if ray.is_initialized():
        ray.shutdown()
    cluster.shutdown()
