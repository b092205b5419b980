"""Throwaway layouts of N data nodes behind a PL/Proxy router, on loopback.

Each node is a throwaway cluster whose pg_hba.conf lets the harness's
``postgres`` user in without a password (as every throwaway cluster does) but
asks every other role for its SCRAM password: so the router's connections,
which log in as ``stockpool_router`` / ``stockpool_router_ops``, work only with
the password of the router's user mappings, as they would in production.
"""

from __future__ import annotations

import contextlib
import os
import pwd
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from stockpool.install.deploy import Roles
from stockpool.route.deploy import RouterReport, deploy_router
from stockpool.server.cluster import SERVER_USER, Cluster, throwaway

NODE_HBA = """\
# stockpool throwaway node: the harness's superuser without a password,
# every other role (the router's) with its SCRAM password.
local all all trust
host all postgres 127.0.0.1/32 trust
host all all 127.0.0.1/32 scram-sha-256
"""


def init_node(cluster: Cluster) -> None:
    """initdb, then the node's pg_hba.conf."""
    cluster.init()
    hba = cluster.datadir / "pg_hba.conf"
    hba.write_text(NODE_HBA)
    if os.geteuid() == 0:
        entry = pwd.getpwnam(SERVER_USER)
        os.chown(hba, entry.pw_uid, entry.pw_gid)


@dataclass
class Layout:
    router: Cluster
    nodes: list[Cluster]
    report: RouterReport

    def node_of(self, name: str) -> Cluster:
        """The cluster a router node name (host:port/dbname) stands for."""
        for node in self.nodes:
            if name.startswith(f"127.0.0.1:{node.port}/"):
                return node
        raise KeyError(name)


@contextlib.contextmanager
def throwaway_layout(
    nodes: int, settings: Mapping[str, str] | None = None, roles: Roles | None = None
) -> Iterator[Layout]:
    """N node clusters and a router cluster, deployed; all removed afterwards."""
    with contextlib.ExitStack() as stack:
        clusters = [stack.enter_context(throwaway(settings, create=init_node)) for _ in range(nodes)]
        router = stack.enter_context(throwaway(settings))
        report = deploy_router(router.dsn, [c.dsn for c in clusters], roles)
        yield Layout(router, clusters, report)
