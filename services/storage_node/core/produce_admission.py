"""Produce admission: everything decided about a PRODUCE before a byte is appended.

Order (Kafka's ReplicaManager.appendRecords + Partition.appendRecordsToLeader + LogValidator):
the request's acks, then per partition: this node leads the partition, with acks=-1 the ISR has
at least `min.insync.replicas` members (else NOT_ENOUGH_REPLICAS, nothing appended), a payload
frame exists, and every batch of the frame
is whole, valid (magic 2, CRC-32C) and within the size limit (`max.message.bytes` of the topic,
else the node's `message.max.bytes`). A partition that fails gets its error; the others go on.
Pure: the batch checks are `riverbed.records.validate_batches`, functions over bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

from riverbed import errors
from riverbed.records import validate_batches

from services.storage_node.core.replica_state import NONE, ReplicaManager, TopicPartition

INVALID_REQUIRED_ACKS = errors.InvalidRequiredAcksError.code
CORRUPT_MESSAGE = errors.CorruptMessageError.code
INVALID_REQUEST = errors.InvalidRequestError.code
NOT_ENOUGH_REPLICAS = errors.NotEnoughReplicasError.code
NOT_ENOUGH_REPLICAS_AFTER_APPEND = errors.NotEnoughReplicasAfterAppendError.code
VALID_ACKS = (0, 1, -1)
MIN_INSYNC_REPLICAS_KEY = "min.insync.replicas"


def check_acks(acks: int) -> int:
    return NONE if acks in VALID_ACKS else INVALID_REQUIRED_ACKS


@dataclass(frozen=True, slots=True)
class Admission:
    tp: TopicPartition
    error_code: int
    error_message: str = ""
    batch_count: int = 0
    record_count: int = 0
    # The payload's batch headers, CRC-checked by validate_batches: the append does not check
    # them again (PartitionLog.append(validated=...)).
    headers: tuple = ()

    @property
    def ok(self) -> bool:
        return self.error_code == NONE


def max_batch_bytes(topic_configs: dict[str, str] | None, message_max_bytes: int) -> int:
    """The topic's `max.message.bytes` if set (and sane), else the node's message.max.bytes."""
    if topic_configs:
        raw = topic_configs.get("max.message.bytes")
        if raw is not None:
            try:
                value = int(raw)
                if value > 0:
                    return value
            except ValueError:
                pass
    return message_max_bytes


def min_insync_replicas(topic_configs: dict[str, str] | None, default: int) -> int:
    """The topic's `min.insync.replicas` if set (and sane), else the node's default."""
    raw = (topic_configs or {}).get(MIN_INSYNC_REPLICAS_KEY)
    if raw is not None:
        try:
            value = int(raw)
            if value >= 1:
                return value
        except ValueError:
            pass
    return default


def check_min_insync(acks: int, isr_size: int, min_insync: int) -> int:
    """Before appending: acks=-1 needs an ISR of at least min.insync.replicas."""
    if acks == -1 and isr_size < min_insync:
        return NOT_ENOUGH_REPLICAS
    return NONE


def acks_all_result(hw_code: int, isr_size: int, min_insync: int) -> int:
    """When an acks=-1 produce completes (the high watermark passed it): the ISR that carried
    it must still have min.insync.replicas members, else NOT_ENOUGH_REPLICAS_AFTER_APPEND (the
    records are appended but not as durable as asked)."""
    if hw_code == NONE and isr_size < min_insync:
        return NOT_ENOUGH_REPLICAS_AFTER_APPEND
    return hw_code


def admit_partition(replicas: ReplicaManager, tp: TopicPartition, payload,
                    max_batch_size: int, *, acks: int = 1, min_insync: int = 1) -> Admission:
    """Check one partition of a PRODUCE (payload None = the frame is missing)."""
    if not tp[0] or tp[1] < 0:
        return Admission(tp, errors.UnknownTopicOrPartitionError.code, "bad topic or partition")
    code = replicas.leader_check(tp)
    if code != NONE:
        what = "not hosted here" if code == errors.UnknownTopicOrPartitionError.code \
            else "this node is not its leader"
        return Admission(tp, code, f"{tp[0]}-{tp[1]}: {what}")
    isr_size = replicas.isr_size(tp)
    if check_min_insync(acks, isr_size, min_insync) != NONE:
        return Admission(tp, NOT_ENOUGH_REPLICAS,
                         f"{tp[0]}-{tp[1]}: ISR has {isr_size} member(s), "
                         f"min.insync.replicas is {min_insync}")
    if payload is None:
        return Admission(tp, CORRUPT_MESSAGE, "no payload frame for this partition")
    try:
        headers = validate_batches(payload, max_size=max_batch_size)
    except errors.KafkaError as e:
        return Admission(tp, e.code, e.message)
    return Admission(tp, NONE, "", len(headers), sum(h.records_count for h in headers),
                     tuple(headers))
