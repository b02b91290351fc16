"""The SDK's Kafka-shaped client metrics: the pure core (sampled rates, averages and maxima with
the time passed in), what the sender, the consumer and the group membership record into it
(scripted in-memory gateways, no sockets), the OpenTelemetry instruments read from the same
counters under an application's MeterProvider, and the fetch / group / commit spans."""
from __future__ import annotations

import math

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sdk_fakes import FakeGateway
from test_consumer_admin import Log, batch
from test_consumer_admin import metadata as one_partition_metadata
from test_group_membership import FakeGroupService, make, poll_all
from test_producer import ProduceLog, make_sender, metadata_handler, step

from riverbed import client_otel, errors, tracing
from riverbed._proto.v1 import header_pb2
from riverbed.client_metrics import ConsumerMetrics, ProducerMetrics, SampledStat
from riverbed.consumer import Consumer
from riverbed.structs import TopicPartition

ApiKey = header_pb2.ApiKey
TP0 = TopicPartition("t", 0)


# ------------------------------------------------------------------------- the pure core

def test_sampled_stat_avg_max_and_rates_over_the_live_windows():
    s = SampledStat(window_ms=1000, samples=2)
    assert math.isnan(s.avg(0)) and math.isnan(s.max(0)) and s.rate(0) == 0.0
    s.record(10, 0)
    s.record(30, 500)
    assert s.avg(500) == 20 and s.max(500) == 30 and s.count(500) == 2
    # Kafka's Rate: at least samples - 1 = 1 whole window of elapsed time
    assert s.rate(500) == pytest.approx(40 / 1.5)      # 500 ms + one padded window
    assert s.count_rate(500) == pytest.approx(2 / 1.5)
    s.record(100, 1200)                                # a second window
    assert s.max(1200) == 100 and s.avg(1200) == pytest.approx(140 / 3)
    assert s.rate(1200) == pytest.approx(140 / 1.2)     # one full window: no padding
    # the first window (started at 0) expires at 2000; the second at 3200
    assert s.max(2100) == 100 and s.count(2100) == 1
    assert math.isnan(s.max(3300)) and s.rate(3300) == 0.0
    assert s.count_total == 3 and s.sum_total == 140    # totals never expire


def test_sampled_stat_keeps_at_most_its_samples_and_refuses_bad_windows():
    s = SampledStat(window_ms=10, samples=2)
    for t in range(0, 100, 10):
        s.record(t, t)
    assert len(s._old) == 1 and s.max(95) == 90 and s.avg(95) == 85
    with pytest.raises(ValueError):
        SampledStat(window_ms=0)
    with pytest.raises(ValueError):
        SampledStat(samples=0)


def test_producer_metrics_snapshot_names_and_values():
    m = ProducerMetrics(window_ms=1000, samples=2)

    class Batch:
        def __init__(self, size, records, created_ms):
            self.payload = b"x" * size
            self.uncompressed_size = 200
            self.record_count = records
            self.created_ms = created_ms
    m.request_sent([Batch(80, 10, -4.0), Batch(120, 20, -8.0)], 0)
    m.response(2.5, 10)
    m.retried(10, "NOT_LEADER_FOR_PARTITION", 10)
    m.failed(5, "MESSAGE_TOO_LARGE", 10)
    d = m.snapshot(1000, in_flight=1, buffer_total_bytes=1000, buffer_used_bytes=300)
    assert d["record-send-total"] == 30 and d["record-send-rate"] == pytest.approx(30 / 1.0)
    assert d["records-per-request-avg"] == 30 and d["request-total"] == 1
    assert d["batch-size-avg"] == 100 and d["batch-size-max"] == 120
    assert d["compression-rate-avg"] == pytest.approx(0.5)
    assert d["record-queue-time-avg"] == 6 and d["record-queue-time-max"] == 8
    assert d["request-latency-avg"] == 2.5 and d["response-total"] == 1
    assert d["requests-in-flight"] == 1
    assert d["buffer-total-bytes"] == 1000 and d["buffer-available-bytes"] == 700
    assert d["record-retry-total"] == 10 and d["record-error-total"] == 5
    assert d["errors-by-code"] == {"NOT_LEADER_FOR_PARTITION": 1, "MESSAGE_TOO_LARGE": 1}
    assert d["outgoing-byte-total"] == 200


def test_consumer_metrics_snapshot_names_and_values():
    m = ConsumerMetrics(window_ms=1000, samples=2)
    m.polled(0)
    m.polled(40)
    m.polled(100)
    m.consumed(7, 100)
    m.fetched(5.0, 700, 7, 50)
    m.lag(("t", 0), 12, 50)
    m.lag(("t", 1), 3, 60)
    m.committed(4.0, 70)
    m.joined(20.0, 80)
    m.synced(10.0, 90)
    m.rebalanced(30.0, 90)
    d = m.snapshot(100, assigned_partitions=2, lag_by_partition={"t-0": 1, "t-1": 0})
    assert d["time-between-poll-avg"] == 50 and d["time-between-poll-max"] == 60
    assert d["last-poll-seconds-ago"] == 0.0
    assert d["records-consumed-total"] == 7 and d["fetch-total"] == 1
    assert d["fetch-size-avg"] == 700 and d["records-per-request-avg"] == 7
    assert d["fetch-latency-max"] == 5.0 and d["bytes-consumed-total"] == 700
    assert d["records-lag-max"] == 12 and d["records-lag"] == {"t-0": 1, "t-1": 0}
    assert d["records-lag-max-by-partition"] == {"t-0": 12, "t-1": 3}
    assert d["commit-total"] == 1 and d["commit-latency-avg"] == 4.0
    assert d["rebalance-total"] == 1 and d["rebalance-latency-avg"] == 30.0
    assert d["join-time-avg"] == 20.0 and d["sync-time-max"] == 10.0
    assert d["assigned-partitions"] == 2 and d["last-rebalance-seconds-ago"] == pytest.approx(0.01)
    # lag windows expired: the current lags stand in, the partitions' windows are forgotten
    d = m.snapshot(5000, assigned_partitions=2, lag_by_partition={"t-0": 4})
    assert d["records-lag-max"] == 4 and d["records-lag-max-by-partition"] == {}
    assert m.records_lag_by_partition == {}


# ------------------------------------------------------------------- what the clients record

def test_sender_counts_per_request_and_batch_and_errors_per_code():
    log = ProduceLog(script=[{("t", 0): 6}, {}, {("t", 1): 10}])  # NOT_LEADER, ok, TOO_LARGE
    gw = FakeGateway({ApiKey.METADATA: metadata_handler(), ApiKey.PRODUCE: log})
    conn, a, s = make_sender(gw)
    f0 = a.append(TopicPartition("t", 0), 1, None, b"a", (), now_ms=0)
    step(s)                                       # NOT_LEADER: retried
    step(s, now=1)                                # acknowledged
    f1 = a.append(TopicPartition("t", 1), 1, None, b"b", (), now_ms=0)
    step(s, now=2)                                # MESSAGE_TOO_LARGE: failed
    assert f0.result(timeout=0).offset == 0
    with pytest.raises(errors.MessageTooLargeError):
        f1.result(timeout=0)
    d = s.metrics.snapshot(0, in_flight=0, buffer_total_bytes=a.buffer_memory,
                           buffer_used_bytes=a.memory_used)
    assert d["request-total"] == 3 and d["record-send-total"] == 3
    assert d["response-total"] == 3 and d["request-latency-max"] >= 0
    assert d["record-retry-total"] == 1 and d["record-error-total"] == 1
    assert d["errors-by-code"] == {"NOT_LEADER_FOR_PARTITION": 1, "MESSAGE_TOO_LARGE": 1}
    assert d["batch-size-avg"] > 61                   # a v2 batch: 61 bytes of header + a record
    assert d["compression-rate-avg"] == 1.0           # uncompressed
    assert d["buffer-available-bytes"] == a.buffer_memory


def make_log(n_batches=3, per_batch=4):
    batches = []
    for i in range(n_batches):
        base = i * per_batch
        batches.append((base, batch(base, [b"v%d" % (base + k) for k in range(per_batch)]),
                        per_batch))
    return Log(batches)


def test_consumer_records_fetches_polls_and_lag_from_batch_headers():
    log = make_log()
    gw = FakeGateway({ApiKey.FETCH: log.fetch, ApiKey.LIST_OFFSETS: log.list_offsets,
                      ApiKey.METADATA: one_partition_metadata})
    c = Consumer("t", bootstrap="127.0.0.1:1", _channel_factory=gw.factory,
                 auto_offset_reset="earliest")
    got = 0
    for _ in range(10):
        got += sum(len(r) for r in c.poll(timeout_ms=0).values())
        if got == 12:
            break
    assert got == 12
    m = c.metrics()
    fetches = len([r for r in gw.requests if r[0] == ApiKey.FETCH])
    assert m["records-consumed-total"] == 12 == m["records_consumed"]
    assert 1 <= m["fetch-total"] <= fetches
    assert m["bytes-consumed-total"] == m["bytes_fetched"] > 0
    assert m["fetch-size-max"] >= m["fetch-size-avg"] > 0
    assert m["records-per-request-avg"] > 0
    assert m["records-lag"] == {"t-0": 0} and m["records_lag_max"] == 0
    assert m["records-lag-max"] >= 4                  # the first answer left batches behind
    assert m["records-lag-max-by-partition"]["t-0"] == m["records-lag-max"]
    assert m["time-between-poll-max"] >= 0 and m["assigned-partitions"] == 1
    assert math.isnan(m["commit-latency-avg"]) and m["rebalance-total"] == 0
    c.close()


def test_group_consumer_records_rebalances_joins_syncs_and_commits():
    svc = FakeGroupService()
    c, clock = make(svc)
    c.subscribe(["t"])
    poll_all(c)
    c.commit()
    m = c.metrics()
    assert m["rebalance-total"] == 1 == m["rebalances"]
    assert m["join-time-avg"] == 0 and m["sync-time-avg"] == 0    # the fake clock stood still
    assert m["rebalance-latency-max"] == 0 and m["failed-rebalance-total"] == 0
    assert m["commit-total"] == 1 and m["commit-latency-max"] == 0
    assert m["assigned-partitions"] == 4
    c.close()


# ----------------------------------------------------------------- OpenTelemetry, when asked

def test_no_meter_provider_registers_nothing():
    assert not client_otel.meter_configured()
    log = make_log()
    gw = FakeGateway({ApiKey.FETCH: log.fetch, ApiKey.LIST_OFFSETS: log.list_offsets,
                      ApiKey.METADATA: one_partition_metadata})
    c = Consumer("t", bootstrap="127.0.0.1:1", _channel_factory=gw.factory)
    assert not any(c in reg.clients for reg in client_otel._registries.values())
    c.close()


def test_instruments_read_the_clients_metrics_under_the_applications_provider(monkeypatch):
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    monkeypatch.setattr(client_otel, "_provider", lambda: provider)
    monkeypatch.setattr(client_otel, "_registries", {})
    log = make_log()
    gw = FakeGateway({ApiKey.FETCH: log.fetch, ApiKey.LIST_OFFSETS: log.list_offsets,
                      ApiKey.METADATA: one_partition_metadata})
    c = Consumer("t", bootstrap="127.0.0.1:1", _channel_factory=gw.factory, client_id="app-1",
                 auto_offset_reset="earliest")
    got = 0
    for _ in range(10):
        got += sum(len(r) for r in c.poll(timeout_ms=0).values())
    assert got == 12

    def points():
        out: dict = {}
        data = reader.get_metrics_data()          # None when nothing was observed
        for rm in (data.resource_metrics if data is not None else ()):
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    for p in metric.data.data_points:
                        out[(metric.name, tuple(sorted(p.attributes.items())))] = p.value
        return out
    pts = points()
    me = (("client.id", "app-1"),)
    assert pts[("riverbed.consumer.records_consumed_total", me)] == 12
    assert pts[("riverbed.consumer.assigned_partitions", me)] == 1
    assert pts[("riverbed.consumer.fetch_total", me)] >= 1
    assert pts[("riverbed.consumer.records_lag",
                (("client.id", "app-1"), ("messaging.destination.name", "t"),
                 ("messaging.destination.partition.id", "0")))] == 0
    # NaN stats (no commit measured) are left out rather than exported as NaN
    assert ("riverbed.consumer.commit_latency_avg", me) not in pts
    c.close()
    assert not any(name.endswith("records_consumed_total") for name, _ in points())
    provider.shutdown()


# ----------------------------------------------------------------------- spans, when asked

@pytest.fixture
def spans(monkeypatch):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    class Api:     # tracing.tracer() asks the API for the global provider: this one instead
        get_tracer_provider = staticmethod(lambda: provider)
    monkeypatch.setattr(tracing, "_trace", Api)
    yield exporter
    provider.shutdown()


def test_a_fetch_is_a_consumer_poll_span_with_messaging_attributes(spans):
    log = make_log()
    gw = FakeGateway({ApiKey.FETCH: log.fetch, ApiKey.LIST_OFFSETS: log.list_offsets,
                      ApiKey.METADATA: one_partition_metadata})
    c = Consumer("t", bootstrap="127.0.0.1:1", _channel_factory=gw.factory,
                 auto_offset_reset="earliest")
    c.poll(timeout_ms=0)
    c.close()
    polls = [s for s in spans.get_finished_spans() if s.name == "poll t"]
    assert polls, [s.name for s in spans.get_finished_spans()]
    first = polls[0]
    assert first.kind.name == "CONSUMER"
    a = dict(first.attributes)
    assert a["messaging.system"] == "riverbed" and a["messaging.operation.type"] == "receive"
    assert a["messaging.destination.name"] == "t"
    assert a["messaging.destination.partition.id"] == "0" and a["messaging.kafka.offset"] == 0
    assert a["messaging.batch.message_count"] >= 4       # whole batches of the first answer


def test_join_sync_and_commit_are_client_spans_named_for_the_group(spans):
    svc = FakeGroupService()
    c, _ = make(svc)
    c.subscribe(["t"])
    poll_all(c)
    c.commit({TopicPartition("t", 0): 3})
    c.close()
    by_name = {s.name: s for s in spans.get_finished_spans()}
    assert by_name["JoinGroup g"].kind.name == "CLIENT"
    assert by_name["SyncGroup g"].attributes["messaging.consumer.group.name"] == "g"
    commit = by_name["commit t"]
    assert commit.kind.name == "CLIENT"
    assert dict(commit.attributes) == {
        "messaging.system": "riverbed", "messaging.operation.type": "settle",
        "messaging.operation.name": "commit", "messaging.consumer.group.name": "g",
        "messaging.batch.message_count": 1, "messaging.destination.name": "t",
        "messaging.destination.partition.id": "0", "messaging.kafka.offset": 3}


def test_an_async_commit_is_timed_and_its_span_ends_with_the_answer(spans):
    svc = FakeGroupService()
    c, _ = make(svc)
    c.subscribe(["t"])
    poll_all(c)
    fut = c.commit_async({TopicPartition("t", 1): 2})
    assert not [s for s in spans.get_finished_spans() if s.name == "commit t"]
    c.poll(timeout_ms=0)                       # the answer is handled in a later poll
    assert fut.result(timeout=0)
    (commit,) = [s for s in spans.get_finished_spans() if s.name == "commit t"]
    assert commit.status.is_ok and commit.attributes["messaging.kafka.offset"] == 2
    assert c.metrics()["commit-total"] == 1 and c._group._commit_sent == {}
    c.close()
