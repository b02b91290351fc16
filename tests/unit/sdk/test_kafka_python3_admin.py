"""riverbed.KafkaAdminClient, kafka-python 3.0's admin client as a facade over Riverbed's Admin
(issue 28), against a scripted gateway: the requests each call makes of Admin's APIs and the
kafka-python 3.0 shapes it returns. tests/integration/test_kafka_python3.py checks the same
shapes against kafka-python 3.0.12 itself on a real fleet."""
from __future__ import annotations

import uuid

import pytest
from sdk_fakes import FakeGateway

import riverbed
from riverbed import errors
from riverbed._proto.v1 import controller_pb2, group_pb2, header_pb2, list_offsets_pb2, \
    metadata_pb2, offset_pb2
from riverbed.admin import (AlterConfigOp, ConfigResource, ConfigResourceType, MemberToRemove,
                            NewPartitions, NewTopic, OffsetSpec, OffsetTimestamp)
from riverbed.admin.kafka_python import ProtocolStruct
from riverbed.structs import OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode


class Cluster:
    """Topics with their configs, a group's commits and a log per partition, answering the
    requests KafkaAdminClient's calls make."""

    def __init__(self):
        self.topics = {"t": {"retention.ms": "1000"}}
        self.partitions = {"t": 2}
        self.commits: dict[tuple[str, int], int] = {("t", 0): 7}
        self.group_state = "Empty"
        self.ends = {0: 20, 1: 5}
        self.gw = FakeGateway({
            ApiKey.DESCRIBE_CLUSTER: self.describe_cluster, ApiKey.CREATE_TOPICS: self.create,
            ApiKey.DELETE_TOPICS: self.delete, ApiKey.METADATA: self.metadata,
            ApiKey.DESCRIBE_CONFIGS: self.describe_configs, ApiKey.ALTER_CONFIGS: self.alter,
            ApiKey.CREATE_PARTITIONS: self.create_partitions,
            ApiKey.LIST_GROUPS: self.list_groups, ApiKey.OFFSET_FETCH: self.offset_fetch,
            ApiKey.OFFSET_COMMIT: self.offset_commit, ApiKey.LIST_OFFSETS: self.list_offsets,
            ApiKey.LEAVE_GROUP: self.leave})
        self.alters: list = []

    def client(self, **configs):
        return riverbed.KafkaAdminClient(bootstrap_servers="tcp://gw:1",
                                         _channel_factory=self.gw.factory, **configs)

    def describe_cluster(self, body, payloads):
        resp = metadata_pb2.DescribeClusterResponse(cluster_id="c1", controller_id=5)
        resp.brokers.add(node_id=1, host="h1", port=9001)
        return resp, []

    def create(self, body, payloads):
        resp = controller_pb2.CreateTopicsResponse()
        for t in body.topics:
            if t.name in self.topics:
                resp.topics.add(name=t.name, error_code=E.Value("TOPIC_ALREADY_EXISTS"),
                                error_message="exists")
            else:
                self.topics[t.name] = dict(t.configs)
                n = t.num_partitions if t.num_partitions > 0 else 3
                self.partitions[t.name] = n
                resp.topics.add(name=t.name, num_partitions=n,
                                replication_factor=max(t.replication_factor, 1))
        return resp, []

    def delete(self, body, payloads):
        resp = controller_pb2.DeleteTopicsResponse()
        for name in body.names:
            code = 0 if self.topics.pop(name, None) is not None else \
                E.Value("UNKNOWN_TOPIC_OR_PARTITION")
            resp.topics.add(name=name, error_code=code)
        return resp, []

    def metadata(self, body, payloads):
        resp = metadata_pb2.MetadataResponse(cluster_id="c1", controller_id=5)
        for name in body.topics or sorted(self.topics):
            t = resp.topics.add(name=name)
            if name not in self.topics:
                t.error_code = E.Value("UNKNOWN_TOPIC_OR_PARTITION")
                continue
            for p in range(self.partitions[name]):
                t.partitions.add(partition=p, leader=1, leader_epoch=3, replicas=[1], isr=[1])
        return resp, []

    def describe_configs(self, body, payloads):
        resp = controller_pb2.DescribeConfigsResponse()
        for name in body.topics:
            r = resp.results.add(topic=name)
            if name not in self.topics:
                r.error_code = E.Value("UNKNOWN_TOPIC_OR_PARTITION")
                continue
            merged = {"cleanup.policy": ("delete", True), "retention.ms": ("604800000", True),
                      "segment.ms": ("604800000", True)}
            merged.update({k: (v, False) for k, v in self.topics[name].items()})
            for k, (v, default) in sorted(merged.items()):
                r.entries.add(name=k, value=v, is_default=default)
        return resp, []

    def alter(self, body, payloads):
        resp = controller_pb2.AlterConfigsResponse()
        for t in body.topics:
            self.alters.append((t.name, dict(t.set), list(t.delete), body.validate_only))
            if "bad" in t.set.values():
                resp.topics.add(name=t.name, error_code=E.Value("INVALID_CONFIG"),
                                error_message="not a number")
                continue
            if not body.validate_only:
                self.topics[t.name].update(t.set)
                for k in t.delete:
                    self.topics[t.name].pop(k, None)
            resp.topics.add(name=t.name)
        return resp, []

    def create_partitions(self, body, payloads):
        resp = controller_pb2.CreatePartitionsResponse()
        for t in body.topics:
            if t.name not in self.partitions:
                resp.topics.add(name=t.name, error_code=E.Value("UNKNOWN_TOPIC_OR_PARTITION"))
            elif t.count <= self.partitions[t.name]:
                resp.topics.add(name=t.name, error_code=E.Value("INVALID_PARTITIONS"),
                                error_message="no fewer")
            else:
                self.partitions[t.name] = t.count
                resp.topics.add(name=t.name)
        return resp, []

    def list_groups(self, body, payloads):
        resp = group_pb2.ListGroupsResponse()
        if not body.states_filter or self.group_state in body.states_filter:
            resp.groups.add(group_id="g", protocol_type="consumer", group_state=self.group_state)
        return resp, []

    def offset_fetch(self, body, payloads):
        resp = offset_pb2.OffsetFetchResponse()
        if body.group_id != "g":
            return resp, []
        wanted = {(t.name, p) for t in body.topics for p in t.partition_indexes} or None
        for (topic, p), off in sorted(self.commits.items()):
            if wanted is None or (topic, p) in wanted:
                rt = resp.topics.add(name=topic)
                rt.partitions.add(partition_index=p, committed_offset=off, metadata="m",
                                  committed_leader_epoch=-1)
        return resp, []

    def offset_commit(self, body, payloads):
        resp = offset_pb2.OffsetCommitResponse()
        if self.group_state != "Empty":
            return offset_pb2.OffsetCommitResponse(error_code=E.Value("UNKNOWN_MEMBER_ID")), []
        for t in body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                self.commits[(t.name, p.partition_index)] = p.committed_offset
                rt.partitions.add(partition_index=p.partition_index)
        return resp, []

    def list_offsets(self, body, payloads):
        resp = list_offsets_pb2.ListOffsetsResponse()
        for t in body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                off = {-1: self.ends[p.partition], -2: 2}.get(p.timestamp, 4)
                rt.partitions.add(partition=p.partition, offset=off, leader_epoch=3,
                                  timestamp=-1 if p.timestamp < 0 else p.timestamp + 1)
        return resp, []

    def leave(self, body, payloads):
        code = 0 if body.member_id == "m-1" else E.Value("UNKNOWN_MEMBER_ID")
        return group_pb2.LeaveGroupResponse(error_code=code), []


@pytest.fixture
def cluster():
    return Cluster()


def test_settings_are_kafka_pythons(cluster):
    with pytest.raises(errors.KafkaConfigurationError, match="Unrecognized configs"):
        cluster.client(no_such_setting=1)
    with pytest.raises(errors.KafkaConfigurationError, match="CurveZMQ"):
        cluster.client(security_protocol="SASL_SSL")
    with cluster.client(reconnect_backoff_ms=10, ssl_cafile="x", security_protocol="PLAINTEXT",
                        client_id="me") as admin:
        assert admin.config["client_id"] == "me" and admin.config["bootstrap_timeout_ms"] == 30000
        assert isinstance(admin.riverbed_admin, riverbed.Admin)


def test_topics_in_kafka_python3s_shapes(cluster):
    with cluster.client() as admin:
        created = admin.create_topics({"a": {"num_partitions": 2, "replication_factor": 1,
                                             "configs": {"retention.ms": 5}}})
        assert created == {"topics": [{"name": "a", "topic_id": None, "error_code": 0,
                                       "error_message": None, "topic_config_error_code": 0,
                                       "num_partitions": 2, "replication_factor": 1}]}
        assert cluster.topics["a"] == {"retention.ms": "5"}
        assert admin.create_topics(["b"])["topics"][0]["num_partitions"] == 3  # the default
        assert admin.create_topics([NewTopic("c", 1, 1)])["topics"][0]["name"] == "c"
        with pytest.raises(ValueError, match="No valid topics"):
            admin.create_topics([])
        with pytest.raises(errors.TopicAlreadyExistsError):
            admin.create_topics(["a", "d"])
        # raise_errors=False: each topic's own answer
        both = admin.create_topics(["a", "e"], raise_errors=False)["topics"]
        assert [(t["name"], t["error_code"], t["num_partitions"]) for t in both] == \
            [("a", 36, -1), ("e", 0, 3)]
        assert admin.list_topics() == sorted(cluster.topics)
        (a, nope) = admin.describe_topics(["a", "nope"])
        assert a["partitions"][0] == {"error_code": 0, "partition_index": 0, "leader_id": 1,
                                      "leader_epoch": 3, "replica_nodes": [1], "isr_nodes": [1],
                                      "offline_replicas": []}
        assert (nope["name"], nope["error_code"], nope["partitions"]) == ("nope", 3, [])
        with pytest.raises(errors.UnknownTopicIdError):
            admin.describe_topics([uuid.uuid4()])
        gone = admin.delete_topics(["b", "nope", uuid.UUID(int=1)], raise_errors=False)
        assert [(t["name"], t["error_code"]) for t in gone["topics"]] == \
            [("b", 0), ("nope", 3), (None, 100)]
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            admin.delete_topics(["nope"])
        assert admin.describe_cluster() == {
            "cluster_id": "c1", "controller_id": 5, "authorized_operations": None,
            "brokers": [{"broker_id": 1, "host": "h1", "port": 9001, "rack": None}]}


def test_create_partitions_answers_kafka_pythons_response(cluster):
    with cluster.client() as admin:
        resp = admin.create_partitions({"t": 4, "a-none": NewPartitions(2)}, raise_errors=False)
        assert isinstance(resp, ProtocolStruct)
        assert repr(resp).startswith("CreatePartitionsResponse(version=3, throttle_time_ms=0, "
                                     "results=[CreatePartitionsTopicResult(version=3, name='t', "
                                     "error_code=0, error_message=None)")
        assert resp.to_dict()["results"][1]["error_code"] == 3
        with pytest.raises(errors.InvalidPartitionsError):
            admin.create_partitions({"t": {"count": 1, "assignments": []}})
        with pytest.raises(TypeError):
            admin.create_partitions({"t": "six"})


def test_configs_described_and_altered_as_kafka_python3(cluster):
    with cluster.client() as admin:
        topic = ConfigResource(ConfigResourceType.TOPIC, "t")
        modified = admin.describe_configs([topic])
        assert modified == {"topic": {"t": {"retention.ms": {
            "value": "1000", "read_only": False, "config_source": "DYNAMIC_TOPIC_CONFIG",
            "is_sensitive": False, "synonyms": [], "config_type": "UNKNOWN",
            "documentation": None}}}}
        every = admin.describe_configs([topic], config_filter="all")["topic"]["t"]
        assert every["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"
        assert admin.describe_configs([topic], config_filter="default")["topic"]["t"].keys() == \
            {"cleanup.policy", "segment.ms"}
        assert admin.describe_configs([ConfigResource("TOPIC", "t", ["cleanup.policy"])],
                                      config_filter="all")["topic"]["t"].keys() == {"cleanup.policy"}
        assert admin.describe_configs([ConfigResource("TOPIC", "nope"),
                                       ConfigResource("BROKER", "1")]) == \
            {"topic": {"nope": {}}, "broker": {"1": {}}}
        with pytest.raises(ValueError, match="integer"):
            admin.describe_configs([ConfigResource("BROKER", "one")])

        assert admin.alter_configs([ConfigResource("TOPIC", "t", {
            "retention.ms": (AlterConfigOp.DELETE, None), "segment.ms": 5,
            "cleanup.policy": ("APPEND", "compact")})]) == {"topic": {"t": "OK"}}
        assert cluster.alters[-1] == ("t", {"segment.ms": "5", "cleanup.policy": "delete,compact"},
                                      ["retention.ms"], False)
        assert admin.alter_configs([ConfigResource("TOPIC", "t", {"segment.ms": "bad"})]) == \
            {"topic": {"t": "[Error 40] InvalidConfigurationError: not a number"}}
        with pytest.raises(ValueError, match="Unrecognized configs"):
            admin.alter_configs([ConfigResource("TOPIC", "t", {"no.such": "1"})])
        with pytest.raises(ValueError, match="SET only"):
            admin.alter_configs([ConfigResource("TOPIC", "t", {
                "segment.ms": (AlterConfigOp.DELETE, None)})], incremental=False)
        assert admin.reset_configs([ConfigResource("TOPIC", "t")]) == {"topic": {"t": "OK"}}
        assert sorted(cluster.alters[-1][2]) == ["cleanup.policy", "segment.ms"]


def test_groups_and_offsets_as_kafka_python3(cluster):
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    with cluster.client() as admin:
        assert admin.list_groups() == [{"group_id": "g", "protocol_type": "consumer",
                                        "group_state": "Empty"}]
        assert admin.list_groups(states_filter=["stable"]) == []
        with pytest.raises(errors.IncompatibleBrokerVersion):
            admin.list_groups(types_filter=["classic"])
        assert admin.list_group_offsets({"g": None}) == {"g": {tp0: OffsetAndMetadata(7, "m", -1)}}
        assert admin.list_group_offsets({"g": [tp1, tp0], "x": None}) == {
            "g": {tp1: OffsetAndMetadata(-1, "", -1), tp0: OffsetAndMetadata(7, "m", -1)},
            "x": {}}
        assert admin.list_group_offsets("g") == admin.list_group_offsets(["g"])
        assert admin.alter_group_offsets("g", {tp1: OffsetAndMetadata(3, "", None)}) == \
            {tp1: errors.NoError}
        assert admin.list_partition_offsets({tp0: OffsetSpec.LATEST, tp1: 1000}) == {
            tp0: OffsetAndTimestamp(20, -1, 3), tp1: OffsetAndTimestamp(4, 1001, 3)}
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            admin.list_partition_offsets({TopicPartition("t", 9): OffsetSpec.EARLIEST})
        reset = admin.reset_group_offsets("g", {tp0: OffsetSpec.EARLIEST, tp1: 99})
        assert reset == {tp0: {"error": errors.NoError, "offset": 2},
                         tp1: {"error": errors.NoError, "offset": 5}}       # clamped to latest
        assert admin.reset_group_offsets("g", {tp0: OffsetTimestamp(50)})[tp0]["offset"] == 4
        assert cluster.commits[("t", 0)] == 4
        cluster.group_state = "Stable"      # a group with members: every partition refused
        assert admin.alter_group_offsets("g", {tp0: OffsetAndMetadata(1), tp1: 1}) == \
            {tp0: errors.UnknownMemberIdError, tp1: errors.UnknownMemberIdError}
        assert admin.remove_group_members("g", [MemberToRemove("m-1"), MemberToRemove("m-2")]) \
            == {"m-1": errors.NoError, "m-2": errors.UnknownMemberIdError}
        # kafka-python 2.x's names, their 2.x shapes
        assert admin.list_consumer_groups() == [("g", "consumer")]
        assert admin.list_consumer_group_offsets("g")[tp0].offset == 4


def test_calls_the_sdk_does_not_serve_yet_raise_incompatible_broker_version(cluster):
    # (delete_records, delete_groups and the ACL calls: test_admin_records_groups_acls.py)
    with cluster.client() as admin:
        for call in (lambda: admin.list_transactions(), lambda: admin.describe_features(),
                     lambda: admin.describe_metadata_quorum(),
                     lambda: admin.describe_user_scram_credentials(),
                     lambda: admin.list_config_resources()):
            with pytest.raises(errors.IncompatibleBrokerVersion, match="does not serve"):
                call()
