"""The Kafka listener beside the SDK path, in the same run (issue 25).

    .venv/bin/python -m loadgen.kafka_bench            # the rows below (a few minutes)
    .venv/bin/python -m loadgen.kafka_bench --quick    # fewer records (a short run)
    ... [--records N] [--e2e-records N] [--rounds R] [--json FILE]

Starts a fleet of its own (3 storage nodes, 1 controller, 1 gateway with its PLAINTEXT Kafka
listener, security.protocol NONE so neither path pays for encryption) and runs each row through
both doors of the same gateway, alternating, best of --rounds:

- produce, 100 B records to a fresh one-partition topic, linger.ms 5, no compression:
  acks=1 (replication factor 1) and acks=all (replication factor 3). Kafka: confluent-kafka's
  Producer (librdkafka) calling produce() per record, delivery reports for errors only, then
  flush(). SDK: `riverbed-perf produce --bulk` (Producer.send_many, the SDK's fast path), with the
  same batch size (librdkafka's default batch.size, 1 MB) and 5 requests in flight;
- produce with kcat (librdkafka's own C producer, Debian's package: `kcat -P -l FILE`), acks=1,
  the same settings: what librdkafka does without Python's per-record produce() call;
- consume: the records of the acks=1 topic read back from the beginning. Kafka: confluent-kafka's
  Consumer (assigned, no group), consume(batch); SDK: `riverbed-perf consume`;
- first, end-to-end latency at 1,000 records/s (100 B, acks=1, linger.ms 0, one partition): a producer
  here writes its send time into each value, a consumer in another process subtracts it on
  arrival (p50 / p99 / p99.9 in ms). Kafka: confluent-kafka on both ends (5 requests in flight
  as the SDK's producer, socket.nagle.disable, fetch.wait.max.ms 100, fetch.min.bytes 1); SDK:
  `riverbed-perf e2e` with the same settings (loadgen.hops's e2e row measures the same path).
  Run first, on a settled fleet (see run_rows).

Each throughput row reports records/s, MB/s of record values, the gateway's CPU per record (µs,
user + system time of the gateway process over the row, loadgen/proc_cpu.py), the requests the
gateway served for the row (its `riverbed_gateway_kafka_requests_total` and
`riverbed_gateway_requests_total` counters) as records per request and CPU per request, and the
ratios Kafka ÷ SDK (records/s: aim >= 0.9; gateway CPU per record: aim <= 1). The gateway's
work is mostly per request: a client whose batches are fuller (the SDK's send_many fills 1 MB
batches at once; librdkafka sends what linger.ms 5 gathered) costs it less per record, which
the records-per-request column shows. The machine's load average is printed with the figures:
on a shared machine the absolute figures move with the neighbours, the ratios from the same run
much less.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import shutil
import struct
import sys
import tempfile
import time
import uuid

from loadgen import proc_cpu

RECORD_SIZE = 100
LINGER_MS = 5
BATCH_BYTES = 1_000_000            # librdkafka's default batch.size; the SDK rows use the same
MAX_IN_FLIGHT = 5
E2E_RATE = 1000.0
E2E_FETCH_MAX_WAIT_MS = 100
E2E_SETTLE_S = 5.0
RECORDS = 1_000_000
QUICK_RECORDS = 200_000
E2E_RECORDS = 5000
QUICK_E2E_RECORDS = 2000
_STAMP = struct.Struct(">q")


# ---------------------------------------------------------------------------------------------
# rows through the Kafka listener (confluent-kafka)

def kafka_create_topic(bootstrap: str, topic: str, replication_factor: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=1,
                                           replication_factor=replication_factor)]).values():
        f.result(60)
    # until the partition has a leader (the controller elects it just after)
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while True:
        md = p.list_topics(topic, timeout=10).topics.get(topic)
        if md is not None and md.partitions and all(x.leader >= 0 for x in md.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: no leader after 60 s")
        time.sleep(0.2)


def kafka_delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})    # alive until the futures are done
    try:
        for f in admin.delete_topics([topic]).values():
            f.result(60)
    except Exception as e:  # noqa: BLE001 - the figures stand; only disk is at stake
        print(f"  (could not delete {topic}: {e})", file=sys.stderr)


def kafka_produce(bootstrap: str, topic: str, n: int, acks: str) -> dict:
    """confluent-kafka's Producer: produce() per record, flush(); records/s from the first
    produce() to the end of flush()."""
    from confluent_kafka import Producer
    failed = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": LINGER_MS,
                  "batch.size": BATCH_BYTES, "batch.num.messages": 1_000_000,
                  "queue.buffering.max.messages": 2_000_000,
                  "queue.buffering.max.kbytes": 2_097_151,
                  "max.in.flight.requests.per.connection": MAX_IN_FLIGHT,
                  "enable.idempotence": False, "delivery.report.only.error": True,
                  "on_delivery": lambda err, msg: failed.append(err) if err else None})
    p.list_topics(topic, timeout=30)               # metadata before the clock starts
    value = b"x" * RECORD_SIZE
    produce, poll = p.produce, p.poll
    t0 = time.perf_counter()
    for _ in range(n):
        try:
            produce(topic, value, partition=0)
        except BufferError:
            poll(0.01)
            produce(topic, value, partition=0)
    left = p.flush(120)
    seconds = time.perf_counter() - t0
    if left or failed:
        raise RuntimeError(f"Kafka produce: {left} undelivered, {len(failed)} failed "
                           f"({failed[:1]})")
    return {"records": n, "seconds": seconds}


def kcat_produce(bootstrap: str, topic: str, n: int, acks: str, records_file: str) -> dict:
    """kcat -P (librdkafka in C): one record per line of `records_file` (n lines of
    RECORD_SIZE - 1 bytes and a newline)."""
    import subprocess
    t0 = time.perf_counter()
    proc = subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", "0",
                           "-X", f"linger.ms={LINGER_MS}", "-X", f"batch.size={BATCH_BYTES}",
                           "-X", "batch.num.messages=1000000",
                           "-X", "queue.buffering.max.messages=2000000",
                           "-X", f"max.in.flight.requests.per.connection={MAX_IN_FLIGHT}",
                           "-X", f"acks={acks}", "-l", records_file],
                          capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"kcat -P failed ({proc.returncode}): {proc.stderr[-500:]}")
    return {"records": n, "seconds": seconds}


def records_file(n: int) -> str:
    fd, path = tempfile.mkstemp(prefix="kafka-bench-records-", suffix=".txt")
    line = b"x" * (RECORD_SIZE - 1) + b"\n"
    with os.fdopen(fd, "wb") as f:
        for _ in range(n // 10_000):
            f.write(line * 10_000)
        f.write(line * (n % 10_000))
    return path


def kafka_consume(bootstrap: str, topic: str, n: int) -> dict:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                  "queued.max.messages.kbytes": 262144})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    t0 = None
    deadline = time.monotonic() + 300
    try:
        while got < n:
            msgs = c.consume(10000, 1.0)
            if msgs and t0 is None:
                t0 = time.perf_counter()
            got += sum(1 for m in msgs if m.error() is None)
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kafka consume: {got} of {n} records in 300 s")
        seconds = time.perf_counter() - (t0 or time.perf_counter())
    finally:
        c.close()
    return {"records": got, "seconds": seconds}


def _kafka_e2e_consumer(bootstrap: str, topic: str, n: int, q) -> None:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"e2e-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": E2E_FETCH_MAX_WAIT_MS,
                  "fetch.min.bytes": 1, "socket.nagle.disable": True})
    c.assign([TopicPartition(topic, 0, 0)])
    c.consume(1, 1.0)                       # connected and fetching before the producer starts
    q.put(("ready", None))
    lat: list[float] = []
    deadline = time.monotonic() + n / E2E_RATE + 120
    while len(lat) < n and time.monotonic() < deadline:
        m = c.poll(0.5)               # (consume(k, t) would wait for k records or t seconds)
        if m is not None and m.error() is None and m.value() and len(m.value()) >= 8:
            lat.append((time.time_ns() - _STAMP.unpack_from(m.value())[0]) / 1e6)
    c.close()
    q.put(("done", lat))


def kafka_e2e(bootstrap: str, topic: str, n: int) -> dict:
    from confluent_kafka import Producer
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=_kafka_e2e_consumer, args=(bootstrap, topic, n, q), daemon=True)
    proc.start()
    try:
        kind, _ = q.get(timeout=120)
        # 5 requests in flight, as the SDK's producer (librdkafka's default is a million:
        # without a bound every record is a request of its own at any rate)
        p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0,
                      "max.in.flight.requests.per.connection": MAX_IN_FLIGHT,
                      "socket.nagle.disable": True})
        p.list_topics(topic, timeout=30)
        pad = b"x" * (RECORD_SIZE - 8)
        start = time.perf_counter()
        for i in range(n):
            due = start + i / E2E_RATE
            while (now := time.perf_counter()) < due:
                time.sleep(min(due - now, 0.001))
            p.produce(topic, _STAMP.pack(time.time_ns()) + pad, partition=0)
            p.poll(0)
        p.flush(60)
        kind, lat = q.get(timeout=n / E2E_RATE + 180)
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
    return {"records": len(lat), "latency_ms": percentiles(lat)}


# ---------------------------------------------------------------------------------------------
# rows through the SDK (riverbed-perf, as loadgen.bench runs it)

def _perf(argv: list[str]):
    from loadgen.bench import _perf as perf
    return perf(argv)


def sdk_produce(endpoint: str, topic: str, n: int, acks: str, replication_factor: int) -> dict:
    s = _perf(["produce", "--bootstrap-server", endpoint, "--topic", topic,
               "--num-records", str(n), "--record-size", str(RECORD_SIZE), "--bulk",
               "--acks", acks, "--batch-size", str(BATCH_BYTES), "--linger-ms", str(LINGER_MS),
               "--max-in-flight", str(MAX_IN_FLIGHT), "--partition", "0", "--create-topic",
               "--partitions", "1", "--replication-factor", str(replication_factor),
               "--reporting-interval", "600000", "--no-progress"])
    return {"records": s.records, "seconds": s.records / s.records_per_sec}


def sdk_consume(endpoint: str, topic: str, n: int) -> dict:
    s = _perf(["consume", "--bootstrap-server", endpoint, "--topic", topic,
               "--num-records", str(n), "--reporting-interval", "600000", "--no-progress"])
    return {"records": s.records, "seconds": s.records / s.records_per_sec}


def sdk_e2e(endpoint: str, topic: str, n: int) -> dict:
    s = _perf(["e2e", "--bootstrap-server", endpoint, "--topic", topic, "--num-records", str(n),
               "--throughput", str(E2E_RATE), "--record-size", str(RECORD_SIZE), "--acks", "1",
               "--partition", "0", "--linger-ms", "0", "--fetch-min-bytes", "1",
               "--consumer-prop", f"fetch_max_wait_ms={E2E_FETCH_MAX_WAIT_MS}",
               "--create-topic", "--partitions", "1", "--replication-factor", "1",
               "--reporting-interval", "600000", "--no-progress"])
    return {"records": s.records, "latency_ms": {k: s.latency_ms[k] for k in ("p50", "p99", "p999")
                                                 if k in s.latency_ms}}


# ---------------------------------------------------------------------------------------------
# figures

def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": float("nan"), "p99": float("nan"), "p999": float("nan")}
    v = sorted(values)

    def at(q: float) -> float:
        return v[min(len(v) - 1, int(q * len(v)))]
    return {"p50": at(0.50), "p99": at(0.99), "p999": at(0.999)}


def figures(result: dict, cpu_s: float, requests: float = 0.0) -> dict:
    n = result["records"]
    rps = n / result["seconds"] if result["seconds"] > 0 else 0.0
    return {"records": n, "records_per_sec": rps, "mb_per_sec": rps * RECORD_SIZE / 1e6,
            "gateway_us_per_record": cpu_s * 1e6 / n if n else float("nan"),
            "requests": requests,
            "records_per_request": n / requests if requests else float("nan"),
            "gateway_us_per_request": cpu_s * 1e6 / requests if requests else float("nan")}


class GatewayCounters:
    """The gateway's request counters (Prometheus text from its metrics.port): Kafka requests
    per Kafka API and SDK requests per Riverbed API."""

    def __init__(self, url: str | None):
        self.url = url

    def read(self) -> dict[str, float]:
        import re
        import urllib.request
        if self.url is None:
            return {}
        try:
            text = urllib.request.urlopen(self.url, timeout=10).read().decode()
        except OSError:
            return {}
        out: dict[str, float] = {}
        for name, api, value in re.findall(
                r'^(riverbed_gateway_kafka_requests_total|riverbed_gateway_requests_total)'
                r'\{[^}]*api="([^"]+)"[^}]*\} (\S+)$', text, re.M):
            key = f"{'kafka' if 'kafka' in name else 'sdk'}:{api}"
            out[key] = out.get(key, 0.0) + float(value)
        return out


# the requests that carry a row's records, per path
ROW_APIS = ("kafka:Produce", "sdk:PRODUCE", "kafka:Fetch", "sdk:FETCH")


def _measured(gateway_pids: list[int], counters: GatewayCounters, fn, *args) -> dict:
    c0 = counters.read()
    before = proc_cpu.snapshot({"gateway": gateway_pids})
    result = fn(*args)
    used = proc_cpu.delta(before, proc_cpu.snapshot({"gateway": gateway_pids}))["gateway"]
    c1 = counters.read()
    requests = sum(c1.get(k, 0.0) - c0.get(k, 0.0) for k in ROW_APIS)
    return figures(result, used.total, requests)


def _best(a: dict | None, b: dict) -> dict:
    return b if a is None or b["records_per_sec"] > a["records_per_sec"] else a


def run_rows(endpoint: str, kafka: str, gateway_pids: list[int], records: int,
             e2e_records: int, rounds: int, counters: GatewayCounters | None = None) -> dict:
    counters = counters or GatewayCounters(None)
    rows: dict[str, dict] = {}
    consume_topics = {}
    lines = records_file(records)
    try:
        return _run_rows(endpoint, kafka, gateway_pids, records, e2e_records, rounds, counters,
                         rows, consume_topics, lines)
    finally:
        os.unlink(lines)


def _run_rows(endpoint, kafka, gateway_pids, records, e2e_records, rounds, counters, rows,
              consume_topics, lines) -> dict:
    if e2e_records > 0:
        # First, on a settled fleet: the throughput rows leave the storage nodes flushing fresh
        # segments, and the SDK rows (riverbed-perf, in this process) leave this process's
        # interpreter busier than a fresh client's: either made the Kafka row several times
        # slower than the SDK row measured after it.
        time.sleep(E2E_SETTLE_S)
        k_topic = f"kbench-e2e-{uuid.uuid4().hex[:6]}"
        kafka_create_topic(kafka, k_topic, 1)
        k = kafka_e2e(kafka, k_topic, e2e_records)
        s = sdk_e2e(endpoint, f"kbench-e2e-sdk-{uuid.uuid4().hex[:6]}", e2e_records)
        rows["e2e"] = {"kafka": k, "sdk": s, "rate": E2E_RATE}
        print(f"  e2e p50: Kafka {k['latency_ms']['p50']:.2f} ms, SDK "
              f"{s['latency_ms']['p50']:.2f} ms", file=sys.stderr, flush=True)
        kafka_delete_topic(kafka, k_topic)
    for rnd in range(rounds):
        for acks, rf in (("1", 1), ("all", 3)):
            name = f"produce acks={acks}"
            row = rows.setdefault(name, {"kafka": None, "sdk": None, "acks": acks,
                                         "replication_factor": rf})
            k_topic = f"kbench-k-{acks}-{uuid.uuid4().hex[:6]}"
            s_topic = f"kbench-s-{acks}-{uuid.uuid4().hex[:6]}"
            kafka_create_topic(kafka, k_topic, rf)
            k = _measured(gateway_pids, counters, kafka_produce, kafka, k_topic, records, acks)
            s = _measured(gateway_pids, counters, sdk_produce, endpoint, s_topic, records,
                          "-1" if acks == "all" else acks, rf)
            row["kafka"], row["sdk"] = _best(row["kafka"], k), _best(row["sdk"], s)
            print(f"  round {rnd + 1} {name}: Kafka {k['records_per_sec']:,.0f}/s, "
                  f"SDK {s['records_per_sec']:,.0f}/s", file=sys.stderr, flush=True)
            if acks == "1":
                consume_topics[rnd] = (k_topic, s_topic)
                # the same row with kcat (librdkafka in C), beside the same SDK figure
                kc_topic = f"kbench-kcat-{uuid.uuid4().hex[:6]}"
                kafka_create_topic(kafka, kc_topic, rf)
                kc = _measured(gateway_pids, counters, kcat_produce, kafka, kc_topic, records,
                               acks, lines)
                kc_row = rows.setdefault("produce kcat acks=1", {"kafka": None, "sdk": None})
                kc_row["kafka"], kc_row["sdk"] = _best(kc_row["kafka"], kc), row["sdk"]
                print(f"  round {rnd + 1} produce kcat acks=1: {kc['records_per_sec']:,.0f}/s",
                      file=sys.stderr, flush=True)
                kafka_delete_topic(kafka, kc_topic)
            else:
                kafka_delete_topic(kafka, k_topic)
                kafka_delete_topic(kafka, s_topic)
        k_topic, s_topic = consume_topics[rnd]
        row = rows.setdefault("consume", {"kafka": None, "sdk": None})
        k = _measured(gateway_pids, counters, kafka_consume, kafka, k_topic, records)
        s = _measured(gateway_pids, counters, sdk_consume, endpoint, s_topic, records)
        row["kafka"], row["sdk"] = _best(row["kafka"], k), _best(row["sdk"], s)
        print(f"  round {rnd + 1} consume: Kafka {k['records_per_sec']:,.0f}/s, "
              f"SDK {s['records_per_sec']:,.0f}/s", file=sys.stderr, flush=True)
        kafka_delete_topic(kafka, k_topic)
        kafka_delete_topic(kafka, s_topic)
    return rows


def _num(x) -> str:
    return "-" if x is None or x != x else f"{x:,.0f}"


def format_report(rows: dict, load_average: tuple[float, float, float], records: int) -> str:
    """The rows as a table: Kafka beside the SDK, with the ratios."""
    head = (f"{'row':<19} {'path':<6} {'records/s':>11} {'MB/s':>7} {'gw µs/rec':>9} "
            f"{'rec/req':>7} {'gw µs/req':>9} {'Kafka÷SDK rec/s':>15} {'Kafka÷SDK CPU':>13}")
    lines = [f"Kafka listener vs SDK path, {records:,} records of {RECORD_SIZE} B per row, "
             f"load average {load_average[0]:.2f} {load_average[1]:.2f} {load_average[2]:.2f}",
             head, "-" * len(head)]
    for name, row in rows.items():
        if name == "e2e":
            continue
        k, s = row["kafka"], row["sdk"]
        ratio = k["records_per_sec"] / s["records_per_sec"] if s["records_per_sec"] else 0.0
        cpu = (k["gateway_us_per_record"] / s["gateway_us_per_record"]
               if s["gateway_us_per_record"] else float("nan"))
        lines.append(f"{name:<19} {'Kafka':<6} {k['records_per_sec']:>11,.0f} "
                     f"{k['mb_per_sec']:>7.1f} {k['gateway_us_per_record']:>9.2f} "
                     f"{_num(k.get('records_per_request')):>7} "
                     f"{_num(k.get('gateway_us_per_request')):>9} "
                     f"{ratio:>15.2f} {cpu:>13.2f}")
        lines.append(f"{'':<19} {'SDK':<6} {s['records_per_sec']:>11,.0f} "
                     f"{s['mb_per_sec']:>7.1f} {s['gateway_us_per_record']:>9.2f} "
                     f"{_num(s.get('records_per_request')):>7} "
                     f"{_num(s.get('gateway_us_per_request')):>9}")
    e2e = rows.get("e2e")
    if e2e:
        lines.append("")
        lines.append(f"end-to-end latency at {e2e['rate']:,.0f} records/s (ms)   "
                     f"{'p50':>7} {'p99':>7} {'p99.9':>7}   records")
        for path, key in (("Kafka", "kafka"), ("SDK", "sdk")):
            lat = e2e[key]["latency_ms"]
            lines.append(f"  {path:<36} {lat['p50']:>7.2f} {lat['p99']:>7.2f} "
                         f"{lat.get('p999', float('nan')):>7.2f}   {e2e[key]['records']:>7}")
    return "\n".join(lines)


def _metrics_url(fleet) -> str | None:
    """The first gateway's Prometheus endpoint (its metrics.port), None without one."""
    for name in fleet.names():
        rec = fleet.process(name)
        if rec.role == "gateway" and rec.config:
            with open(rec.config) as f:
                for line in f:
                    if line.startswith("metrics.port="):
                        port = int(line.split("=", 1)[1])
                        return f"http://{fleet.host}:{port}/metrics" if port > 0 else None
    return None


@contextlib.contextmanager
def _fleet():
    from deploy.fleet import Fleet, free_base_port
    d = tempfile.mkdtemp(prefix="riverbed-kafka-bench-")
    base = free_base_port()
    print(f"starting a fleet (3 storage nodes, 1 controller, 1 gateway, security.protocol NONE) "
          f"under {d}, base port {base}", file=sys.stderr, flush=True)
    with Fleet(d, base, storage_nodes=3, controllers=1, gateways=1,
               security_protocol="NONE") as fleet:
        fleet.up(detach=True)
        yield fleet
    shutil.rmtree(d, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loadgen.kafka_bench",
        description="The Kafka listener (confluent-kafka) beside the SDK path (riverbed-perf) "
                    "through the same gateway of a fleet of its own: produce (acks=1, acks=all), "
                    "consume and end-to-end latency at 1,000 records/s; records/s, MB/s and the "
                    "gateway's CPU per record, with the ratios Kafka ÷ SDK from the same run.")
    parser.add_argument("--quick", action="store_true",
                        help=f"a short run: {QUICK_RECORDS:,} records per row, "
                             f"{QUICK_E2E_RECORDS:,} for the latency row, one round")
    parser.add_argument("--records", type=int, help=f"records per row (default {RECORDS:,})")
    parser.add_argument("--e2e-records", type=int,
                        help=f"records of the latency row (default {E2E_RECORDS:,}; 0 skips it)")
    parser.add_argument("--rounds", type=int, help="rounds, best kept (default 2; 1 with --quick)")
    parser.add_argument("--json", help="also write the rows as JSON to this file")
    args = parser.parse_args(argv)
    records = args.records or (QUICK_RECORDS if args.quick else RECORDS)
    e2e = args.e2e_records if args.e2e_records is not None else (
        QUICK_E2E_RECORDS if args.quick else E2E_RECORDS)
    rounds = args.rounds or (1 if args.quick else 2)
    with _fleet() as fleet:
        pids = proc_cpu.fleet_pids(fleet)["gateway"]
        rows = run_rows(fleet.gateway_endpoint, fleet.kafka_bootstrap_servers, pids, records,
                        e2e, rounds, GatewayCounters(_metrics_url(fleet)))
    load = os.getloadavg()
    print(format_report(rows, load, records))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"records": records, "load_average": load, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
