"""Kafka's request/response framing and the APIs this listener serves: pure functions over bytes.

    size     int32, big-endian: the bytes that follow (checked against socket.request.max.bytes
             by the shell before anything else is read)
    request  header (v1: api_key int16, api_version int16, correlation_id int32, client_id
             nullable string; v2 = v1 + tagged fields, for flexible versions) + body
    response header (v0: correlation_id int32; v1 = v0 + tagged fields, for flexible versions;
             ApiVersions always answers with v0, KIP-511) + body

Headers and bodies are read and written with kio (Aiven's codec generated from Kafka's JSON
message schemas: every API and version, flexible versions and tagged fields). Bodies are read
by kio's native reader; record batches stay opaque `bytes` (the `records` fields) and are never
decoded or re-encoded here.

`SERVED` is the table ApiVersions advertises: each API from KIP-896's baseline (Kafka 2.1's
versions, the oldest Kafka 4 still serves) up to the newest this gateway answers correctly.
Produce is advertised from v0 although v0-v2 are refused (KAFKA-18659: librdkafka sends
compressed batches only when Produce v0 is listed; Kafka 4 lists it too and refuses it).
"""
from __future__ import annotations

import dataclasses
import io
import struct
import types
import typing
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer

from services.gateway.kafka.fast import EncodedResponse

# Kafka's API keys (the numbers on Kafka's wire; Riverbed's own ApiKey numbers differ).
PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
SASL_HANDSHAKE = 17
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
DELETE_RECORDS = 21
INIT_PRODUCER_ID = 22
OFFSET_FOR_LEADER_EPOCH = 23
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
TXN_OFFSET_COMMIT = 28
DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31
DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
DESCRIBE_LOG_DIRS = 35
CREATE_PARTITIONS = 37
SASL_AUTHENTICATE = 36
DELETE_GROUPS = 42
ELECT_LEADERS = 43
INCREMENTAL_ALTER_CONFIGS = 44
OFFSET_DELETE = 47
DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51
DESCRIBE_CLUSTER = 60
DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66

API_NAMES = {
    PRODUCE: "Produce", FETCH: "Fetch", LIST_OFFSETS: "ListOffsets", METADATA: "Metadata",
    OFFSET_COMMIT: "OffsetCommit", OFFSET_FETCH: "OffsetFetch",
    FIND_COORDINATOR: "FindCoordinator", JOIN_GROUP: "JoinGroup", HEARTBEAT: "Heartbeat",
    LEAVE_GROUP: "LeaveGroup", SYNC_GROUP: "SyncGroup", DESCRIBE_GROUPS: "DescribeGroups",
    LIST_GROUPS: "ListGroups", API_VERSIONS: "ApiVersions", CREATE_TOPICS: "CreateTopics",
    DELETE_TOPICS: "DeleteTopics", INIT_PRODUCER_ID: "InitProducerId",
    OFFSET_FOR_LEADER_EPOCH: "OffsetForLeaderEpoch", DESCRIBE_CONFIGS: "DescribeConfigs",
    CREATE_PARTITIONS: "CreatePartitions", DELETE_GROUPS: "DeleteGroups",
    DESCRIBE_CLUSTER: "DescribeCluster", SASL_HANDSHAKE: "SaslHandshake",
    SASL_AUTHENTICATE: "SaslAuthenticate",
    DESCRIBE_USER_SCRAM_CREDENTIALS: "DescribeUserScramCredentials",
    ALTER_USER_SCRAM_CREDENTIALS: "AlterUserScramCredentials",
    DESCRIBE_CLUSTER: "DescribeCluster", DELETE_RECORDS: "DeleteRecords",
    DESCRIBE_ACLS: "DescribeAcls", CREATE_ACLS: "CreateAcls", DELETE_ACLS: "DeleteAcls",
    ALTER_CONFIGS: "AlterConfigs", DESCRIBE_LOG_DIRS: "DescribeLogDirs",
    ELECT_LEADERS: "ElectLeaders", INCREMENTAL_ALTER_CONFIGS: "IncrementalAlterConfigs",
    OFFSET_DELETE: "OffsetDelete", ADD_PARTITIONS_TO_TXN: "AddPartitionsToTxn",
    ADD_OFFSETS_TO_TXN: "AddOffsetsToTxn", END_TXN: "EndTxn", TXN_OFFSET_COMMIT: "TxnOffsetCommit",
    DESCRIBE_TRANSACTIONS: "DescribeTransactions", LIST_TRANSACTIONS: "ListTransactions",
}

# api key -> (lowest, highest) version served. Why each ceiling (the next version needs what
# Riverbed does not have yet):
#   Produce 11     v12 is KIP-890's transactions part 2, v13 names topics by id (KIP-516)
#   Fetch 12       v13+ names topics by id
#   ListOffsets 6  v7 adds MAX_TIMESTAMP (-3), v8 EARLIEST_LOCAL (-4): not served
#   OffsetForLeaderEpoch 4   the newest (v2 is Kafka 4's oldest)
#   Metadata 12    v13 adds a top-level error code for KIP-1102's rebootstrap (not needed)
#   OffsetCommit 9, OffsetFetch 9   v10 names topics by id
#   JoinGroup 9, SyncGroup 5, Heartbeat 4, LeaveGroup 5, DescribeGroups 5 (v6: KIP-1043),
#   ListGroups 4 (v5: group types), FindCoordinator 6, CreateTopics 7, DeleteTopics 6,
#   CreatePartitions 3, DescribeConfigs 4, DescribeCluster 1 (v2: fenced brokers),
#   InitProducerId 5 (v6: KIP-939's two-phase commit), ApiVersions 4, DeleteRecords 2,
#   DeleteGroups 2, DescribeAcls / CreateAcls / DeleteAcls 3 (from v1: Kafka 4 dropped v0),
#   AlterConfigs 2, IncrementalAlterConfigs 1, DescribeLogDirs 5, ElectLeaders 2,
#   OffsetDelete 0: the newest Kafka has.
#   Transactions (KIP-98, transaction.version 1: the client adds its partitions):
#   AddPartitionsToTxn 3 (v4+ are broker-to-broker: KIP-890's batched verification, which
#   gateways do not do), AddOffsetsToTxn 4, EndTxn 4 and TxnOffsetCommit 4 (v5: KIP-890 part 2,
#   transaction.version 2, which needs Produce v12 and an epoch bump per transaction),
#   DescribeTransactions 0 (the only one), ListTransactions 1 (v2: KIP-1152's id pattern).
#   SaslHandshake 0-1 (v0: bare token frames follow, before KIP-152), SaslAuthenticate 0-2:
#   every version (answered on the connection itself: listener.py with sasl.py).
#   Describe/AlterUserScramCredentials 0 (KIP-554; the only version): answered by the gateway
#   from its credentials and ACLs (scram_admin.py).
SERVED: dict[int, tuple[int, int]] = {
    PRODUCE: (3, 11),
    FETCH: (4, 12),
    LIST_OFFSETS: (1, 6),
    METADATA: (0, 12),
    OFFSET_COMMIT: (2, 9),
    OFFSET_FETCH: (1, 9),
    FIND_COORDINATOR: (0, 6),
    JOIN_GROUP: (0, 9),
    HEARTBEAT: (0, 4),
    LEAVE_GROUP: (0, 5),
    SYNC_GROUP: (0, 5),
    DESCRIBE_GROUPS: (0, 5),
    LIST_GROUPS: (0, 4),
    API_VERSIONS: (0, 4),
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (1, 6),
    INIT_PRODUCER_ID: (0, 5),
    OFFSET_FOR_LEADER_EPOCH: (2, 4),
    DESCRIBE_CONFIGS: (1, 4),
    CREATE_PARTITIONS: (0, 3),
    DESCRIBE_CLUSTER: (0, 1),
    SASL_HANDSHAKE: (0, 1),
    SASL_AUTHENTICATE: (0, 2),
    DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    DELETE_RECORDS: (0, 2),
    DELETE_GROUPS: (0, 2),
    DESCRIBE_ACLS: (1, 3),
    CREATE_ACLS: (1, 3),
    DELETE_ACLS: (1, 3),
    ALTER_CONFIGS: (0, 2),
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
    DESCRIBE_LOG_DIRS: (1, 5),
    ELECT_LEADERS: (0, 2),
    OFFSET_DELETE: (0, 0),
    ADD_PARTITIONS_TO_TXN: (0, 3),
    ADD_OFFSETS_TO_TXN: (0, 4),
    END_TXN: (0, 4),
    TXN_OFFSET_COMMIT: (0, 4),
    DESCRIBE_TRANSACTIONS: (0, 0),
    LIST_TRANSACTIONS: (0, 1),
}
# What ApiVersions lists, where it differs from SERVED (KAFKA-18659, see the module doc).
ADVERTISED_MIN = {PRODUCE: 0}

_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")
_read_header_v1 = entity_reader(RequestHeaderV1)
_read_header_v2 = entity_reader(RequestHeaderV2)
_write_header_v0 = entity_writer(ResponseHeaderV0)
_write_header_v1 = entity_writer(ResponseHeaderV1)


class BadRequest(Exception):
    """A request this listener cannot answer: Kafka closes the connection for these (a broken
    frame, an unknown API or version). `correlation_id` when it was readable."""

    def __init__(self, message: str, correlation_id: int | None = None,
                 api_key: int | None = None, api_version: int | None = None):
        super().__init__(message)
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.api_version = api_version


@dataclass(frozen=True, slots=True)
class KafkaRequest:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    body: Any                  # the kio request entity of that API and version
    size: int                  # bytes of the request (header + body)

    @property
    def name(self) -> str:
        return API_NAMES.get(self.api_key, str(self.api_key))


def frame_size(prefix: bytes) -> int:
    """The size in the 4-byte prefix of a frame (may be negative: the caller refuses it)."""
    return _SIZE.unpack(prefix)[0]


def peek_api(frame: bytes | memoryview) -> tuple[int, int, int | None]:
    """(api_key, api_version, correlation_id or None) of a request frame, without decoding
    anything else; BadRequest when it is too short for a header."""
    if len(frame) < 4:
        raise BadRequest(f"a request of {len(frame)} bytes has no header")
    key, version = _KEY_VERSION.unpack_from(frame, 0)
    corr = _SIZE.unpack_from(frame, 4)[0] if len(frame) >= 8 else None
    return key, version, corr


def is_served(api_key: int, api_version: int) -> bool:
    served = SERVED.get(api_key)
    return served is not None and served[0] <= api_version <= served[1]


_READERS: dict[tuple[int, int], tuple[Any, Any]] = {}
_WRITERS: dict[type, Any] = {}


# entity class -> ((field, entity class of its elements or None), ...) for the arrays, structs,
# strings and bytes whose type does not admit None: kio reads a null (a length of -1) into None
# whatever the schema says.
_NON_NULL: dict[type, tuple[tuple[str, type | None], ...]] = {}


def _non_null_fields(cls: type) -> tuple[tuple[str, type | None], ...]:
    got = _NON_NULL.get(cls)
    if got is None:
        hints = typing.get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):
            hint = hints[f.name]
            args = typing.get_args(hint)
            if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
                continue                                   # nullable in the schema
            while hasattr(hint, "__supertype__"):          # NewType: TopicName is a str
                hint = hint.__supertype__
            if typing.get_origin(hint) is tuple:           # an array
                element = args[0] if args and dataclasses.is_dataclass(args[0]) else None
                # elements with nothing to check are not visited
                out.append((f.name, element if element and _non_null_fields(element) else None))
            elif dataclasses.is_dataclass(hint) or (isinstance(hint, type)
                                                    and issubclass(hint, (str, bytes))):
                out.append((f.name, None))                 # a struct, a string, bytes
            # numbers, booleans, uuids: never read as None
        got = _NON_NULL[cls] = tuple(out)
    return got


def check_non_null(entity: Any) -> str | None:
    """The path of the first field that the schema says is not nullable but was read as null
    (None), or None when there is none. Kafka refuses such a request as malformed."""
    for name, element in _non_null_fields(type(entity)):
        value = getattr(entity, name)
        if value is None:
            return name
        if element is not None:
            for item in value:
                bad = check_non_null(item)
                if bad is not None:
                    return f"{name}[].{bad}"
    return None


def _readers(key: int, version: int) -> tuple[Any, Any]:
    """(header reader, body reader) of a served API version: kio resolves a schema by module
    name on every lookup, which cost more than reading a small request."""
    got = _READERS.get((key, version))
    if got is None:
        schema = load_request_schema(key, version)
        got = (_read_header_v2 if schema.__header_schema__ is RequestHeaderV2 else _read_header_v1,
               entity_reader(schema))
        _READERS[(key, version)] = got
    return got


def decode_request(frame: bytes | memoryview) -> KafkaRequest:
    """A whole request frame (without its size prefix) -> KafkaRequest. BadRequest for an API or
    version not in SERVED (ApiVersions of an unknown version excepted: the caller answers it,
    KIP-511) and for anything malformed."""
    key, version, corr = peek_api(frame)
    if not is_served(key, version) and key != API_VERSIONS:
        raise BadRequest(f"api {key} ({API_NAMES.get(key, 'unknown')}) version {version} is "
                         "not served", corr, key, version)
    if key == API_VERSIONS and not is_served(key, version):
        # A newer client's ApiVersions: answered with v0 and UNSUPPORTED_VERSION (KIP-511),
        # whose body we need not read.
        try:
            header, _ = _read_header_v1(frame, 0)
        except Exception as e:  # noqa: BLE001 - kio raises several types for malformed input
            raise BadRequest(f"malformed ApiVersions v{version} header: {type(e).__name__}",
                             corr, key, version) from None
        return KafkaRequest(key, version, header.correlation_id, header.client_id or "", None,
                            len(frame))
    read_header, read_body = _readers(key, version)
    try:
        header, offset = read_header(frame, 0)
        body, _ = read_body(frame, offset)
    except BadRequest:
        raise
    except Exception as e:  # noqa: BLE001 - kio raises several types for malformed input
        raise BadRequest(f"malformed {API_NAMES.get(key, key)} v{version} request: "
                         f"{type(e).__name__}: {e}", corr, key, version) from None
    bad = check_non_null(body)
    if bad is not None:
        raise BadRequest(f"malformed {API_NAMES.get(key, key)} v{version} request: {bad} is "
                         "null, which its schema does not allow", corr, key, version)
    # Bytes after the body are ignored, as Kafka's brokers do (librdkafka 2.16's Metadata v12
    # request for all topics carries 3 more than the schema reads).
    return KafkaRequest(key, version, header.correlation_id, header.client_id or "", body,
                        len(frame))


def encode_body(body: Any) -> EncodedResponse:
    """A kio response entity's body, encoded once (to be framed for any correlation id)."""
    buf = io.BytesIO()
    write = _WRITERS.get(type(body))
    if write is None:
        write = _WRITERS[type(body)] = entity_writer(type(body))
    write(buf, body)
    return EncodedResponse((buf.getvalue(),), body.__header_schema__ is ResponseHeaderV1)


def encode_response(correlation_id: int, body: Any) -> bytes:
    """The response frame, size prefix included, for a kio response entity or a body encoded
    already (fast.EncodedResponse: Produce and Fetch)."""
    if isinstance(body, EncodedResponse):
        return body.frame(correlation_id)
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    if body.__header_schema__ is ResponseHeaderV1:
        _write_header_v1(buf, ResponseHeaderV1(correlation_id=correlation_id))
    else:
        _write_header_v0(buf, ResponseHeaderV0(correlation_id=correlation_id))
    write = _WRITERS.get(type(body))
    if write is None:
        write = _WRITERS[type(body)] = entity_writer(type(body))
    write(buf, body)
    out = buf.getbuffer()
    _SIZE.pack_into(out, 0, len(out) - 4)
    del out
    return buf.getvalue()
