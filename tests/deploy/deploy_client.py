"""The SDK side of the deployment test, run inside the test bed's client namespace (the test
process itself stays in the machine's namespace): `ip netns exec NS python deploy_client.py ...`.
Each command prints one JSON document on stdout.

    topic    --bootstrap B --topic T --partitions N --replication-factor R
    smoke    --bootstrap B --topic T --count N          produce N records, read them back
    describe --bootstrap B                              every partition: leader, replicas, isr
    verify   --bootstrap B --topic T --partitions N --out FILE
             [--stop-file F | --acks N] [--ready-file R] [--sdk-defaults] [--log-level L]
             an acks=all idempotent VerifyingProducer (tests/fault/verifiers.py) writes until the
             stop file appears (or N acks); then every acknowledged record is read back and
             checked (lost, out of order, duplicates); ack timestamps go into FILE.
    probe    --bootstrap B --topic T --key none|unknown|SECRET_FILE
             one METADATA and one PRODUCE straight on a channel to the gateway with that key (no
             key, a fresh key the fleet never saw, or a given .key_secret): answered or timed
             out; and the topic's end offsets before and after (read with the test's own key).

The deployed fleet runs CURVE: the clients use the key the test's environment names
(RIVERBED_CLIENT_PROPERTIES: the control machine's client.properties, the `client` key).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fault"))

from riverbed import Admin, Consumer, Producer, TopicPartition  # noqa: E402
from riverbed.structs import NewTopic  # noqa: E402


def _describe(admin: Admin) -> list[dict]:
    return [{"topic": d.name, "partition": p.partition, "leader": p.leader,
             "replicas": list(p.replicas), "isr": list(p.isr)}
            for d in admin.describe_topics(None) for p in d.partitions]


def cmd_topic(a) -> dict:
    with Admin(a.bootstrap) as admin:
        admin.create_topics([NewTopic(a.topic, a.partitions, a.replication_factor, {})])
        deadline = time.monotonic() + 60
        while True:
            parts = [p for p in _describe(admin) if p["topic"] == a.topic]
            if len(parts) == a.partitions and all(p["leader"] >= 0 and len(p["isr"]) == a.replication_factor
                                                  for p in parts):
                return {"partitions": parts}
            if time.monotonic() > deadline:
                raise SystemExit(f"topic {a.topic} not ready: {parts}")
            time.sleep(0.2)


def cmd_smoke(a) -> dict:
    values = [b"smoke-%d" % i for i in range(a.count)]
    with Producer(a.bootstrap, acks="all") as p:
        futures = [p.send(a.topic, v) for v in values]
        p.flush(30)
        offsets = [(f.get(30).partition, f.get(30).offset) for f in futures]
    with Admin(a.bootstrap) as admin:
        parts = [d for d in admin.describe_topics([a.topic])][0].partitions
    tps = [TopicPartition(a.topic, p.partition) for p in parts]
    got: list[bytes] = []
    with Consumer(bootstrap=a.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
        c.assign(tps)
        ends = c.end_offsets(tps)
        c.seek_to_beginning(*tps)
        deadline = time.monotonic() + 60
        while any(c.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                got += [r.value for r in recs]
    return {"sent": len(values), "acked": len(offsets), "read": len(got),
            "all_read": sorted(got) == sorted(values)}


def cmd_describe(a) -> dict:
    with Admin(a.bootstrap) as admin:
        return {"partitions": _describe(admin)}


def cmd_verify(a) -> dict:
    from verifiers import VerifyingProducer, verify
    if a.log_level:
        import logging
        logging.basicConfig(level=a.log_level.upper(), stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    if a.sdk_defaults:    # acks=all, everything else the SDK's defaults (idempotence on)
        vp = VerifyingProducer([a.bootstrap], a.topic, a.partitions, rate_per_s=a.rate,
                               sdk_defaults=True)
    else:
        vp = VerifyingProducer([a.bootstrap], a.topic, a.partitions, acks="all",
                               enable_idempotence=True, rate_per_s=a.rate,
                               max_in_flight_requests_per_connection=1,
                               request_timeout_ms=10000, delivery_timeout_ms=120000)
    with vp:
        vp.wait_for_acks(50, timeout_s=60, what="before the run")
        if a.ready_file:
            pathlib.Path(a.ready_file).write_text("ready\n")
        if a.acks:
            vp.wait_for_acks(a.acks, timeout_s=300, what="during the run")
        else:
            while not pathlib.Path(a.stop_file).exists():
                time.sleep(0.1)
        vp.wait_for_acks(20, timeout_s=120, what="after the run")
        vp.stop(timeout_s=120)
    report = verify([a.bootstrap], a.topic, [vp], timeout_s=120)
    # The producer stamps acks with time.monotonic(); the test compares them with wall-clock times.
    wall = time.time() - time.monotonic()
    ack_times = sorted(t + wall for ts in vp.ack_times.values() for t in ts)
    out = {"ok": report.ok, "describe": report.describe(), "acked": report.acked,
           "read": report.read, "lost": len(report.lost), "out_of_order": len(report.out_of_order),
           "duplicates": report.duplicates, "failed": dict(vp.failed), "ack_times": ack_times,
           "ack_times_by_partition": {str(p): [t + wall for t in ts] for p, ts in vp.ack_times.items()}}
    pathlib.Path(a.out).write_text(json.dumps(out))
    out.pop("ack_times")
    out.pop("ack_times_by_partition")
    return out


def _end_offsets(a) -> dict[str, int]:
    with Admin(a.bootstrap) as admin:
        parts = [d for d in admin.describe_topics([a.topic])][0].partitions
    tps = [TopicPartition(a.topic, p.partition) for p in parts]
    with Consumer(bootstrap=a.bootstrap) as c:
        return {str(tp.partition): o for tp, o in c.end_offsets(tps).items()}


def cmd_probe(a) -> dict:
    import shutil
    import tempfile

    from riverbed import errors
    from riverbed._proto.v1 import metadata_pb2, produce_pb2
    from riverbed.wire.apis import ApiKey
    from riverbed.wire.client import Channel
    from riverbed.wire.security import ClientSecurity, client_security, create_keypair

    servers = client_security().server_keys_dir      # the servers' public keys are public
    tmp = tempfile.mkdtemp(prefix="probe-key-")
    try:
        if a.key == "none":
            sec = ClientSecurity()
        else:
            secret = a.key
            if a.key == "unknown":
                _, secret = create_keypair(tmp, "stranger")
            sec = client_security(security_protocol="CURVE", curve_secret_key_file=str(secret),
                                  curve_server_keys_dir=servers)
        before = _end_offsets(a)
        outcome = {}
        produce = produce_pb2.ProduceRequest(acks=1, timeout_ms=1000)
        produce.topics.add(name=a.topic).partitions.add(partition=0)
        calls = {"metadata": (ApiKey.METADATA, metadata_pb2.MetadataRequest(topics=[a.topic]), ()),
                 "produce": (ApiKey.PRODUCE, produce, (b"\0" * 61,))}
        for what, (api, body, payloads) in calls.items():
            ch = Channel(a.bootstrap, client_id=f"probe-{what}", security=sec)
            try:
                ch.call(api, body, payloads=payloads, timeout_ms=a.timeout_ms)
                outcome[what] = "answered"
            except errors.RequestTimedOutError:
                outcome[what] = "timed_out"       # no handshake: nothing reached a handler
            except errors.RiverbedError as e:
                outcome[what] = f"answered: {type(e).__name__}"
            finally:
                ch.close()
        return {"outcome": outcome, "end_offsets_before": before, "end_offsets_after": _end_offsets(a)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("topic", "smoke", "describe", "verify", "probe"):
        p = sub.add_parser(name)
        p.add_argument("--bootstrap", required=True)
        if name != "describe":
            p.add_argument("--topic", required=True)
    sub.choices["topic"].add_argument("--partitions", type=int, default=3)
    sub.choices["topic"].add_argument("--replication-factor", type=int, default=3)
    sub.choices["smoke"].add_argument("--count", type=int, default=200)
    v = sub.choices["verify"]
    v.add_argument("--partitions", type=int, default=3)
    v.add_argument("--out", required=True)
    v.add_argument("--stop-file")
    v.add_argument("--ready-file")
    v.add_argument("--acks", type=int, default=0)
    v.add_argument("--rate", type=float, default=200.0)
    v.add_argument("--sdk-defaults", action="store_true",
                   help="acks=all and the SDK's defaults for everything else")
    v.add_argument("--log-level", default="",
                   help="log the SDK's lines (timestamped) to stderr at this level")
    pr = sub.choices["probe"]
    pr.add_argument("--key", required=True, help="none, unknown, or a .key_secret file")
    pr.add_argument("--timeout-ms", type=int, default=3000)
    a = ap.parse_args()
    result = {"topic": cmd_topic, "smoke": cmd_smoke, "describe": cmd_describe, "verify": cmd_verify,
              "probe": cmd_probe}[a.cmd](a)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
