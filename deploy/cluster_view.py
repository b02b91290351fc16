"""What `riverbed fleet status` shows of the cluster: the active controller and each
partition's leader, ISR and replicas, read from ZooKeeper over one kept session.

Used by deploy.fleet.Fleet.status(); deploy.fleet re-exports ClusterView.
"""
from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("deploy.fleet")   # the fleet's logger, as before


class ClusterView:
    """Reads the active controller and partition leaders from ZooKeeper, keeping one session."""

    def __init__(self, zk_connect: str, timeout_s: float = 3.0):
        self.zk_connect = zk_connect
        self.timeout_s = timeout_s
        self._client = None

    def close(self) -> None:
        if self._client is not None:
            from services.common import zk as zkmod
            zkmod.close(self._client)
            self._client = None

    def read(self) -> tuple[int | None, list[dict[str, Any]]]:
        from kazoo.exceptions import KazooException, NoNodeError

        from services.common import zk as zkmod
        from services.common import znodes as zn
        try:
            if self._client is None or not self._client.connected:
                self.close()
                self._client = zkmod.connect(self.zk_connect, timeout_s=self.timeout_s,
                                             create_chroot=False)
            c = self._client
            controller = None
            try:
                data, _ = c.get(zn.CONTROLLER)
                controller = zn.decode_controller(data).controller_id
            except (NoNodeError, zn.ZnodeDataError):
                pass
            partitions = []
            try:
                topics = sorted(c.get_children(zn.BROKER_TOPICS))
            except NoNodeError:
                topics = []
            for topic in topics:
                try:
                    assignment = zn.decode_topic_assignment(c.get(zn.topic_path(topic))[0])
                except (NoNodeError, zn.ZnodeDataError, ValueError):
                    continue
                for p in assignment:
                    leader, isr = None, []
                    try:
                        st = zn.decode_partition_state(c.get(zn.partition_state_path(topic, p))[0])
                        leader = st.leader if st.leader >= 0 else None
                        isr = list(st.isr)
                    except (NoNodeError, zn.ZnodeDataError):
                        pass
                    partitions.append({"topic": topic, "partition": p, "leader": leader,
                                       "isr": isr, "replicas": list(assignment[p])})
            return controller, partitions
        except (KazooException, zkmod.ZkConnectError, OSError) as e:
            log.debug("reading cluster state failed: %s", e)
            self.close()
            return None, []
