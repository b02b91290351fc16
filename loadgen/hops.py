"""Where a record's latency goes, hop by hop: round trips at a fixed rate, each row measured in
the same run against the same fleet (issue 15's "find what sits in the tail")

    .venv/bin/python -m loadgen.hops                      # starts its own fleet (NONE)
    .venv/bin/python -m loadgen.hops --security-protocol CURVE --rate 1000 --count 3000
    ... [--bootstrap-server tcp://HOST:PORT]              # a running fleet instead

Rows, from the floor up (one request at a time, `--rate` requests/s, `--count` each, `--rounds`
times in turn; exact percentiles in ms):
- tcp echo: the same message over a plain TCP socket to another Python process that writes
  it straight back (no ZeroMQ): what a process hop costs without libzmq's I/O threads.
- zmq echo: a DEALER here to a ROUTER in another Python process that sends every message
  straight back; libzmq on both ends and no Riverbed code: one process hop's floor here.
  Each message crosses threads three times (the sender's Python thread to its I/O thread,
  the receiver's I/O thread to its Python thread, and the socket between), so a round trip
  wakes six threads.
- zmq echo, one CPU: the same with both processes and their I/O threads on one CPU (the last
  this process may use): the wake-ups without a CPU waking another.
- zmq relay, 4 hops: the zmq echo behind a relay process (a ROUTER in front, a DEALER to the
  echo behind, a Python loop between): the shape of a record's path through the gateway (four
  process hops, client -> gateway -> leader and back, or producer -> gateway -> leader ->
  gateway -> consumer) with no Riverbed code: the floor of that path on this machine.
- METADATA @gateway: the gateway answers from its cache (a request through its RpcServer and
  handler, nothing forwarded).
- PRODUCE @leader: acks=1, one 100 B record, straight to the partition's leader (the storage
  node's request path and append).
- PRODUCE via gateway: the same through the gateway (its forward: the two rows above chained).
- SDK send().get(): riverbed.Producer (acks=1), one record, waiting for its acknowledgement
  (the SDK's accumulator, sender thread and future on top of the row above).
- e2e: `riverbed-perf e2e` at the same rate (the SDK producer here, the consumer in another
  process; acks=1, RF 1, 1 partition): the send-to-receipt latency the issue's aims are about.
  Its rate limiter is Kafka's ThroughputThrottler: it sleeps only once it is 2 ms ahead, so at
  1,000/s records leave in twos, 2 ms apart, and the path is idle in between.
- e2e paced: the same path with one record every 1/rate s, the producer asleep in between (an
  application sending at that rate): each record meets the previous one still in the pipeline.
  With a fleet started here it also prints the CPU each process spent per record and the cores
  busy meanwhile: what the record costs the machine, which at light load is what the tail
  waits for on a small host.
"""
from __future__ import annotations

import argparse
import json
import contextlib
import multiprocessing as mp
import os
import struct
import sys
import time
import uuid

ROWS = ("tcp echo", "zmq echo", "zmq echo, one CPU", "zmq relay, 4 hops", "METADATA @gateway",
        "PRODUCE @leader", "PRODUCE via gateway", "SDK send().get()", "e2e", "e2e paced")
PERCENTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99), ("p99.9", 0.999))
RECORD = b"x" * 100
_SEND_TS = struct.Struct(">q")          # e2e paced: time.time_ns() at send, first in the value
# What each row adds to: the row it is built on (the "+" columns of the report)
BUILT_ON = {"zmq echo": "tcp echo", "zmq relay, 4 hops": "zmq echo",
            "METADATA @gateway": "zmq echo", "PRODUCE @leader": "zmq echo",
            "PRODUCE via gateway": "PRODUCE @leader", "SDK send().get()": "PRODUCE via gateway"}


def percentiles(latencies_ms: list[float]) -> dict[str, float]:
    """Exact percentiles (nearest rank) and the max of a list of latencies."""
    if not latencies_ms:
        return {}
    xs = sorted(latencies_ms)
    n = len(xs)
    out = {name: xs[min(n - 1, max(0, int(q * n + 0.999999) - 1))] for name, q in PERCENTILES}
    out["max"] = xs[-1]
    return out


def paced(fn, rate: float, count: int) -> list[float]:
    """Call fn() `count` times, one every 1/rate s (no catching up after a slow call: a
    stalled call delays the next start, it does not bunch them), each timed in ms."""
    period = 1.0 / rate
    out = []
    nxt = time.perf_counter()
    for _ in range(count):
        nxt = max(nxt + period, time.perf_counter())
        delay = nxt - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000.0)
    return out


def _echo_server(q, cpu: int | None = None) -> None:
    import zmq
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})   # before the context: its I/O thread inherits it
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind("tcp://127.0.0.1:*")
    q.put(sock.getsockopt_string(zmq.LAST_ENDPOINT))
    while True:
        frames = sock.recv_multipart(copy=False)
        if len(frames) == 2 and frames[1].bytes == b"stop":
            break
        sock.send_multipart(frames, copy=False)
    sock.close(0)
    ctx.term()


def _relay(q, echo_endpoint: str) -> None:
    import zmq
    ctx = zmq.Context()
    front = ctx.socket(zmq.ROUTER)
    front.setsockopt(zmq.LINGER, 0)
    front.bind("tcp://127.0.0.1:*")
    back = ctx.socket(zmq.DEALER)
    back.setsockopt(zmq.LINGER, 0)
    back.connect(echo_endpoint)
    q.put(front.getsockopt_string(zmq.LAST_ENDPOINT))
    poller = zmq.Poller()
    poller.register(front, zmq.POLLIN)
    poller.register(back, zmq.POLLIN)
    while True:
        for sock, _ in poller.poll():
            while True:
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                # front: [client, ...] goes on as is (the echo sends it back); back: the same
                (back if sock is front else front).send_multipart(frames, copy=False)


def _tcp_echo_server(q) -> None:
    import socket
    with socket.create_server(("127.0.0.1", 0)) as srv:
        q.put(srv.getsockname()[1])
        conn, _ = srv.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while data := conn.recv(65536):
                conn.sendall(data)


@contextlib.contextmanager
def _server_process(target, *args):
    """`target(queue, *args)` in another process; yields what it puts on the queue first."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=target, args=(q, *args), name="riverbed-hops-echo", daemon=True)
    proc.start()
    try:
        yield q.get(timeout=30)
    finally:
        proc.terminate()
        proc.join(5)


def echo_server(cpu: int | None = None):
    """A ROUTER echo in another process (its threads on `cpu` if given); yields its endpoint."""
    return _server_process(_echo_server, cpu)


def relay(echo_endpoint: str):
    """A ROUTER-to-DEALER relay to `echo_endpoint` in another process; yields its endpoint."""
    return _server_process(_relay, echo_endpoint)


def tcp_echo_server():
    """A plain TCP echo in another process; yields its port on 127.0.0.1."""
    return _server_process(_tcp_echo_server)


def _echo_row(endpoint: str, context=None):
    import zmq
    sock = (context or zmq.Context.instance()).socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)

    def call():
        sock.send_multipart([b"h" * 40, RECORD])
        sock.recv_multipart()
    call()
    return call, sock.close


def _tcp_echo_row(port: int):
    import socket
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    message = b"h" * 40 + RECORD

    def call():
        sock.sendall(message)
        left = len(message)
        while left:
            n = len(sock.recv(left))
            if not n:
                raise ConnectionError("the TCP echo closed the connection")
            left -= n
    call()
    return call, sock.close


@contextlib.contextmanager
def on_cpu(cpu: int):
    """This thread on `cpu` only, until the block ends (threads started inside keep it)."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@contextlib.contextmanager
def _echo_rows():
    """The echo and relay rows' calls ({row: call}) and the rows measured pinned ({row:
    cpu}), with their servers and sockets."""
    import zmq
    cpu = max(os.sched_getaffinity(0))
    with contextlib.ExitStack() as stack:
        calls = {}
        echo = stack.enter_context(echo_server())
        for name, (call, close) in (
                ("tcp echo", _tcp_echo_row(stack.enter_context(tcp_echo_server()))),
                ("zmq echo", _echo_row(echo)),
                ("zmq relay, 4 hops", _echo_row(stack.enter_context(relay(echo))))):
            calls[name] = call
            stack.callback(close)
        endpoint = stack.enter_context(echo_server(cpu))
        with on_cpu(cpu):        # a context of its own, whose I/O thread starts on `cpu`
            ctx = zmq.Context()
            stack.callback(ctx.term)
            call, close = _echo_row(endpoint, ctx)
        stack.callback(close)
        calls["zmq echo, one CPU"] = call
        yield calls, {"zmq echo, one CPU": cpu}


def _riverbed_rows(bootstrap: str, topic: str):
    """The Riverbed rows' calls, keyed by ROWS name, and a closer."""
    from riverbed import Admin, Producer
    from riverbed._proto.v1 import metadata_pb2, produce_pb2
    from riverbed.admin import NewTopic
    from riverbed.records.builder import build_batch
    from riverbed.wire.apis import ApiKey
    from riverbed.wire.client import Channel

    with Admin(bootstrap=[bootstrap]) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    gw = Channel(bootstrap, client_id="riverbed-hops")
    mreq = metadata_pb2.MetadataRequest(topics=[topic])
    deadline = time.monotonic() + 30
    while True:
        md = gw.call(ApiKey.METADATA, mreq).body
        parts = md.topics[0].partitions if md.topics else []
        if parts and parts[0].leader >= 0:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic} has no leader after 30 s")
        time.sleep(0.1)
    leader = parts[0].leader
    direct = Channel([b.endpoint for b in md.brokers if b.node_id == leader][0],
                     client_id="riverbed-hops")
    preq = produce_pb2.ProduceRequest(acks=1, timeout_ms=30000)
    preq.topics.add(name=topic).partitions.add(partition=0)
    batch = build_batch([(int(time.time() * 1000), None, RECORD)])
    producer = Producer(bootstrap=bootstrap, acks=1)
    producer.send(topic, RECORD, partition=0).get(30)
    calls = {
        "METADATA @gateway": lambda: gw.call(ApiKey.METADATA, mreq),
        "PRODUCE @leader": lambda: direct.call(ApiKey.PRODUCE, preq, payloads=[batch]),
        "PRODUCE via gateway": lambda: gw.call(ApiKey.PRODUCE, preq, payloads=[batch]),
        "SDK send().get()": lambda: producer.send(topic, RECORD, partition=0).get(30),
    }

    def close():
        producer.close()
        gw.close()
        direct.close()
    return calls, close


def _e2e(bootstrap: str, rate: float, count: int) -> dict[str, float]:
    """repl_bench's e2e row (riverbed-perf e2e, acks=1, RF 1, 1 partition) at `rate`."""
    from loadgen.repl_bench import _e2e as e2e_row
    lat = e2e_row(bootstrap, int(rate), count)["latency_ms"]
    return {"p50": lat["p50"], "p95": lat["p95"], "p99": lat["p99"],
            "p99.9": lat["p99_9"], "max": lat["max"]}


def _paced_consumer(bootstrap: str, topic: str, count: int, q, ready) -> None:
    """The e2e paced row's consumer (another process): latencies of `count` records, in ms."""
    from riverbed import Consumer, TopicPartition
    c = Consumer(bootstrap=bootstrap, fetch_min_bytes=1)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_end(tp)
    c.position(tp)
    ready.set()
    lats: list[float] = []
    deadline = time.monotonic() + 120
    try:
        while len(lats) < count and time.monotonic() < deadline:
            batch = c.poll(timeout_ms=100)
            now = time.time_ns()
            for recs in batch.values():
                lats.extend((now - _SEND_TS.unpack_from(r.value)[0]) / 1e6 for r in recs)
    finally:
        c.close()
    q.put(lats)


def e2e_paced(bootstrap: str, topic: str, rate: float, count: int,
              pids: dict[str, list[int]] | None = None) -> tuple[dict, dict]:
    """(percentiles, CPU): `count` records, one every 1/rate s from a producer here (asleep
    in between) to a consumer in another process; with `pids`, CPU ms per record by group (the
    consumer's own group added) and the cores they kept busy."""
    from loadgen.repl_bench import _with_cpu
    from riverbed import Producer
    ctx = mp.get_context("spawn")
    q, ready = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=_paced_consumer, args=(bootstrap, topic, count, q, ready),
                       name="riverbed-hops-consumer", daemon=True)
    proc.start()
    producer = Producer(bootstrap=bootstrap, acks=1)
    try:
        producer.send(topic, _SEND_TS.pack(0) + RECORD, partition=0).get(30)
        if not ready.wait(60):
            raise RuntimeError("the e2e paced consumer did not start in 60 s")
        time.sleep(0.5)                  # its first FETCH parked at the leader
        pad = RECORD[_SEND_TS.size:]

        def row() -> dict:
            paced(lambda: producer.send(topic, _SEND_TS.pack(time.time_ns()) + pad, partition=0),
                  rate, count)
            producer.flush(30)
            return {"lats": q.get(timeout=150)}
        out = _with_cpu({**pids, "consumer": [proc.pid]} if pids else None, count, row)
        lats = out["lats"]
        cpu: dict = {}
        if "cpu_s_per_m" in out:       # CPU s per million records / 1000 = ms per record
            cpu = {"ms_per_record": {g: v / 1000 for g, v in out["cpu_s_per_m"].items()},
                   "cores": out["cores"]}
    finally:
        producer.close()
        proc.join(10)
        if proc.is_alive():
            proc.terminate()
            proc.join(5)
    if len(lats) < count:
        raise RuntimeError(f"e2e paced: {len(lats)} of {count} records arrived")
    return percentiles(lats), cpu


def run(bootstrap: str, rate: float, count: int, rounds: int,
        pids: dict[str, list[int]] | None = None) -> list[dict[str, dict]]:
    """Each round: every row once, in ROWS order. Returns [{row: percentiles}] per round (and
    "cpu": the e2e paced row's CPU, with `pids`)."""
    topic = f"rb-hops-{uuid.uuid4().hex[:6]}"
    out = []
    with _echo_rows() as (echoes, pinned):
        calls, close = _riverbed_rows(bootstrap, topic)
        calls = {**echoes, **calls}
        try:
            for i in range(rounds):
                r = {}
                for name in ROWS[:-2]:            # the two e2e rows follow
                    with on_cpu(pinned[name]) if name in pinned else contextlib.nullcontext():
                        r[name] = percentiles(paced(calls[name], rate, count))
                    print(f"round {i + 1}: {format_row(name, r[name])}", file=sys.stderr,
                          flush=True)
                r["e2e"] = _e2e(bootstrap, rate, count)
                print(f"round {i + 1}: {format_row('e2e', r['e2e'])}", file=sys.stderr,
                      flush=True)
                r["e2e paced"], r["cpu"] = e2e_paced(bootstrap, topic, rate, count, pids)
                print(f"round {i + 1}: {format_row('e2e paced', r['e2e paced'])}",
                      file=sys.stderr, flush=True)
                out.append(r)
        finally:
            close()
            from loadgen.repl_bench import _delete
            _delete(bootstrap, topic)
    return out


def format_row(name: str, p: dict[str, float]) -> str:
    cols = "  ".join(f"{k} {p[k]:7.3f}" for k in ("p50", "p95", "p99", "p99.9", "max") if k in p)
    return f"{name:<20} {cols}"


def medians(rounds: list[dict[str, dict]]) -> dict[str, dict[str, float]]:
    """Per row (in ROWS order), the median over rounds of each percentile."""
    import statistics
    meds: dict[str, dict[str, float]] = {}
    for name in ROWS:
        ps = [r[name] for r in rounds if name in r]
        if ps:
            meds[name] = {k: statistics.median(p[k] for p in ps) for k in ps[0]}
    return meds


def format_report(rounds: list[dict[str, dict]], rate: float, count: int) -> str:
    """Median over rounds of each percentile, per row, and what each row adds at p50 and p99
    to the row it is built on (BUILT_ON)."""
    import statistics
    lines = [f"round trips at {rate:,.0f}/s, {count:,} per row, medians of {len(rounds)} "
             f"round(s), ms (e2e: send to receipt)"]
    meds = medians(rounds)
    for name, med in meds.items():
        base = meds.get(BUILT_ON.get(name, ""))
        extra = ""
        if base is not None:
            extra = (f"   +p50 {med['p50'] - base['p50']:6.3f}  +p99 {med['p99'] - base['p99']:6.3f}"
                     f"  (over {BUILT_ON[name]})")
        lines.append(format_row(name, med) + extra)
    cpus = [r["cpu"] for r in rounds if r.get("cpu")]
    if cpus:
        groups = cpus[0]["ms_per_record"]
        per = {g: statistics.median(c["ms_per_record"][g] for c in cpus) for g in groups}
        lines.append("e2e paced, CPU ms per record: " + ", ".join(
            f"{g} {v:.3f}" for g, v in per.items()) + f"; total {sum(per.values()):.3f} ms, "
            f"{statistics.median(c['cores'] for c in cpus):.2f} cores busy "
            f"(of {len(os.sched_getaffinity(0))})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadgen.hops",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", help="a running fleet's gateway (default: start one)")
    parser.add_argument("--security-protocol", choices=("NONE", "CURVE"), default="NONE",
                        help="of the fleet started here (default NONE: the hops themselves)")
    parser.add_argument("--rate", type=float, default=1000.0, help="requests per second")
    parser.add_argument("--count", type=int, default=3000, help="requests per row and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON (riverbed-bench records them)")
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.count <= 0 or args.rounds <= 0:
        parser.error("--rate, --count and --rounds must be positive")
    from loadgen.repl_bench import _fleet
    print(f"load average {os.getloadavg()[0]:.2f} at the start", file=sys.stderr, flush=True)
    with _fleet(args.bootstrap_server, security_protocol=args.security_protocol) as (bootstrap,
                                                                                    pids):
        rounds = run(bootstrap, args.rate, args.count, args.rounds, pids)
    print(format_report(rounds, args.rate, args.count))
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rate": args.rate, "count": args.count, "medians": medians(rounds),
                       "rounds": rounds}, f, indent=2, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
