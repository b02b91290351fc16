"""Riverbed's errors: one class per Kafka error code, translated once at the boundary.

The wire carries `ErrorCode` (proto/riverbed/v1/errors.proto, Kafka's numbers and names). This
module keeps one row per code: the exception class, whether a client may retry it, and whether it
should refresh metadata first (after aiokafka's errors.py). Unknown codes from a newer peer become
`UnknownServerError`; exception text is for people, never the contract.
"""
from __future__ import annotations

from typing import Any

from riverbed._proto.v1 import errors_pb2

ErrorCode = errors_pb2.ErrorCode


class RiverbedError(Exception):
    """Base of every error this package raises."""


class KafkaError(RiverbedError):
    """An error with a Kafka error code. `code` is the wire number; `name` Kafka's name.

    Also kafka-python's `KafkaError`, the base of every error a kafka-python program catches:
    the SDK's own KafkaTimeoutError, CommitFailedError, IllegalStateError, ... are KafkaErrors
    too (code -1, UNKNOWN_SERVER_ERROR, except KafkaTimeoutError: REQUEST_TIMED_OUT)."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False
    refresh_metadata: bool = False
    # kafka-python's spelling of `code` (BrokerResponseError.errno)
    errno: int = -1

    def __init__(self, message: str = "", *, topic: str | None = None, partition: int | None = None):
        self.message = message
        self.topic = topic
        self.partition = partition
        where = ""
        if topic is not None:
            where = f" [{topic}" + (f"-{partition}" if partition is not None else "") + "]"
        super().__init__(f"{self.name}{where}" + (f": {message}" if message else ""))


class RetriableError(KafkaError):
    """kafka-python's base of the retriable errors (every class whose `retriable` is True)."""
    retriable = True


class InvalidMetadataError(RetriableError):
    """kafka-python's base of the retriable errors after which metadata is refreshed."""
    refresh_metadata = True


class BrokerResponseError(KafkaError):
    """kafka-python's base of the errors a server answers with (a Kafka error code), as
    opposed to those the client raises itself (KafkaTimeoutError, CommitFailedError, ...)."""


class AuthorizationError(BrokerResponseError):
    """kafka-python's base of the *_AUTHORIZATION_FAILED errors (never retriable)."""


class NoError(BrokerResponseError):
    """kafka-python's class for code 0 (NONE): what its admin calls put in per-partition
    results that succeeded (error_class(0)). Never raised."""
    code = errno = 0
    name = "NONE"


_BY_CODE: dict[int, type[KafkaError]] = {}
# codes whose class came from _kafka_error (no errors.proto name when it was made)
_KAFKA_PYTHON_ONLY: set[int] = set()


def _error_class(cls_name: str, code: int, name: str, retriable: bool, refresh: bool,
                 doc: str) -> type[KafkaError]:
    bases: tuple[type[KafkaError], ...]
    if name.endswith("_AUTHORIZATION_FAILED"):
        bases = (AuthorizationError,)
    elif refresh:
        bases = (InvalidMetadataError, BrokerResponseError)
    elif retriable:
        bases = (RetriableError, BrokerResponseError)
    else:
        bases = (BrokerResponseError,)
    cls = type(cls_name, bases, {
        "code": code, "errno": code, "name": name, "retriable": retriable,
        "refresh_metadata": refresh, "__doc__": doc, "__module__": __name__,
    })
    _BY_CODE.setdefault(code, cls)
    return cls


def _register(cls: type[KafkaError]) -> type[KafkaError]:
    """A code of errors.proto takes over from a _kafka_error class of the same code made
    before it (so that the module's name, rebound below, and for_code() agree)."""
    if cls.code in _KAFKA_PYTHON_ONLY:
        _KAFKA_PYTHON_ONLY.discard(cls.code)
        _BY_CODE[cls.code] = cls
    return cls


def _error(name: str, *, retriable: bool = False, refresh: bool = False,
           cls_name: str | None = None) -> type[KafkaError]:
    """The class for a code of errors.proto; its __name__ is kafka-python's class name (given
    where it is not the code's name in CamelCase + "Error")."""
    code = errors_pb2.ErrorCode.Value(name)
    cls_name = cls_name or "".join(part.capitalize() for part in name.lower().split("_")) + "Error"
    return _register(_error_class(cls_name, code, name, retriable, refresh,
                                  f"Kafka error {code} {name}."))


def _kafka_error(cls_name: str, code: int, name: str, *, retriable: bool = False,
                 refresh: bool = False) -> type[KafkaError]:
    """A Kafka error code that Riverbed's services do not answer with (yet), under
    kafka-python's class name, so that kafka-python programs can import and catch it and
    for_code() knows it. A code already defined above keeps its class (this is an alias then);
    one defined with _error() later takes over."""
    existing = _BY_CODE.get(code)
    if existing is not None:
        return existing
    _KAFKA_PYTHON_ONLY.add(code)
    return _error_class(cls_name, code, name, retriable, refresh,
                        f"Kafka error {code} {name} (kafka-python's {cls_name}).")


UnknownServerError = _error("UNKNOWN_SERVER_ERROR", cls_name="UnknownError")
OffsetOutOfRangeError = _error("OFFSET_OUT_OF_RANGE")
CorruptMessageError = _error("CORRUPT_MESSAGE", retriable=True, cls_name="CorruptRecordError")
CorruptRecordError = CorruptMessageError
UnknownTopicOrPartitionError = _error("UNKNOWN_TOPIC_OR_PARTITION", retriable=True, refresh=True)
InvalidFetchSizeError = _error("INVALID_FETCH_SIZE", cls_name="InvalidFetchRequestError")
LeaderNotAvailableError = _error("LEADER_NOT_AVAILABLE", retriable=True, refresh=True)
NotLeaderForPartitionError = _error("NOT_LEADER_FOR_PARTITION", retriable=True, refresh=True)
RequestTimedOutError = _error("REQUEST_TIMED_OUT", retriable=True)
BrokerNotAvailableError = _error("BROKER_NOT_AVAILABLE", retriable=True, refresh=True)
ReplicaNotAvailableError = _error("REPLICA_NOT_AVAILABLE", retriable=True, refresh=True)
MessageTooLargeError = _error("MESSAGE_TOO_LARGE", cls_name="MessageSizeTooLargeError")
RecordTooLargeError = MessageTooLargeError
StaleControllerEpochError = _error("STALE_CONTROLLER_EPOCH")
OffsetMetadataTooLargeError = _error("OFFSET_METADATA_TOO_LARGE")
NetworkError = _error("NETWORK_EXCEPTION", retriable=True, refresh=True)
OffsetsLoadInProgressError = _error("OFFSETS_LOAD_IN_PROGRESS", retriable=True,
                                    cls_name="CoordinatorLoadInProgressError")
CoordinatorNotAvailableError = _error("COORDINATOR_NOT_AVAILABLE", retriable=True, refresh=True)
NotCoordinatorError = _error("NOT_COORDINATOR", retriable=True, refresh=True)
InvalidTopicError = _error("INVALID_TOPIC_EXCEPTION", cls_name="InvalidTopicError")
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
InvalidReplicaAssignmentError = _error("INVALID_REPLICA_ASSIGNMENT",
                                       cls_name="InvalidReplicationAssignmentError")
InvalidConfigError = _error("INVALID_CONFIG", cls_name="InvalidConfigurationError")
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
KafkaStorageError = _error("KAFKA_STORAGE_ERROR", retriable=True, refresh=True,
                           cls_name="KafkaStorageError")
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

# Kafka's other codes, under kafka-python 3.0's names (generated from kafka.errors 3.0.12): a
# kafka-python program imports and catches them; Riverbed does not answer with them (yet).
UnsupportedSaslMechanismError = _kafka_error("UnsupportedSaslMechanismError", 33, "UNSUPPORTED_SASL_MECHANISM")
IllegalSaslStateError = _kafka_error("IllegalSaslStateError", 34, "ILLEGAL_SASL_STATE")
UnsupportedForMessageFormatError = _kafka_error("UnsupportedForMessageFormatError", 43, "UNSUPPORTED_FOR_MESSAGE_FORMAT")
PolicyViolationError = _kafka_error("PolicyViolationError", 44, "POLICY_VIOLATION")
InvalidTxnStateError = _kafka_error("InvalidTxnStateError", 48, "INVALID_TXN_STATE")
InvalidProducerIdMappingError = _kafka_error("InvalidProducerIdMappingError", 49, "INVALID_PRODUCER_ID_MAPPING")
InvalidTransactionTimeoutError = _kafka_error("InvalidTransactionTimeoutError", 50, "INVALID_TRANSACTION_TIMEOUT")
ConcurrentTransactionsError = _kafka_error("ConcurrentTransactionsError", 51, "CONCURRENT_TRANSACTIONS", retriable=True)
TransactionCoordinatorFencedError = _kafka_error("TransactionCoordinatorFencedError", 52, "TRANSACTION_COORDINATOR_FENCED")
TransactionalIdAuthorizationFailedError = _kafka_error("TransactionalIdAuthorizationFailedError", 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
SecurityDisabledError = _kafka_error("SecurityDisabledError", 54, "SECURITY_DISABLED")
OperationNotAttemptedError = _kafka_error("OperationNotAttemptedError", 55, "OPERATION_NOT_ATTEMPTED")
SaslAuthenticationFailedError = _kafka_error("SaslAuthenticationFailedError", 58, "SASL_AUTHENTICATION_FAILED")
DelegationTokenAuthDisabledError = _kafka_error("DelegationTokenAuthDisabledError", 61, "DELEGATION_TOKEN_AUTH_DISABLED")
DelegationTokenNotFoundError = _kafka_error("DelegationTokenNotFoundError", 62, "DELEGATION_TOKEN_NOT_FOUND")
DelegationTokenOwnerMismatchError = _kafka_error("DelegationTokenOwnerMismatchError", 63, "DELEGATION_TOKEN_OWNER_MISMATCH")
DelegationTokenRequestNotAllowedError = _kafka_error("DelegationTokenRequestNotAllowedError", 64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED")
DelegationTokenAuthorizationFailedError = _kafka_error("DelegationTokenAuthorizationFailedError", 65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED")
DelegationTokenExpiredError = _kafka_error("DelegationTokenExpiredError", 66, "DELEGATION_TOKEN_EXPIRED")
InvalidPrincipalTypeError = _kafka_error("InvalidPrincipalTypeError", 67, "INVALID_PRINCIPAL_TYPE")
ListenerNotFoundError = _kafka_error("ListenerNotFoundError", 72, "LISTENER_NOT_FOUND", retriable=True, refresh=True)
UnsupportedCompressionTypeError = _kafka_error("UnsupportedCompressionTypeError", 76, "UNSUPPORTED_COMPRESSION_TYPE")
StaleBrokerEpochError = _kafka_error("StaleBrokerEpochError", 77, "STALE_BROKER_EPOCH")
FencedInstanceIdError = _kafka_error("FencedInstanceIdError", 82, "FENCED_INSTANCE_ID")
EligibleLeadersNotAvailableError = _kafka_error("EligibleLeadersNotAvailableError", 83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", retriable=True, refresh=True)
GroupSubscribedToTopicError = _kafka_error("GroupSubscribedToTopicError", 86, "GROUP_SUBSCRIBED_TO_TOPIC")
UnstableOffsetCommitError = _kafka_error("UnstableOffsetCommitError", 88, "UNSTABLE_OFFSET_COMMIT", retriable=True)
ThrottlingQuotaExceededError = _kafka_error("ThrottlingQuotaExceededError", 89, "THROTTLING_QUOTA_EXCEEDED", retriable=True)
ProducerFencedError = _kafka_error("ProducerFencedError", 90, "PRODUCER_FENCED")
ResourceNotFoundError = _kafka_error("ResourceNotFoundError", 91, "RESOURCE_NOT_FOUND")
DuplicateResourceError = _kafka_error("DuplicateResourceError", 92, "DUPLICATE_RESOURCE")
UnacceptableCredentialError = _kafka_error("UnacceptableCredentialError", 93, "UNACCEPTABLE_CREDENTIAL")
InconsistentVoterSetError = _kafka_error("InconsistentVoterSetError", 94, "INCONSISTENT_VOTER_SET")
InvalidUpdateVersionError = _kafka_error("InvalidUpdateVersionError", 95, "INVALID_UPDATE_VERSION")
FeatureUpdateFailedError = _kafka_error("FeatureUpdateFailedError", 96, "FEATURE_UPDATE_FAILED")
PrincipalDeserializationFailureError = _kafka_error("PrincipalDeserializationFailureError", 97, "PRINCIPAL_DESERIALIZATION_FAILURE")
SnapshotNotFoundError = _kafka_error("SnapshotNotFoundError", 98, "SNAPSHOT_NOT_FOUND")
PositionOutOfRangeError = _kafka_error("PositionOutOfRangeError", 99, "POSITION_OUT_OF_RANGE")
UnknownTopicIdError = _kafka_error("UnknownTopicIdError", 100, "UNKNOWN_TOPIC_ID", retriable=True, refresh=True)
DuplicateBrokerRegistrationError = _kafka_error("DuplicateBrokerRegistrationError", 101, "DUPLICATE_BROKER_REGISTRATION")
BrokerIdNotRegisteredError = _kafka_error("BrokerIdNotRegisteredError", 102, "BROKER_ID_NOT_REGISTERED")
InconsistentTopicIdError = _kafka_error("InconsistentTopicIdError", 103, "INCONSISTENT_TOPIC_ID", retriable=True, refresh=True)
InconsistentClusterIdError = _kafka_error("InconsistentClusterIdError", 104, "INCONSISTENT_CLUSTER_ID")
TransactionalIdNotFoundError = _kafka_error("TransactionalIdNotFoundError", 105, "TRANSACTIONAL_ID_NOT_FOUND")
FetchSessionTopicIdError = _kafka_error("FetchSessionTopicIdError", 106, "FETCH_SESSION_TOPIC_ID_ERROR", retriable=True)
IneligibleReplicaError = _kafka_error("IneligibleReplicaError", 107, "INELIGIBLE_REPLICA")
NewLeaderElectedError = _kafka_error("NewLeaderElectedError", 108, "NEW_LEADER_ELECTED")
OffsetMovedToTieredStorageError = _kafka_error("OffsetMovedToTieredStorageError", 109, "OFFSET_MOVED_TO_TIERED_STORAGE")
FencedMemberEpochError = _kafka_error("FencedMemberEpochError", 110, "FENCED_MEMBER_EPOCH")
UnreleasedInstanceIdError = _kafka_error("UnreleasedInstanceIdError", 111, "UNRELEASED_INSTANCE_ID")
UnsupportedAssignorError = _kafka_error("UnsupportedAssignorError", 112, "UNSUPPORTED_ASSIGNOR")
StaleMemberEpochError = _kafka_error("StaleMemberEpochError", 113, "STALE_MEMBER_EPOCH")
MismatchedEndpointTypeError = _kafka_error("MismatchedEndpointTypeError", 114, "MISMATCHED_ENDPOINT_TYPE")
UnsupportedEndpointTypeError = _kafka_error("UnsupportedEndpointTypeError", 115, "UNSUPPORTED_ENDPOINT_TYPE")
UnknownControllerIdError = _kafka_error("UnknownControllerIdError", 116, "UNKNOWN_CONTROLLER_ID")
UnknownSubscriptionIdError = _kafka_error("UnknownSubscriptionIdError", 117, "UNKNOWN_SUBSCRIPTION_ID")
TelemetryTooLargeError = _kafka_error("TelemetryTooLargeError", 118, "TELEMETRY_TOO_LARGE")
InvalidRegistrationError = _kafka_error("InvalidRegistrationError", 119, "INVALID_REGISTRATION")
TransactionAbortableError = _kafka_error("TransactionAbortableError", 120, "TRANSACTION_ABORTABLE")
InvalidRecordStateError = _kafka_error("InvalidRecordStateError", 121, "INVALID_RECORD_STATE")
ShareSessionNotFoundError = _kafka_error("ShareSessionNotFoundError", 122, "SHARE_SESSION_NOT_FOUND", retriable=True)
InvalidShareSessionEpochError = _kafka_error("InvalidShareSessionEpochError", 123, "INVALID_SHARE_SESSION_EPOCH", retriable=True)
FencedStateEpochError = _kafka_error("FencedStateEpochError", 124, "FENCED_STATE_EPOCH")
InvalidVoterKeyError = _kafka_error("InvalidVoterKeyError", 125, "INVALID_VOTER_KEY")
DuplicateVoterError = _kafka_error("DuplicateVoterError", 126, "DUPLICATE_VOTER")
VoterNotFoundError = _kafka_error("VoterNotFoundError", 127, "VOTER_NOT_FOUND")

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
InvalidReplicationAssignmentError = InvalidReplicaAssignmentError
InvalidConfigurationError = InvalidConfigError


class ClientError(RiverbedError):
    """Raised by the SDK itself, not by a server (bad arguments, closed client)."""


class _ClientKafkaError(ClientError, KafkaError):
    """An error the SDK raises itself that kafka-python counts as a KafkaError (so `except
    KafkaError` catches it, as in kafka-python). Its text is its message alone."""

    def __init__(self, message: str = "", *, topic: str | None = None,
                 partition: int | None = None):
        self.message = message
        self.topic = topic
        self.partition = partition
        Exception.__init__(self, message)


class KafkaTimeoutError(_ClientKafkaError, RetriableError):
    """A client-side deadline passed (for example `result(timeout)` or `max_block_ms`).
    Retriable, as in kafka-python 3.0; to a service that meets one it is REQUEST_TIMED_OUT."""
    code = errno = ErrorCode.Value("REQUEST_TIMED_OUT")
    name = "REQUEST_TIMED_OUT"


class BufferExhaustedError(KafkaTimeoutError):
    """The producer's `buffer_memory` stayed full for longer than `max_block_ms`."""


class CommitFailedError(_ClientKafkaError):
    """The commit cannot complete: the group rebalanced (or this member was removed) and the
    partitions may be someone else's now. The consumer rejoins on its next poll()."""

    def __init__(self, message: str = "", **where: Any) -> None:
        super().__init__(message or "Commit cannot be completed since the group has already "
                         "rebalanced and assigned the partitions to another member.", **where)


class NoOffsetForPartitionError(OffsetOutOfRangeError, ClientError):  # type: ignore[misc,valid-type]
    """auto_offset_reset='none' and the group has no committed offset for the partition
    (Kafka's NoOffsetForPartitionException). Subclass of OffsetOutOfRangeError."""

    def __init__(self, message: str = "", *, topic: str | None = None,
                 partition: int | None = None):
        OffsetOutOfRangeError.__init__(self, message, topic=topic, partition=partition)


class NoBrokersAvailable(RequestTimedOutError, KafkaTimeoutError):  # type: ignore[misc,valid-type]
    """No gateway of the bootstrap list (and those learned since) answered. kafka-python 2.x's
    name; kafka-python 3.0 raises KafkaTimeoutError from its constructors instead, and this is
    one too (and a RequestTimedOutError, so code catching that still catches it)."""

    def __init__(self, message: str = "", *, topic: str | None = None,
                 partition: int | None = None):
        RequestTimedOutError.__init__(self, message, topic=topic, partition=partition)


class IncompatibleBrokerVersion(UnsupportedVersionError):  # type: ignore[misc,valid-type]
    """kafka-python's: the cluster does not serve an API (or version) a call needs. An
    UnsupportedVersionError (code 35), as in kafka-python 3.0."""


class TransactionAbortedError(ClientError):
    """A record of a transaction that was aborted before it was sent: its future fails with
    this (Kafka's TransactionAbortedException)."""


class ForkedClientError(ClientError):
    """A client was used in a process other than the one that created it (after `os.fork()`).
    Its sockets and threads stayed in the parent: create a new client in the child."""


class IllegalStateError(_ClientKafkaError):
    """kafka-python's: a call that the client's state does not allow (e.g. assign() after
    subscribe())."""


class IllegalArgumentError(_ClientKafkaError, ValueError):
    """kafka-python's: a bad argument."""


class KafkaConfigurationError(_ClientKafkaError, ValueError):
    """kafka-python's: a bad client setting."""


# kafka-python 3.0's client-side errors that Riverbed's clients do not raise (their causes are
# Kafka's connection handling); here so that kafka-python programs import and catch them.
class KafkaProtocolError(_ClientKafkaError):
    """kafka-python's: a malformed answer from a broker."""


class CorrelationIdError(KafkaProtocolError, RetriableError):  # type: ignore[misc]
    """kafka-python's: an answer's correlation id matched no request."""


class InvalidReceiveError(KafkaProtocolError):
    """kafka-python's: an answer frame could not be read."""


class Cancelled(_ClientKafkaError, RetriableError):
    """kafka-python's: a request was cancelled (its connection closed)."""


class KafkaConnectionError(_ClientKafkaError, InvalidMetadataError):
    """kafka-python's: a broker connection failed."""


class StaleMetadata(_ClientKafkaError, InvalidMetadataError):
    """kafka-python's: metadata too old to route a request."""


class MetadataEmptyBrokerList(_ClientKafkaError, RetriableError):
    """kafka-python's: metadata listed no brokers."""


class NodeNotReadyError(_ClientKafkaError, RetriableError):
    """kafka-python's: a broker connection is not ready yet."""


class TooManyInFlightRequests(_ClientKafkaError, RetriableError):
    """kafka-python's: max_in_flight_requests_per_connection reached."""


class UnknownBrokerIdError(_ClientKafkaError):
    """kafka-python's: a request named a broker id that metadata does not know."""


class QuotaViolationError(_ClientKafkaError):
    """kafka-python's: a client-side quota was exceeded."""


class UnrecognizedBrokerVersion(_ClientKafkaError):
    """kafka-python's: a broker's version could not be told."""


class UnsupportedCodecError(_ClientKafkaError):
    """kafka-python's: a compression codec whose library is not installed."""


class TransactionAbortedError(_ClientKafkaError):
    """kafka-python's: a record's batch was failed because its transaction was aborted."""


class LogTruncationError(_ClientKafkaError):
    """kafka-python's: the leader's log was truncated below the consumer's position
    (KIP-320); `divergent_offsets` maps partitions to where to seek (or None)."""

    def __init__(self, divergent_offsets: Any = None, *args: Any) -> None:
        self.divergent_offsets = divergent_offsets
        super().__init__(args[0] if args else f"Detected truncated partitions: {divergent_offsets}")


def for_code(code: int, message: str = "", *, topic: str | None = None,
             partition: int | None = None) -> KafkaError:
    """The exception for a wire error code; an unknown code becomes UnknownServerError."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return UnknownServerError(f"unknown error code {code}" + (f": {message}" if message else ""),
                                  topic=topic, partition=partition)
    return cls(message, topic=topic, partition=partition)


def error_class(code: int) -> type[KafkaError]:
    """The class for a wire error code: NoError for 0, UnknownServerError for an unknown one.
    (kafka-python's `for_code(code)` returns this class; Riverbed's for_code an instance.)"""
    if code == 0:
        return NoError
    return _BY_CODE.get(code, UnknownServerError)


def raise_for(code: int, message: str = "", *, topic: str | None = None,
              partition: int | None = None) -> None:
    """Raise the error for `code` unless it is NONE."""
    if code != 0:
        raise for_code(code, message, topic=topic, partition=partition)
