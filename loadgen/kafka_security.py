"""What TLS and SASL/SCRAM cost a Kafka client of the gateway, beside PLAINTEXT on the same fleet
in the same run (issue 25, security)

    .venv/bin/python -m loadgen.kafka_security [--records 200000] [--connects 20]

A local fleet (1 controller, 1 storage node, 1 gateway; CurveZMQ inside, as `riverbed fleet up`
makes it) with its PLAINTEXT and SASL_SSL listeners; confluent-kafka (librdkafka) clients:
- produce: --records records of 100 B to a 1-partition topic, acks=1, linger.ms=5, lz4 off;
  records/s from the first send to the last delivery report, PLAINTEXT (the baseline) then
  SASL_SSL with SCRAM-SHA-512 (the fleet's kafka-client.conf);
- connect: --connects fresh clients, each timed from its creation to its first Metadata answer
  (TCP, then TLS and the SCRAM exchange on SASL_SSL); the median and the worst, in ms.
The ratio column is SASL_SSL / PLAINTEXT.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid

from deploy.fleet import Fleet, free_base_port


def _conf(path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines()
                if line.strip() and not line.startswith("#"))


def produce_rate(conf: dict, topic: str, records: int) -> float:
    from confluent_kafka import Producer
    p = Producer({**conf, "acks": "1", "linger.ms": 5, "queue.buffering.max.messages": 1000000})
    value = b"x" * 100
    done = [0]

    def report(err, msg):
        if err is None:
            done[0] += 1
    t0 = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value, on_delivery=report)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    elapsed = time.perf_counter() - t0
    assert done[0] == records, f"{done[0]} of {records} delivered"
    return records / elapsed


def connect_ms(conf: dict, n: int) -> list[float]:
    from confluent_kafka.admin import AdminClient
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        AdminClient(conf).list_topics(timeout=30)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loadgen.kafka_security", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200000)
    ap.add_argument("--connects", type=int, default=20)
    ap.add_argument("--json", metavar="FILE",
                    help="also write the figures as JSON (riverbed-bench records them)")
    a = ap.parse_args(argv)
    from confluent_kafka.admin import AdminClient, NewTopic
    with tempfile.TemporaryDirectory(prefix="kafka-security-bench-") as d, \
            Fleet(d, free_base_port(), storage_nodes=1, controllers=1, gateways=1) as fleet:
        fleet.up()
        plain = {"bootstrap.servers": fleet.kafka_bootstrap_servers}
        sasl = _conf(fleet.security.kafka_client_conf)
        rows = []
        rates = {}
        for name, conf in (("PLAINTEXT", plain), ("SASL_SSL", sasl)):
            topic = f"bench-{name.lower()}-{uuid.uuid4().hex[:6]}"
            admin = AdminClient(conf)
            for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
                f.result(60)
            produce_rate(conf, topic, min(a.records, 10000))          # warm-up, leaders elected
            rates[name] = (produce_rate(conf, topic, a.records), connect_ms(conf, a.connects))
        base_rate, base_conn = rates["PLAINTEXT"]
        for name, (rate, conn) in rates.items():
            rows.append((name, rate, statistics.median(conn), max(conn),
                         rate / base_rate, statistics.median(conn) / statistics.median(base_conn)))
    print(f"{'listener':<10} {'produce rec/s':>14} {'connect ms p50':>15} {'max':>8} "
          f"{'rate ratio':>11} {'connect ratio':>14}")
    for name, rate, p50, worst, rr, cr in rows:
        print(f"{name:<10} {rate:>14,.0f} {p50:>15.1f} {worst:>8.1f} {rr:>11.2f} {cr:>14.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"records": a.records, "connects": a.connects,
                       "rows": [{"row": name, "records_per_sec": rate, "connect_ms_p50": p50,
                                 "connect_ms_max": worst, "rate_ratio": rr, "connect_ratio": cr}
                                for name, rate, p50, worst, rr, cr in rows]}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
