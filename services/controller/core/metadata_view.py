"""The controller's metadata answers: the snapshot pushed to gateways (UPDATE_METADATA), and
the METADATA / DESCRIBE_CLUSTER requests (with topic auto-creation). A mixin of ControllerCore:
it reads the model and writes only through the core's one door (`_write`)."""
from __future__ import annotations

import logging

from riverbed import errors
from riverbed._proto.v1 import metadata_pb2
from services.controller.core.assignment import topic_name_problem
from services.controller.core.effects import Effect, PublishMetadata
from services.controller.core.model import INTERNAL_TOPICS, NO_LEADER, OFFSETS_TOPIC, Topic

log = logging.getLogger(__name__)

E = errors.ErrorCode
NONE = 0

# A full metadata snapshot goes out at least this often (docs/contracts.md: "every second").
METADATA_PUBLISH_INTERVAL_MS = 1000


class MetadataView:
    # ---- metadata ---------------------------------------------------------------------------
    def _topic_metadata(self, t: Topic) -> metadata_pb2.TopicMetadata:
        tm = metadata_pb2.TopicMetadata(error_code=NONE, name=t.name,
                                        is_internal=t.name in INTERNAL_TOPICS, configs=t.configs)
        for p in sorted(t.assignment):
            replicas = t.assignment[p]
            st = t.states.get(p)
            leader = st.leader if st is not None and st.leader in self.brokers else NO_LEADER
            tm.partitions.append(metadata_pb2.PartitionMetadata(
                error_code=NONE if leader != NO_LEADER else E.Value("LEADER_NOT_AVAILABLE"),
                partition=p, leader=leader, leader_epoch=st.leader_epoch if st else 0,
                replicas=replicas, isr=st.isr if st else (),
                offline_replicas=[r for r in replicas if r not in self.brokers
                                  or (t.name, p) in self.brokers[r].offline_partitions],
                eligible_leader_replicas=st.elr if st else (),
                last_known_elr=st.last_known_elr if st else ()))
        return tm

    def snapshot(self) -> metadata_pb2.UpdateMetadataRequest:
        """The full metadata snapshot (without bumping metadata_version)."""
        up = metadata_pb2.UpdateMetadataRequest(
            controller_id=self.config.controller_id, controller_epoch=self.controller_epoch,
            metadata_version=self.metadata_version, cluster_id=self.cluster_id)
        for b in sorted(self.brokers):
            up.live_brokers.append(self._broker_pb(self.brokers[b]))
        for name in sorted(self.topics):
            up.topics.append(self._topic_metadata(self.topics[name]))
        return up

    def _publish(self, now_ms: int) -> PublishMetadata:
        self.metadata_version += 1
        self.next_publish_ms = now_ms + METADATA_PUBLISH_INTERVAL_MS
        return PublishMetadata(self.snapshot())

    def _describe_cluster(self, req, out) -> metadata_pb2.DescribeClusterResponse:
        resp = metadata_pb2.DescribeClusterResponse(
            error_code=NONE, cluster_id=self.cluster_id, controller_id=self.config.controller_id)
        for b in sorted(self.brokers):
            resp.brokers.append(self._broker_pb(self.brokers[b]))
        for g in sorted(self.gateways):
            resp.gateways.append(metadata_pb2.GatewayInfo(
                gateway_id=g, endpoint=self.gateways[g].endpoint))
        return resp

    def _metadata(self, req: metadata_pb2.MetadataRequest, out: list[Effect]):
        resp = metadata_pb2.MetadataResponse(
            controller_id=self.config.controller_id, cluster_id=self.cluster_id,
            controller_epoch=self.controller_epoch, metadata_version=self.metadata_version)
        for b in sorted(self.brokers):
            resp.brokers.append(self._broker_pb(self.brokers[b]))
        for g in sorted(self.gateways):
            resp.gateways.append(metadata_pb2.GatewayInfo(
                gateway_id=g, endpoint=self.gateways[g].endpoint))
        names = list(dict.fromkeys(req.topics)) if req.topics else sorted(self.topics)
        for name in names:
            if name not in self.topics:
                problem = topic_name_problem(name)
                if problem is not None:
                    resp.topics.append(metadata_pb2.TopicMetadata(
                        name=name, error_code=E.Value("INVALID_TOPIC_EXCEPTION"),
                        error_message=problem))
                    continue
                if not (req.allow_auto_topic_creation and self.config.auto_create_topics_enable):
                    resp.topics.append(metadata_pb2.TopicMetadata(
                        name=name, error_code=E.Value("UNKNOWN_TOPIC_OR_PARTITION"),
                        error_message="unknown topic"))
                    continue
                code, msg = self._auto_create(name, out)
                if code != NONE:
                    resp.topics.append(metadata_pb2.TopicMetadata(
                        name=name, error_code=code, error_message=msg))
                    continue
            resp.topics.append(self._topic_metadata(self.topics[name]))
        return resp

    def _auto_create(self, name: str, out: list[Effect]) -> tuple[int, str]:
        cfg = self.config
        if name == OFFSETS_TOPIC:
            rf = min(cfg.offsets_topic_replication_factor, max(len(self.brokers), 1))
            return self._create_one(out, name, cfg.offsets_topic_num_partitions, rf,
                                    None, {"cleanup.policy": "compact"})
        return self._create_one(out, name, cfg.num_partitions, cfg.default_replication_factor,
                                None, {})
