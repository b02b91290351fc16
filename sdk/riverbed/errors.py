"""Riverbed's errors: one class per Kafka error code, translated once at the boundary.

The wire carries `ErrorCode` (proto/riverbed/v1/errors.proto, Kafka's numbers and names). This
module keeps one row per code: the exception class, whether a client may retry it, and whether it
should refresh metadata first (after aiokafka's errors.py). Unknown codes from a newer peer become
`UnknownServerError`; exception text is for people, never the contract.
"""
from __future__ import annotations

from riverbed._proto.v1 import errors_pb2

ErrorCode = errors_pb2.ErrorCode


class RiverbedError(Exception):
    """Base of every error this package raises."""


class KafkaError(RiverbedError):
    """An error with a Kafka error code. `code` is the wire number; `name` Kafka's name."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False
    refresh_metadata: bool = False

    def __init__(self, message: str = "", *, topic: str | None = None, partition: int | None = None):
        self.message = message
        self.topic = topic
        self.partition = partition
        where = ""
        if topic is not None:
            where = f" [{topic}" + (f"-{partition}" if partition is not None else "") + "]"
        super().__init__(f"{self.name}{where}" + (f": {message}" if message else ""))


_BY_CODE: dict[int, type[KafkaError]] = {}


def _error(name: str, *, retriable: bool = False, refresh: bool = False) -> type[KafkaError]:
    code = errors_pb2.ErrorCode.Value(name)
    cls_name = "".join(part.capitalize() for part in name.lower().split("_")) + "Error"
    cls = type(cls_name, (KafkaError,), {
        "code": code, "name": name, "retriable": retriable, "refresh_metadata": refresh,
        "__doc__": f"Kafka error {code} {name}.",
    })
    _BY_CODE.setdefault(code, cls)
    return cls


UnknownServerError = _error("UNKNOWN_SERVER_ERROR")
OffsetOutOfRangeError = _error("OFFSET_OUT_OF_RANGE")
CorruptMessageError = _error("CORRUPT_MESSAGE", retriable=True)
CorruptRecordError = CorruptMessageError
UnknownTopicOrPartitionError = _error("UNKNOWN_TOPIC_OR_PARTITION", retriable=True, refresh=True)
InvalidFetchSizeError = _error("INVALID_FETCH_SIZE")
LeaderNotAvailableError = _error("LEADER_NOT_AVAILABLE", retriable=True, refresh=True)
NotLeaderForPartitionError = _error("NOT_LEADER_FOR_PARTITION", retriable=True, refresh=True)
RequestTimedOutError = _error("REQUEST_TIMED_OUT", retriable=True)
BrokerNotAvailableError = _error("BROKER_NOT_AVAILABLE", retriable=True, refresh=True)
ReplicaNotAvailableError = _error("REPLICA_NOT_AVAILABLE", retriable=True, refresh=True)
MessageTooLargeError = _error("MESSAGE_TOO_LARGE")
RecordTooLargeError = MessageTooLargeError
StaleControllerEpochError = _error("STALE_CONTROLLER_EPOCH")
OffsetMetadataTooLargeError = _error("OFFSET_METADATA_TOO_LARGE")
NetworkError = _error("NETWORK_EXCEPTION", retriable=True, refresh=True)
OffsetsLoadInProgressError = _error("OFFSETS_LOAD_IN_PROGRESS", retriable=True)
CoordinatorNotAvailableError = _error("COORDINATOR_NOT_AVAILABLE", retriable=True, refresh=True)
NotCoordinatorError = _error("NOT_COORDINATOR", retriable=True, refresh=True)
InvalidTopicError = _error("INVALID_TOPIC_EXCEPTION")
RecordListTooLargeError = _error("RECORD_LIST_TOO_LARGE")
NotEnoughReplicasError = _error("NOT_ENOUGH_REPLICAS", retriable=True)
NotEnoughReplicasAfterAppendError = _error("NOT_ENOUGH_REPLICAS_AFTER_APPEND", retriable=True)
InvalidRequiredAcksError = _error("INVALID_REQUIRED_ACKS")
IllegalGenerationError = _error("ILLEGAL_GENERATION")
InconsistentGroupProtocolError = _error("INCONSISTENT_GROUP_PROTOCOL")
InvalidGroupIdError = _error("INVALID_GROUP_ID")
UnknownMemberIdError = _error("UNKNOWN_MEMBER_ID")
InvalidSessionTimeoutError = _error("INVALID_SESSION_TIMEOUT")
RebalanceInProgressError = _error("REBALANCE_IN_PROGRESS")
InvalidCommitOffsetSizeError = _error("INVALID_COMMIT_OFFSET_SIZE")
# ACLs (kafka-python's names): the principal may not do this; never retriable.
TopicAuthorizationFailedError = _error("TOPIC_AUTHORIZATION_FAILED")
GroupAuthorizationFailedError = _error("GROUP_AUTHORIZATION_FAILED")
ClusterAuthorizationFailedError = _error("CLUSTER_AUTHORIZATION_FAILED")
InvalidTimestampError = _error("INVALID_TIMESTAMP")
UnsupportedVersionError = _error("UNSUPPORTED_VERSION")
TopicAlreadyExistsError = _error("TOPIC_ALREADY_EXISTS")
InvalidPartitionsError = _error("INVALID_PARTITIONS")
InvalidReplicationFactorError = _error("INVALID_REPLICATION_FACTOR")
InvalidReplicaAssignmentError = _error("INVALID_REPLICA_ASSIGNMENT")
InvalidConfigError = _error("INVALID_CONFIG")
NotControllerError = _error("NOT_CONTROLLER", retriable=True, refresh=True)
InvalidRequestError = _error("INVALID_REQUEST")
OutOfOrderSequenceNumberError = _error("OUT_OF_ORDER_SEQUENCE_NUMBER")
DuplicateSequenceNumberError = _error("DUPLICATE_SEQUENCE_NUMBER")
InvalidProducerEpochError = _error("INVALID_PRODUCER_EPOCH")
# Transactions (KIP-98). Which of these end a transactional producer (fatal) and which only its
# current transaction (abortable) is riverbed.transactions' table, Kafka's classification.
InvalidTxnStateError = _error("INVALID_TXN_STATE")
InvalidProducerIdMappingError = _error("INVALID_PRODUCER_ID_MAPPING")
InvalidTransactionTimeoutError = _error("INVALID_TRANSACTION_TIMEOUT")
ConcurrentTransactionsError = _error("CONCURRENT_TRANSACTIONS", retriable=True)
TransactionCoordinatorFencedError = _error("TRANSACTION_COORDINATOR_FENCED")
TransactionalIdAuthorizationFailedError = _error("TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
OperationNotAttemptedError = _error("OPERATION_NOT_ATTEMPTED")
KafkaStorageError = _error("KAFKA_STORAGE_ERROR", retriable=True, refresh=True)
LogDirNotFoundError = _error("LOG_DIR_NOT_FOUND")
UnknownProducerIdError = _error("UNKNOWN_PRODUCER_ID")
ReassignmentInProgressError = _error("REASSIGNMENT_IN_PROGRESS")
NonEmptyGroupError = _error("NON_EMPTY_GROUP")
GroupIdNotFoundError = _error("GROUP_ID_NOT_FOUND")
# Incremental fetch sessions (KIP-227; followers' replica fetches): the fetcher starts over with
# a full fetch.
FetchSessionIdNotFoundError = _error("FETCH_SESSION_ID_NOT_FOUND", retriable=True)
InvalidFetchSessionEpochError = _error("INVALID_FETCH_SESSION_EPOCH", retriable=True)
TopicDeletionDisabledError = _error("TOPIC_DELETION_DISABLED")
FencedLeaderEpochError = _error("FENCED_LEADER_EPOCH", retriable=True, refresh=True)
UnknownLeaderEpochError = _error("UNKNOWN_LEADER_EPOCH", retriable=True, refresh=True)
StaleBrokerEpochError = _error("STALE_BROKER_EPOCH")
OffsetNotAvailableError = _error("OFFSET_NOT_AVAILABLE", retriable=True, refresh=True)
MemberIdRequiredError = _error("MEMBER_ID_REQUIRED")
PreferredLeaderNotAvailableError = _error("PREFERRED_LEADER_NOT_AVAILABLE", retriable=True)
ElectionNotNeededError = _error("ELECTION_NOT_NEEDED")
NoReassignmentInProgressError = _error("NO_REASSIGNMENT_IN_PROGRESS")
InvalidRecordError = _error("INVALID_RECORD")
GroupMaxSizeReachedError = _error("GROUP_MAX_SIZE_REACHED")
UnstableOffsetCommitError = _error("UNSTABLE_OFFSET_COMMIT", retriable=True)
ProducerFencedError = _error("PRODUCER_FENCED")
TransactionalIdNotFoundError = _error("TRANSACTIONAL_ID_NOT_FOUND")

# kafka-python's names for the same codes (`from kafka.errors import X` -> `from riverbed.errors
# import X`). Riverbed's names above are the primary ones.
UnknownError = UnknownServerError
CorruptRecordException = CorruptMessageError
InvalidFetchRequestError = InvalidFetchSizeError
MessageSizeTooLargeError = MessageTooLargeError
NetworkExceptionError = NetworkError
CoordinatorLoadInProgressError = OffsetsLoadInProgressError
GroupLoadInProgressError = OffsetsLoadInProgressError
GroupCoordinatorNotAvailableError = CoordinatorNotAvailableError
NotCoordinatorForGroupError = NotCoordinatorError
IncompatibleBrokerVersion = UnsupportedVersionError
InvalidReplicationAssignmentError = InvalidReplicaAssignmentError
InvalidConfigurationError = InvalidConfigError
# kafka-python's base of every error a broker answers with.
BrokerResponseError = KafkaError


class ClientError(RiverbedError):
    """Raised by the SDK itself, not by a server (bad arguments, closed client)."""


class KafkaTimeoutError(ClientError):
    """A client-side deadline passed (for example `result(timeout)` or `max_block_ms`)."""


class BufferExhaustedError(KafkaTimeoutError):
    """The producer's `buffer_memory` stayed full for longer than `max_block_ms`."""


class CommitFailedError(ClientError):
    """The commit cannot complete: the group rebalanced (or this member was removed) and the
    partitions may be someone else's now. The consumer rejoins on its next poll()."""


class NoOffsetForPartitionError(OffsetOutOfRangeError, ClientError):  # type: ignore[misc,valid-type]
    """auto_offset_reset='none' and the group has no committed offset for the partition
    (Kafka's NoOffsetForPartitionException). Subclass of OffsetOutOfRangeError."""

    def __init__(self, message: str = "", *, topic: str | None = None,
                 partition: int | None = None):
        OffsetOutOfRangeError.__init__(self, message, topic=topic, partition=partition)


class NoBrokersAvailable(RequestTimedOutError):  # type: ignore[misc,valid-type]
    """kafka-python's name: no gateway of the bootstrap list (and those learned since) answered.
    A RequestTimedOutError, so code catching that still catches it."""


class TransactionAbortedError(ClientError):
    """A record of a transaction that was aborted before it was sent: its future fails with
    this (Kafka's TransactionAbortedException)."""


class ForkedClientError(ClientError):
    """A client was used in a process other than the one that created it (after `os.fork()`).
    Its sockets and threads stayed in the parent: create a new client in the child."""


class IllegalStateError(ClientError):
    """kafka-python's: a call that the client's state does not allow (e.g. assign() after
    subscribe())."""


class IllegalArgumentError(ClientError, ValueError):
    """kafka-python's: a bad argument."""


class KafkaConfigurationError(ClientError, ValueError):
    """kafka-python's: a bad client setting."""


def for_code(code: int, message: str = "", *, topic: str | None = None,
             partition: int | None = None) -> KafkaError:
    """The exception for a wire error code; an unknown code becomes UnknownServerError."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return UnknownServerError(f"unknown error code {code}" + (f": {message}" if message else ""),
                                  topic=topic, partition=partition)
    return cls(message, topic=topic, partition=partition)


def error_class(code: int) -> type[KafkaError]:
    return _BY_CODE.get(code, UnknownServerError)


def raise_for(code: int, message: str = "", *, topic: str | None = None,
              partition: int | None = None) -> None:
    """Raise the error for `code` unless it is NONE."""
    if code != 0:
        raise for_code(code, message, topic=topic, partition=partition)
