"""What the Kafka listener's codec (kio) costs per request, beside the SDK path's protobuf codec
for the same request in the same run (issue 25: "measure it and say why you kept it")

    .venv/bin/python -m loadgen.kafka_codec [--partitions 3] [--batch-bytes 16384] [--seconds 1]

Rows (one request each, µs per operation, best of 3 runs of --seconds each; one core):
- Produce v9 request decode: a flexible ProduceRequest with --partitions partitions of one
  --batch-bytes record batch each (the batch bytes are copied out once, never decoded).
- Fetch v12 response encode: the answer to that fetch, --partitions partitions with one
  --batch-bytes batch each: by kio (copied into the response twice) and by the listener's own
  encoder (services/gateway/kafka/fast.py, which the listener uses: the batches spliced in
  once, when the frame is joined).
- Produce v9 response encode: the answer to that produce, by kio and by fast.py.
- Metadata v12 response encode: 3 brokers, 20 topics x 6 partitions, replicas 3.
- Request header v2 decode: what every request pays first.
Entities are built with plain ints (as the listener does): kio's phantom constructors (i32(x))
validate at run time and cost more than the writing. Baseline per row: protobuf parse / serialize of the SDK path's message with the same content
(riverbed._proto: header + body; the record batches in their own frames, never copied).
The ratio column is kio / protobuf: the cost of the Kafka listener's codec against the
ZeroMQ path's codec for the same work.
"""
from __future__ import annotations

import argparse
import json
import datetime
import io
import time
import uuid

from kio.schema.fetch.v12 import response as fetch_res
from kio.schema.metadata.v12 import response as md_res
from kio.schema.produce.v9 import request as produce_req
from kio.schema.produce.v9 import response as produce_res
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_reader, entity_writer

from riverbed._proto.v1 import common_pb2, fetch_pb2, header_pb2, metadata_pb2, produce_pb2
from services.gateway.kafka import fast


def _encode(entity) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def _best_us(fn, seconds: float) -> float:
    best = float("inf")
    for _ in range(3):
        n = 0
        t0 = time.perf_counter()
        end = t0 + seconds
        while True:
            for _ in range(50):
                fn()
            n += 50
            now = time.perf_counter()
            if now >= end:
                break
        best = min(best, (now - t0) / n * 1e6)
    return best


def rows(partitions: int, batch_bytes: int, seconds: float) -> list[tuple[str, float, float]]:
    batch = bytes(range(256)) * (batch_bytes // 256) + b"\0" * (batch_bytes % 256)
    out = []

    # -- produce request decode
    req = produce_req.ProduceRequest(
        transactional_id=None, acks=-1, timeout=datetime.timedelta(milliseconds=30000),
        topic_data=(produce_req.TopicProduceData(name="orders", partition_data=tuple(
            produce_req.PartitionProduceData(index=p, records=batch)
            for p in range(partitions))),))
    kbytes = _encode(req)
    reader = entity_reader(produce_req.ProduceRequest)
    pb = produce_pb2.ProduceRequest(acks=-1, timeout_ms=30000)
    t = pb.topics.add(name="orders")
    for p in range(partitions):
        t.partitions.add(partition=p)
    pbytes = pb.SerializeToString()

    def pb_parse():
        produce_pb2.ProduceRequest.FromString(pbytes)
    out.append(("Produce v9 request decode", _best_us(lambda: reader(kbytes, 0), seconds),
                _best_us(pb_parse, seconds)))

    # -- fetch response encode
    def kio_fetch():
        return _encode(fetch_res.FetchResponse(
            throttle_time=datetime.timedelta(0),
            error_code=fetch_res.ErrorCode.none, session_id=0, responses=(
                fetch_res.FetchableTopicResponse(topic="orders", partitions=tuple(
                    fetch_res.PartitionData(
                        partition_index=p, error_code=fetch_res.ErrorCode.none,
                        high_watermark=1000, last_stable_offset=1000,
                        log_start_offset=0, aborted_transactions=(),
                        preferred_read_replica=-1, records=batch)
                    for p in range(partitions))),)))

    def pb_fetch():
        r = fetch_pb2.FetchResponse()
        tr = r.topics.add(name="orders")
        for p in range(partitions):
            tr.partitions.add(partition=p, high_watermark=1000, last_stable_offset=1000,
                              log_start_offset=0, log_end_offset=1000, leader_epoch=0)
        return r.SerializeToString()
    pb_fetch_us = _best_us(pb_fetch, seconds)
    out.append(("Fetch v12 response encode, kio", _best_us(kio_fetch, seconds), pb_fetch_us))

    def fast_fetch():
        return fast.fetch_response(12, 0, 0, 0, [("orders", [
            (p, 0, 1000, 1000, 0, memoryview(batch)) for p in range(partitions)])]).frame(7)
    out.append(("Fetch v12 response encode, fast.py", _best_us(fast_fetch, seconds),
                pb_fetch_us))

    # -- produce response encode (the answer to the request above)
    def kio_produce():
        return _encode(produce_res.ProduceResponse(
            throttle_time=datetime.timedelta(0), responses=(produce_res.TopicProduceResponse(
                name="orders", partition_responses=tuple(produce_res.PartitionProduceResponse(
                    index=p, error_code=produce_res.ErrorCode.none, base_offset=1000,
                    log_append_time=None, log_start_offset=0, record_errors=(),
                    error_message=None) for p in range(partitions))),)))

    def fast_produce():
        return fast.produce_response(9, 0, [("orders", [
            (p, 0, 1000, -1, 0, None) for p in range(partitions)])]).frame(7)

    def pb_produce():
        r = produce_pb2.ProduceResponse()
        tr = r.topics.add(name="orders")
        for p in range(partitions):
            tr.partitions.add(partition=p, base_offset=1000, log_append_time_ms=-1,
                              log_start_offset=0)
        return r.SerializeToString()
    pb_produce_us = _best_us(pb_produce, seconds)
    out.append(("Produce v9 response encode, kio", _best_us(kio_produce, seconds),
                pb_produce_us))
    out.append(("Produce v9 response encode, fast.py", _best_us(fast_produce, seconds),
                pb_produce_us))

    # -- metadata response encode
    def kio_md():
        return _encode(md_res.MetadataResponse(
            throttle_time=datetime.timedelta(0),
            brokers=tuple(md_res.MetadataResponseBroker(node_id=b,
                                                        host="127.0.0.1", port=9092 + b,
                                                        rack=None) for b in range(3)),
            cluster_id="c", controller_id=0,
            topics=tuple(md_res.MetadataResponseTopic(
                error_code=md_res.ErrorCode.none, name=f"topic-{t}", topic_id=uuid.UUID(int=0),
                is_internal=False, partitions=tuple(md_res.MetadataResponsePartition(
                    error_code=md_res.ErrorCode.none, partition_index=p,
                    leader_id=p % 3, leader_epoch=0,
                    replica_nodes=tuple(b for b in range(3)),
                    isr_nodes=tuple(b for b in range(3)),
                    offline_replicas=()) for p in range(6)),
                topic_authorized_operations=-2147483648) for t in range(20))))

    def pb_md():
        r = metadata_pb2.MetadataResponse(controller_id=0, cluster_id="c")
        for b in range(3):
            r.brokers.append(common_pb2.Broker(node_id=b, host="127.0.0.1", port=9092 + b))
        for t in range(20):
            tm = r.topics.add(name=f"topic-{t}")
            for p in range(6):
                tm.partitions.add(partition=p, leader=p % 3, leader_epoch=0,
                                  replicas=[0, 1, 2], isr=[0, 1, 2])
        return r.SerializeToString()
    out.append(("Metadata v12 response encode", _best_us(kio_md, seconds),
                _best_us(pb_md, seconds)))

    # -- header decode
    hbytes = _encode(RequestHeader(request_api_key=0, request_api_version=9,
                                   correlation_id=7, client_id="rdkafka"))
    hreader = entity_reader(RequestHeader)
    pbh = header_pb2.RequestHeader(api=1, api_version=0, correlation_id=7,
                                   client_id="rdkafka").SerializeToString()
    out.append(("Request header v2 decode", _best_us(lambda: hreader(hbytes, 0), seconds),
                _best_us(lambda: header_pb2.RequestHeader.FromString(pbh), seconds)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loadgen.kafka_codec",
                                 description="kio's encode/decode cost per request against the "
                                 "SDK path's protobuf for the same content (µs, one core)")
    ap.add_argument("--partitions", type=int, default=3, help="partitions per request (3)")
    ap.add_argument("--batch-bytes", type=int, default=16384,
                    help="record batch bytes per partition (16384)")
    ap.add_argument("--seconds", type=float, default=1.0, help="seconds per measurement (1)")
    ap.add_argument("--json", metavar="FILE",
                    help="also write the figures as JSON (riverbed-bench records them)")
    a = ap.parse_args(argv)
    print(f"{'operation':38} {'listener µs':>11} {'protobuf µs':>12} {'ratio':>7}")
    measured = rows(a.partitions, a.batch_bytes, a.seconds)
    for name, k, p in measured:
        print(f"{name:38} {k:11.1f} {p:12.1f} {k / p:7.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"partitions": a.partitions, "batch_bytes": a.batch_bytes,
                       "rows": [{"row": name, "listener_us": k, "protobuf_us": p, "ratio": k / p}
                                for name, k, p in measured]}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
