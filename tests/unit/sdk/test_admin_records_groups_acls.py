"""Riverbed's Admin (and riverbed.aio's) deleting records and groups and managing ACLs over the
gateway's APIs (DELETE_RECORDS, DELETE_GROUPS, DESCRIBE/CREATE/DELETE_ACLS), and
KafkaAdminClient's kafka-python 3.0 shapes of them, against a scripted gateway. Its ACLs are
kept by the gateway's own pure ACL core (services/gateway/core/acl_admin.py) over an in-memory
snapshot, so filters match here as they do on a fleet."""
from __future__ import annotations

import asyncio

import pytest
from sdk_fakes import FakeGateway

import riverbed
import riverbed.aio
from riverbed import errors
from riverbed._proto.v1 import acl_pb2, delete_records_pb2, group_pb2, header_pb2, metadata_pb2
from riverbed.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType,
                            ACLResourcePatternType, ResourcePattern, ResourcePatternFilter,
                            ResourceType)
from riverbed.structs import TopicPartition
from services.gateway.core import acl_admin

ApiKey = header_pb2.ApiKey
E = errors.ErrorCode
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
ALLOW = ACLPermissionType.ALLOW
ANY_RESOURCE = ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY)


def of(principal=None, operation=ACLOperation.ANY, resource=ANY_RESOURCE):
    return ACLFilter(principal, None, operation, ACLPermissionType.ANY, resource)


class Gateway:
    """Partitions with a high watermark and log start, groups with members or offsets, and ACLs;
    `fail_once`: (api, key) answered a retriable error the first time."""

    def __init__(self):
        self.hw = {("t", 0): 20, ("t", 1): 8}
        self.log_start = {("t", 0): 0, ("t", 1): 0}
        self.groups = {"idle": 0, "busy": 2}            # group -> members
        self.offsets_only = {"standalone"}
        self.acls: dict = {}                           # the ACL core's snapshot
        self.fail_once: set = set()
        self.acl_envelope_error = 0
        self.gw = FakeGateway({
            ApiKey.METADATA: self.metadata, ApiKey.DELETE_RECORDS: self.delete_records,
            ApiKey.DELETE_GROUPS: self.delete_groups, ApiKey.DESCRIBE_ACLS: self.describe_acls,
            ApiKey.CREATE_ACLS: self.create_acls, ApiKey.DELETE_ACLS: self.delete_acls,
            ApiKey.DESCRIBE_CLUSTER: lambda b, p: (metadata_pb2.DescribeClusterResponse(), [])})

    def admin(self, **kw):
        return riverbed.Admin("tcp://gw:1", _channel_factory=self.gw.factory, retry_backoff_ms=1,
                              **kw)

    def kafka_python(self):
        return riverbed.KafkaAdminClient(bootstrap_servers="tcp://gw:1", retry_backoff_ms=1,
                                         _channel_factory=self.gw.factory)

    def sent(self, api):
        return [body for a, body, _ in self.gw.requests if a == api]

    def _once(self, key) -> bool:
        if key in self.fail_once:
            self.fail_once.discard(key)
            return True
        return False

    def metadata(self, body, payloads):
        resp = metadata_pb2.MetadataResponse()
        for name in body.topics or ["t"]:
            t = resp.topics.add(name=name)
            if name != "t":
                t.error_code = E.Value("UNKNOWN_TOPIC_OR_PARTITION")
                continue
            for p in (0, 1):
                t.partitions.add(partition=p, leader=1, leader_epoch=1, replicas=[1], isr=[1])
        return resp, []

    def delete_records(self, body, payloads):
        resp = delete_records_pb2.DeleteRecordsResponse()
        for t in body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                out = rt.partitions.add(partition=p.partition, low_watermark=-1)
                tp = (t.name, p.partition)
                if tp not in self.hw:
                    out.error_code = E.Value("UNKNOWN_TOPIC_OR_PARTITION")
                elif self._once(("records", tp)):
                    out.error_code = E.Value("NOT_LEADER_FOR_PARTITION")
                elif p.offset > self.hw[tp]:
                    out.error_code = E.Value("OFFSET_OUT_OF_RANGE")
                    out.error_message = f"up to the high watermark {self.hw[tp]}"
                else:
                    offset = self.hw[tp] if p.offset == -1 else p.offset
                    self.log_start[tp] = max(self.log_start[tp], offset)
                    out.low_watermark = self.log_start[tp]
        return resp, []

    def delete_groups(self, body, payloads):
        resp = group_pb2.DeleteGroupsResponse()
        for gid in body.group_ids:
            r = resp.results.add(group_id=gid)
            if self._once(("group", gid)):
                r.error_code = E.Value("COORDINATOR_LOAD_IN_PROGRESS")
            elif self.groups.get(gid):
                r.error_code, r.error_message = E.Value("NON_EMPTY_GROUP"), "it has members"
            elif gid in self.groups or gid in self.offsets_only:
                self.groups.pop(gid, None)
                self.offsets_only.discard(gid)
            else:
                r.error_code = E.Value("GROUP_ID_NOT_FOUND")
        return resp, []

    def describe_acls(self, body, payloads):
        if self.acl_envelope_error:
            return self.acl_envelope_error
        return acl_admin.describe(self.acls, body.filter), []

    def create_acls(self, body, payloads):
        if self.acl_envelope_error:
            return self.acl_envelope_error
        plan = acl_admin.plan_create(body.creations)
        for pattern, (entries, _) in plan.adds.items():
            self.acls[pattern] = frozenset(self.acls.get(pattern, ())) | set(entries)
        return plan.response, []

    def delete_acls(self, body, payloads):
        if self.acl_envelope_error:
            return self.acl_envelope_error
        plan = acl_admin.plan_delete(self.acls, body.filters)
        for pattern, (entries, _) in plan.removes.items():
            left = self.acls[pattern] - entries
            if left:
                self.acls[pattern] = left
            else:
                del self.acls[pattern]
        return plan.response, []


@pytest.fixture
def gateway():
    return Gateway()


class RecordsToDelete:                  # aiokafka's (riverbed does not import aiokafka)
    def __init__(self, before_offset):
        self.before_offset = before_offset


# -- Riverbed's Admin ----------------------------------------------------------------------------

def test_delete_records_answers_low_watermarks_and_retries_a_moving_leader(gateway):
    gateway.fail_once.add(("records", ("t", 1)))
    with gateway.admin() as admin:
        assert admin.delete_records({T0: 4, T1: -1}) == {T0: 4, T1: 8}     # -1: the HW
        assert len(gateway.sent(ApiKey.DELETE_RECORDS)) == 2               # t-1 asked again
        assert [tp.partition for t in gateway.sent(ApiKey.DELETE_RECORDS)[1].topics
                for tp in t.partitions] == [1]
        assert gateway.sent(ApiKey.METADATA)                               # after a refresh
        assert admin.delete_records({("t", 0): RecordsToDelete(6)}) == {T0: 6}
        assert gateway.sent(ApiKey.DELETE_RECORDS)[-1].timeout_ms == 30000
        admin.delete_records({T0: 6}, timeout_ms=500)
        assert gateway.sent(ApiKey.DELETE_RECORDS)[-1].timeout_ms == 500


def test_delete_records_errors_are_typed_and_name_the_partition(gateway):
    with gateway.admin() as admin:
        with pytest.raises(errors.OffsetOutOfRangeError) as e:
            admin.delete_records({T0: 2, T1: 99})
        assert (e.value.topic, e.value.partition) == ("t", 1) and "high watermark" in str(e.value)
        assert gateway.log_start[("t", 0)] == 2           # the other partition's went ahead
        asked = len(gateway.sent(ApiKey.DELETE_RECORDS))
        with pytest.raises(errors.UnknownTopicOrPartitionError, match=r"\[nope-0\]"):
            admin.delete_records({TopicPartition("nope", 0): 1})
        assert len(gateway.sent(ApiKey.DELETE_RECORDS)) == asked + 1      # not retried
        with pytest.raises(TypeError, match="must be an int"):
            admin.delete_records({T0: "5"})
        assert len(gateway.sent(ApiKey.DELETE_RECORDS)) == asked + 1      # nothing sent


def test_delete_groups_deletes_each_group_on_its_own_with_typed_errors(gateway):
    gateway.fail_once.add(("group", "idle"))
    with gateway.admin() as admin:
        admin.delete_groups(["idle", "idle", "standalone"])       # a loading coordinator: again
        assert "idle" not in gateway.groups and not gateway.offsets_only
        assert list(gateway.sent(ApiKey.DELETE_GROUPS)[0].group_ids) == ["idle", "standalone"]
        assert list(gateway.sent(ApiKey.DELETE_GROUPS)[1].group_ids) == ["idle"]
        with pytest.raises(errors.NonEmptyGroupError, match="'busy'.*members"):
            admin.delete_groups(["busy"])
        with pytest.raises(errors.GroupIdNotFoundError, match="'never'"):
            admin.delete_groups(["never"])
        with pytest.raises(TypeError, match="list of group ids"):
            admin.delete_groups("busy")
        results = admin._delete_groups_results(["busy", "never", "busy"])
        assert {g: type(e) for g, e in results.items()} == {
            "busy": errors.NonEmptyGroupError, "never": errors.GroupIdNotFoundError}


def test_acls_created_described_and_deleted_with_kafka_pythons_types(gateway):
    orders = ResourcePattern(ResourceType.TOPIC, "orders")
    prefixed = ResourcePattern(ResourceType.TOPIC, "ord", ACLResourcePatternType.PREFIXED)
    read = ACL("User:alice", "*", ACLOperation.READ, ALLOW, orders)
    write = ACL("User:bob", "10.0.0.1", ACLOperation.WRITE, ACLPermissionType.DENY, prefixed)
    group = ACL("User:alice", "*", ACLOperation.READ, ALLOW,
                ResourcePattern(ResourceType.GROUP, "billing"))
    with gateway.admin() as admin:
        assert admin.describe_acls() == []
        admin.create_acls([read, write, group])
        admin.create_acls([read])                                  # exists: nothing changes
        assert admin.describe_acls() == [group, read, write]       # by resource, then entry
        assert admin.describe_acls(of("User:alice")) == [group, read]
        match = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                          ResourcePatternFilter(ResourceType.TOPIC, "orders",
                                                ACLResourcePatternType.MATCH))
        assert admin.describe_acls(match) == [read, write]         # literal and prefix of it
        with pytest.raises(errors.InvalidRequestError):             # an UNKNOWN operation
            admin.describe_acls(of("User:alice", ACLOperation.UNKNOWN))
        token = ACL("User:x", "*", ACLOperation.READ, ALLOW,
                    ResourcePattern(ResourceType.DELEGATION_TOKEN, "t"))
        carol = ACL("User:carol", "*", ACLOperation.READ, ALLOW, orders)
        with pytest.raises(errors.InvalidRequestError, match="delegation tokens"):
            admin.create_acls([token, carol])
        assert admin.describe_acls(of("User:carol")) == [carol]      # each one on its own
        assert admin._create_acls_results([token])[0][1].code == E.Value("INVALID_REQUEST")
        with pytest.raises(errors.IllegalArgumentError):
            admin.create_acls([of("User:alice")])                  # a filter is not an ACL
        with pytest.raises(errors.IllegalArgumentError):
            admin.describe_acls(read.resource_pattern)              # type: ignore[arg-type]

        removed = admin.delete_acls([of("User:alice", ACLOperation.READ), of("User:alice")])
        assert removed == [group, read]                             # once each
        assert admin.delete_acls([of("User:nobody")]) == []
        assert admin.describe_acls() == [carol, write]
        with pytest.raises(errors.InvalidRequestError):
            admin.delete_acls([of(None, ACLOperation.UNKNOWN)])
        gateway.acl_envelope_error = E.Value("CLUSTER_AUTHORIZATION_FAILED")
        with pytest.raises(errors.ClusterAuthorizationFailedError):
            admin.describe_acls()
        with pytest.raises(errors.ClusterAuthorizationFailedError):
            admin.create_acls([read])


def test_acls_from_a_newer_gateway_read_as_unknown():
    from riverbed.acl_bindings import acl_from_pb
    acl = acl_from_pb(acl_pb2.AclBinding(resource_type=99, resource_name="x", pattern_type=3,
                                         principal="User:a", host="*", operation=77,
                                         permission_type=3))
    assert (acl.resource_pattern.resource_type, acl.operation) == (ResourceType.UNKNOWN,
                                                                   ACLOperation.UNKNOWN)


def test_the_asyncio_admin_awaits_the_same_calls(gateway):
    async def main():
        admin = riverbed.aio.Admin("tcp://gw:1")
        admin._core = gateway.admin()     # the sync Admin it drives, over the scripted gateway
        try:
            assert await admin.delete_records({T0: 3}) == {T0: 3}
            await admin.delete_groups(["idle"])
            acl = ACL("User:a", "*", ACLOperation.READ, ALLOW,
                      ResourcePattern(ResourceType.TOPIC, "t"))
            await admin.create_acls([acl])
            assert await admin.describe_acls(of("User:a")) == [acl]
            assert await admin.delete_acls([of("User:a")]) == [acl]
        finally:
            await admin.close()
    asyncio.run(main())
    assert "idle" not in gateway.groups


# -- kafka-python 3.0's shapes ------------------------------------------------------------------

def test_kafka_python_delete_records_shapes_and_errors(gateway):
    with gateway.kafka_python() as admin:
        assert admin.delete_records({T0: 4, T1: 2}) == {
            T0: {"partition_index": 0, "low_watermark": 4, "error_code": 0},
            T1: {"partition_index": 1, "low_watermark": 2, "error_code": 0}}
        with pytest.raises(errors.OffsetOutOfRangeError,
                           match="Error deleting records from topic t partition 1"):
            admin.delete_records({T0: 5, T1: 99})
        assert gateway.log_start[("t", 0)] == 5
        with pytest.raises(errors.BrokerResponseError, match=r"t\(partition=0\): "
                           r"OffsetOutOfRangeError, t\(partition=1\): OffsetOutOfRangeError"):
            admin.delete_records({T0: 50, T1: 99})
        asked = len(gateway.sent(ApiKey.DELETE_RECORDS))
        with pytest.raises(errors.UnknownTopicOrPartitionError, match="not known"):
            admin.delete_records({T0: 6, TopicPartition("t", 7): 1})
        assert len(gateway.sent(ApiKey.DELETE_RECORDS)) == asked     # nothing deleted
        assert admin.delete_records({}) == {}


def test_kafka_python_delete_groups_and_2x_delete_consumer_groups(gateway):
    with gateway.kafka_python() as admin:
        assert admin.delete_groups(["idle", "busy", "never"]) == {
            "idle": "OK", "busy": "NonEmptyGroupError", "never": "GroupIdNotFoundError"}
        assert admin.delete_consumer_groups(["standalone", "idle"]) == [
            ("standalone", errors.NoError), ("idle", errors.GroupIdNotFoundError)]


def test_kafka_python_acl_calls_shapes(gateway):
    orders = ResourcePattern(ResourceType.TOPIC, "orders")
    read = ACL("User:alice", "*", ACLOperation.READ, ALLOW, orders)
    token = ACL("User:x", "*", ACLOperation.READ, ALLOW,
                ResourcePattern(ResourceType.DELEGATION_TOKEN, "t"))
    with gateway.kafka_python() as admin:
        assert admin.create_acls([read, token]) == {"succeeded": [read],
                                                    "failed": [errors.InvalidRequestError]}
        assert admin.describe_acls(of("User:alice")) == ([read], errors.NoError)
        nobody = of("User:nobody")
        assert admin.delete_acls([of("User:alice"), nobody]) == [
            (of("User:alice"), [read], errors.NoError), (nobody, [], errors.NoError)]
        with pytest.raises(errors.IllegalArgumentError):
            admin.create_acls([nobody])
        with pytest.raises(errors.IllegalArgumentError):
            admin.delete_acls([read.resource_pattern])
        gateway.acl_envelope_error = E.Value("CLUSTER_AUTHORIZATION_FAILED")
        assert admin.create_acls([read]) == {"succeeded": [],
                                             "failed": [errors.ClusterAuthorizationFailedError]}
        assert admin.delete_acls([nobody]) == [(nobody, [], errors.ClusterAuthorizationFailedError)]
        with pytest.raises(errors.ClusterAuthorizationFailedError):
            admin.describe_acls(nobody)
