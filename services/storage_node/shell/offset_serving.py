"""The storage node answering for its partitions' offsets: LIST_OFFSETS, DELETE_RECORDS and
OFFSET_FOR_LEADER_EPOCH.

A mixin of StorageNode (shell.node), split out of it along this seam; it never imports
shell.node. LIST_OFFSETS answers the log start (-2), the end (-1: the high watermark for
consumers, the last stable offset with read_committed, the log end for replicas) or the first
offset at a time; DELETE_RECORDS moves the leader's log start offset up to at most the high
watermark; OFFSET_FOR_LEADER_EPOCH says where an epoch ends in the leader's log.
"""
from __future__ import annotations

import logging

from riverbed import errors
from riverbed._proto.v1 import delete_records_pb2, list_offsets_pb2
from riverbed.wire.framing import Request

from services.common.rpc import Reply
from services.storage_node.core import divergence
from services.storage_node.core.replica_state import NONE, Role
from services.storage_node.shell import log_access

log = logging.getLogger("services.storage_node.shell.node")   # the node's logger, as before

UNKNOWN_TOPIC_OR_PARTITION = errors.UnknownTopicOrPartitionError.code
NOT_LEADER_FOR_PARTITION = errors.NotLeaderForPartitionError.code
OFFSET_OUT_OF_RANGE = errors.OffsetOutOfRangeError.code
INVALID_REQUEST = errors.InvalidRequestError.code
KAFKA_STORAGE_ERROR = errors.KafkaStorageError.code


class OffsetServing:
    """LIST_OFFSETS, DELETE_RECORDS, OFFSET_FOR_LEADER_EPOCH (mixed into StorageNode)."""

    async def handle_list_offsets(self, req: Request) -> Reply:
        body: list_offsets_pb2.ListOffsetsRequest = req.body
        resp = list_offsets_pb2.ListOffsetsResponse()
        for t in body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                tp = (t.name, p.partition)
                out = rt.partitions.add(partition=p.partition, timestamp=-1, offset=-1,
                                        leader_epoch=-1)
                r = self.core.get(tp)
                if r is None:
                    out.error_code = UNKNOWN_TOPIC_OR_PARTITION
                    continue
                if r.role is not Role.LEADER and body.replica_id < 0:
                    out.error_code = NOT_LEADER_FOR_PARTITION
                    continue
                plog = self.logs.get(tp)
                out.leader_epoch = r.leader_epoch
                # read_committed (v1): nothing at or past the last stable offset is visible
                visible = r.high_watermark
                if body.isolation_level == 1 and body.replica_id < 0:
                    visible = log_access.last_stable_offset(self.logs.store(tp), visible)
                if p.timestamp == -2:
                    out.offset = log_access.log_start_offset(plog)
                elif p.timestamp == -1:
                    out.offset = visible if body.replica_id < 0 \
                        else log_access.log_end_offset(plog)
                elif p.timestamp < 0:
                    out.error_code = INVALID_REQUEST
                    out.error_message = f"timestamp {p.timestamp}: use -1, -2 or a time in ms"
                else:
                    found = log_access.offset_for_timestamp(plog, p.timestamp)
                    if found is not None:
                        ts, off = found
                        if body.replica_id < 0 and off >= visible:
                            continue
                        out.timestamp, out.offset = ts, off
        return Reply(resp)

    async def handle_delete_records(self, req: Request) -> Reply:
        """Kafka's DeleteRecords on the leader: the log start offset moves up to the offset
        asked (-1: the high watermark), never past the high watermark (OFFSET_OUT_OF_RANGE).
        Followers follow when their next fetch answer carries the new log start offset (Kafka
        also waits for them before answering; here the leader's move is the answer)."""
        body: delete_records_pb2.DeleteRecordsRequest = req.body
        resp = delete_records_pb2.DeleteRecordsResponse()
        for t in body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                tp = (t.name, p.partition)
                out = rt.partitions.add(partition=p.partition, low_watermark=-1)
                r = self.core.get(tp)
                plog = self.logs.get(tp) if r is not None else None
                if r is None or plog is None:
                    out.error_code = UNKNOWN_TOPIC_OR_PARTITION
                    continue
                if r.role is not Role.LEADER:
                    out.error_code = NOT_LEADER_FOR_PARTITION
                    continue
                offset = r.high_watermark if p.offset == -1 else p.offset
                if offset < 0 or offset > r.high_watermark:
                    out.error_code = OFFSET_OUT_OF_RANGE
                    out.error_message = (f"offset {p.offset}: records can be deleted up to the "
                                         f"high watermark {r.high_watermark}")
                    continue
                try:
                    out.low_watermark = plog.delete_records_before(offset)
                except errors.KafkaError as e:
                    out.error_code, out.error_message = e.code, e.message or e.name
                    continue
                except OSError as e:     # writing the epoch checkpoint
                    self.fail_log_dir(self._dir_of(tp), e, f"deleting records of {t.name}-{p.partition}")
                    out.error_code = KAFKA_STORAGE_ERROR
                    continue
                log.info("[%s-%d] records before %d deleted (DeleteRecords); log start offset %d",
                         t.name, p.partition, offset, out.low_watermark)
        return Reply(resp)

    async def handle_offset_for_leader_epoch(self, req: Request) -> Reply:
        """Where each asked epoch ends in this leader's log (Kafka's OffsetForLeaderEpoch for
        consumers: the leader answers, after checking the caller's view of its epoch)."""
        body: list_offsets_pb2.OffsetForLeaderEpochRequest = req.body
        resp = list_offsets_pb2.OffsetForLeaderEpochResponse()
        for t in body.topics:
            rt = resp.topics.add(name=t.name)
            for p in t.partitions:
                out = rt.partitions.add(partition=p.partition, leader_epoch=-1, end_offset=-1)
                r = self.core.get((t.name, p.partition))
                if r is None:
                    out.error_code = UNKNOWN_TOPIC_OR_PARTITION
                    continue
                if r.role is not Role.LEADER:
                    out.error_code = NOT_LEADER_FOR_PARTITION
                    continue
                code = divergence.check_current_leader_epoch(p.current_leader_epoch,
                                                             r.leader_epoch)
                if code != NONE:
                    out.error_code = code
                    out.error_message = (f"leader epoch {p.current_leader_epoch} asked, "
                                         f"the leader's is {r.leader_epoch}")
                    continue
                plog = self.logs.get((t.name, p.partition))
                if plog is None:
                    out.error_code = UNKNOWN_TOPIC_OR_PARTITION
                    continue
                out.leader_epoch, out.end_offset = log_access.end_offset_for_epoch(
                    plog, p.leader_epoch)
        return Reply(resp)
