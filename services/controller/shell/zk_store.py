"""The controller's ZooKeeper I/O: blocking kazoo calls, run on ONE executor thread by the shell
(so they happen in order). Paths and payloads come from services.common.znodes only.

Fencing: every write is a kazoo transaction that starts with a version check on
/controller_epoch (the version this controller wrote when it bumped the epoch) and uses znode
versions for partition state, assignment and config writes (Kafka's KafkaZkClient does the same
with `MultiOp`). Any failure raises `Fenced`; the shell then stops acting.
"""
from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Iterable, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError

from services.common import znodes
from services.controller.core.active_controller_watch import ActiveController
from services.controller.core.effects import (
    DeletePreferredElection, DeleteTopicZnodes, MarkTopicForDeletion, WritePartitionState,
    WriteReassignments, WriteTopicAssignment, WriteTopicConfig, ZkWrite)
from services.controller.core.model import (
    NEW, BrokerInfo, GatewayInfo, LeaderIsr, Reassignment, TopicSnapshot)

log = logging.getLogger(__name__)

# ZooKeeper refuses a request above jute.maxbuffer (1 MiB); a long batch of writes is split
# into transactions of at most this many operations, each with its own epoch check.
MAX_OPS_PER_TRANSACTION = 500


class Fenced(Exception):
    """A fenced write failed: another controller has a newer epoch, or the session is gone."""


class ZkStore:
    def __init__(self, client: KazooClient):
        self.client = client

    # ---- election ----------------------------------------------------------------------------
    def ensure_paths(self) -> None:
        for p in znodes.PERSISTENT_PATHS:
            self.client.ensure_path(p)

    def _session_id(self) -> int | None:
        cid = self.client.client_id
        return cid[0] if cid else None

    def try_claim_controller(self, info: znodes.ControllerInfo) -> bool:
        """Create the ephemeral /controller; True if it is (now or already) ours."""
        try:
            self.client.create(znodes.CONTROLLER, znodes.encode_controller(info), ephemeral=True)
            return True
        except NodeExistsError:
            try:
                _, stat = self.client.get(znodes.CONTROLLER)
            except NoNodeError:
                return False            # gone meanwhile: the watch retries
            # After SUSPENDED -> CONNECTED the session (and so our ephemeral) may have survived.
            return stat.ephemeralOwner == self._session_id()

    def release_controller(self) -> None:
        """Delete /controller if it is ours (best effort)."""
        try:
            _, stat = self.client.get(znodes.CONTROLLER)
            if stat.ephemeralOwner == self._session_id():
                self.client.delete(znodes.CONTROLLER, version=stat.version)
        except Exception:  # noqa: BLE001 - best effort; the session end removes it anyway
            log.debug("could not release /controller", exc_info=True)

    def remove_dead_controller(self, target: ActiveController) -> bool:
        """Delete /controller if it is still `target`'s znode (same creation zxid, id and
        endpoint), whose process a standby judged gone; True if deleted. Not a fence: the
        election that follows bumps /controller_epoch."""
        try:
            data, stat = self.client.get(znodes.CONTROLLER)
            info = znodes.decode_controller(data)
            if (stat.czxid != target.czxid or info.controller_id != target.controller_id
                    or info.endpoint != target.endpoint):
                return False
            self.client.delete(znodes.CONTROLLER, version=stat.version)
            return True
        except (NoNodeError, BadVersionError, znodes.ZnodeDataError):
            return False

    def bump_epoch(self) -> tuple[int, int]:
        """Increment /controller_epoch with a conditional write: (new epoch, znode version).
        Raises Fenced if another controller wrote it first or /controller is no longer ours."""
        try:
            _, cstat = self.client.get(znodes.CONTROLLER)
            if cstat.ephemeralOwner != self._session_id():
                raise Fenced("/controller is not ours")
            try:
                data, stat = self.client.get(znodes.CONTROLLER_EPOCH)
            except NoNodeError:
                try:
                    self.client.create(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(1))
                except NodeExistsError:
                    raise Fenced("/controller_epoch created concurrently") from None
                return 1, 0
            epoch = znodes.decode_controller_epoch(data) + 1
            t = self.client.transaction()
            t.check(znodes.CONTROLLER, cstat.version)
            t.set_data(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(epoch),
                       version=stat.version)
            results = t.commit()
            _raise_on_failure(results, "bump /controller_epoch")
            return epoch, stat.version + 1
        except KazooException as e:
            raise Fenced(f"bumping /controller_epoch failed: {e!r}") from None

    def cluster_id(self) -> str:
        try:
            return znodes.decode_cluster_id(self.client.get(znodes.CLUSTER_ID)[0])
        except NoNodeError:
            pass
        new = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        try:
            self.client.create(znodes.CLUSTER_ID, znodes.encode_cluster_id(new), makepath=True)
            return new
        except NodeExistsError:
            return znodes.decode_cluster_id(self.client.get(znodes.CLUSTER_ID)[0])

    # ---- reads -------------------------------------------------------------------------------
    def read_brokers(self) -> tuple[BrokerInfo, ...]:
        out = []
        for child in self.client.get_children(znodes.BROKER_IDS):
            try:
                node_id = int(child)
                data, stat = self.client.get(znodes.broker_path(node_id))
                b = znodes.decode_broker(node_id, data)
            except NoNodeError:
                continue                    # went away while we read
            except (ValueError, znodes.ZnodeDataError) as e:
                log.warning("ignoring storage node registration %s: %s", child, e)
                continue
            endpoint = b.endpoints[0] if b.endpoints else f"tcp://{b.host}:{b.port}"
            out.append(BrokerInfo(node_id, b.host, b.port, endpoint, b.rack or "", stat.czxid,
                                  frozenset(b.offline_partitions), b.unclean_shutdown))
        return tuple(sorted(out, key=lambda b: b.node_id))

    def read_topics(self) -> tuple[TopicSnapshot, ...]:
        """Every topic with its assignment, configs and partition states, as a new controller
        reads them at election. The reads are pipelined (kazoo's async gets, answered in order
        on one session): with 10,000 partitions, one round trip each was most of a controller
        failover."""
        names = sorted(self.client.get_children(znodes.BROKER_TOPICS))
        heads = [(name, self.client.get_async(znodes.topic_path(name)),
                  self.client.get_async(znodes.topic_config_path(name))) for name in names]
        pending = []
        for name, assignment_read, config_read in heads:
            try:
                data, stat = assignment_read.get()
                assignment = znodes.decode_topic_assignment(data)
                try:
                    cdata, cstat = config_read.get()
                    configs, config_version = znodes.decode_topic_config(cdata), cstat.version
                except NoNodeError:
                    configs, config_version = {}, NEW
            except NoNodeError:
                continue
            except (ValueError, znodes.ZnodeDataError) as e:
                log.error("ignoring topic %s: unreadable znodes: %s", name, e)
                continue
            state_reads = {p: self.client.get_async(znodes.partition_state_path(name, p))
                           for p in assignment}
            pending.append((name, assignment, stat.version, configs, config_version, state_reads))
        out = []
        for name, assignment, version, configs, config_version, state_reads in pending:
            states: dict[int, LeaderIsr] = {}
            try:
                for p, read in state_reads.items():
                    try:
                        sdata, sstat = read.get()
                    except NoNodeError:
                        continue
                    s = znodes.decode_partition_state(sdata)
                    states[p] = LeaderIsr(s.leader, s.leader_epoch, tuple(s.isr),
                                          s.controller_epoch, sstat.version, s.elr,
                                          s.last_known_elr)
            except (ValueError, znodes.ZnodeDataError) as e:
                log.error("ignoring topic %s: unreadable znodes: %s", name, e)
                continue
            out.append(TopicSnapshot(name, assignment, configs, version, config_version, states))
        return tuple(out)

    def read_gateways(self) -> tuple[GatewayInfo, ...]:
        out = []
        for child in self.client.get_children(znodes.GATEWAYS):
            try:
                gid = int(child)
                g = znodes.decode_gateway(gid, self.client.get(znodes.gateway_path(gid))[0])
            except NoNodeError:
                continue
            except (ValueError, znodes.ZnodeDataError) as e:
                log.warning("ignoring gateway registration %s: %s", child, e)
                continue
            out.append(GatewayInfo(gid, g.endpoint))
        return tuple(sorted(out, key=lambda g: g.gateway_id))

    def read_reassignments(self) -> tuple[tuple[Reassignment, ...], int]:
        """/admin/reassign_partitions: (entries, version); ((), NEW) when absent. Unreadable
        JSON gives no entries (the controller then rewrites or removes the znode)."""
        try:
            data, stat = self.client.get(znodes.REASSIGN_PARTITIONS)
        except NoNodeError:
            return (), NEW
        try:
            items = znodes.decode_reassign_partitions(data)
        except znodes.ZnodeDataError as e:
            log.warning("ignoring unreadable %s: %s", znodes.REASSIGN_PARTITIONS, e)
            items = []
        return tuple(Reassignment(i.topic, i.partition, tuple(i.replicas)) for i in items), stat.version

    def read_preferred_election(self) -> tuple[tuple[tuple[str, int], ...], int]:
        try:
            data, stat = self.client.get(znodes.PREFERRED_REPLICA_ELECTION)
        except NoNodeError:
            return (), NEW
        try:
            items = znodes.decode_preferred_replica_election(data)
        except znodes.ZnodeDataError as e:
            log.warning("ignoring unreadable %s: %s", znodes.PREFERRED_REPLICA_ELECTION, e)
            items = []
        return tuple((i.topic, i.partition) for i in items), stat.version

    def read_pending_deletions(self) -> tuple[str, ...]:
        return tuple(sorted(self.client.get_children(znodes.DELETE_TOPICS)))

    # ---- fenced writes -----------------------------------------------------------------------
    def commit(self, writes: Sequence[ZkWrite], epoch_zk_version: int) -> None:
        ops = self._ops(writes)
        try:
            for i in range(0, len(ops), MAX_OPS_PER_TRANSACTION):
                t = self.client.transaction()
                t.check(znodes.CONTROLLER_EPOCH, epoch_zk_version)
                for op in ops[i:i + MAX_OPS_PER_TRANSACTION]:
                    op(t)
                _raise_on_failure(t.commit(), f"{len(ops)} writes")
        except KazooException as e:
            raise Fenced(f"write failed: {e!r}") from None

    def _ops(self, writes: Iterable[ZkWrite]) -> list:
        c = self.client
        ops: list = []
        made: set[str] = set()          # parents created earlier in this batch
        created: set[str] = set()       # paths this batch creates (so they did not exist)

        def ensure(path: str) -> None:
            # A child of a path this batch creates cannot exist yet: no round trip to ask
            # (a new topic of 1,000 partitions asked 1,000 times, one after the other).
            if path in made:
                return
            if path.rpartition("/")[0] in created or c.exists(path) is None:
                ops.append(lambda t, p=path: t.create(p, b""))
                created.add(path)
            made.add(path)

        for w in writes:
            if isinstance(w, WriteTopicAssignment):
                path, data = znodes.topic_path(w.topic), znodes.encode_topic_assignment(w.assignment)
                if w.expected_version == NEW:
                    ops.append(lambda t, p=path, d=data: t.create(p, d))
                    made.add(path)
                    created.add(path)
                else:
                    ops.append(lambda t, p=path, d=data, v=w.expected_version: t.set_data(p, d, v))
            elif isinstance(w, WriteTopicConfig):
                path, data = znodes.topic_config_path(w.topic), znodes.encode_topic_config(w.configs)
                if w.expected_version == NEW:
                    ops.append(lambda t, p=path, d=data: t.create(p, d))
                else:
                    ops.append(lambda t, p=path, d=data, v=w.expected_version: t.set_data(p, d, v))
            elif isinstance(w, WritePartitionState):
                s = w.state
                path = znodes.partition_state_path(w.topic, w.partition)
                data = znodes.encode_partition_state(znodes.PartitionState(
                    s.leader, s.leader_epoch, tuple(s.isr), s.controller_epoch, tuple(s.elr),
                    tuple(s.last_known_elr)))
                if w.expected_version == NEW:
                    ensure(znodes.partitions_path(w.topic))
                    ensure(znodes.partition_path(w.topic, w.partition))
                    ops.append(lambda t, p=path, d=data: t.create(p, d))
                else:
                    ops.append(lambda t, p=path, d=data, v=w.expected_version: t.set_data(p, d, v))
            elif isinstance(w, MarkTopicForDeletion):
                path = znodes.delete_topic_path(w.topic)
                if c.exists(path) is None:
                    ops.append(lambda t, p=path: t.create(p, znodes.encode_delete_topic()))
                    created.add(path)
            elif isinstance(w, DeleteTopicZnodes):
                # A marker this batch creates is not in ZooKeeper yet for the read below: delete
                # it too (with no StopReplica to send, the mark and the delete share one batch).
                ops.extend(self._delete_topic_ops(
                    w.topic, marker_in_batch=znodes.delete_topic_path(w.topic) in created))
            elif isinstance(w, WriteReassignments):
                path = znodes.REASSIGN_PARTITIONS
                data = znodes.encode_reassign_partitions(
                    znodes.PartitionReassignment(r.topic, r.partition, tuple(r.replicas))
                    for r in w.reassignments)
                if w.expected_version == NEW:
                    if w.reassignments:
                        ensure(znodes.ADMIN)
                        ops.append(lambda t, p=path, d=data: t.create(p, d))
                elif not w.reassignments:
                    ops.append(lambda t, p=path, v=w.expected_version: t.delete(p, v))
                else:
                    ops.append(lambda t, p=path, d=data, v=w.expected_version: t.set_data(p, d, v))
            elif isinstance(w, DeletePreferredElection):
                ops.append(lambda t, p=znodes.PREFERRED_REPLICA_ELECTION, v=w.expected_version:
                           t.delete(p, v))
            else:  # pragma: no cover - a bug
                raise TypeError(w)
        return ops

    def _delete_topic_ops(self, topic: str, marker_in_batch: bool = False) -> list:
        """Deletes, leaves first, of every znode the topic has (read now: we are the only writer),
        and of its deletion marker, also when `marker_in_batch` (created earlier in this batch)."""
        c = self.client
        paths: list[str] = []

        def walk(path: str) -> None:
            try:
                children = c.get_children(path)
            except NoNodeError:
                return
            for child in children:
                walk(f"{path}/{child}")
            paths.append(path)

        walk(znodes.topic_path(topic))
        marker = znodes.delete_topic_path(topic)
        for path in (znodes.topic_config_path(topic), marker):
            if (path == marker and marker_in_batch) or c.exists(path) is not None:
                paths.append(path)
        return [lambda t, p=p: t.delete(p) for p in paths]


def _raise_on_failure(results: list, what: str) -> None:
    for r in results or ():
        if isinstance(r, Exception):
            raise Fenced(f"{what}: transaction failed: {r!r}")
