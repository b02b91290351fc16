"""RPC round trips: the SDK's sync Channel -> an RpcServer in another process.

    .venv/bin/python -m loadgen.rpc_bench [--requests 5000] [--payload-kb 100] [--in-flight 1,4,16]

Measures
- sequential latency of a small METADATA call (p50 / p99 / max in µs);
- pipelined throughput of PRODUCE requests carrying one payload frame (like a record batch)
  with N requests in flight: requests/s and payload MB/s. The server answers with a small
  ProduceResponse, as a real produce does.
The server runs in a subprocess (`--serve`), so client and server do not share a GIL.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time

from riverbed._proto.v1 import metadata_pb2, produce_pb2
from riverbed.wire import ApiKey, Channel


def serve(endpoint: str) -> None:
    from services.common.rpc import Reply, RpcServer

    async def metadata(req):
        return Reply(metadata_pb2.MetadataResponse(cluster_id="bench"))

    produce_resp = produce_pb2.ProduceResponse()

    async def produce(req):
        total = sum(len(p) for p in req.payloads)
        assert total > 0
        return Reply(produce_resp)

    async def main():
        server = RpcServer(endpoint, {ApiKey.METADATA: metadata, ApiKey.PRODUCE: produce},
                           name="bench")
        print(server.bound_endpoint, flush=True)
        try:
            await server.serve()
        finally:
            await server.close()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass


def _pct(sorted_vals: list[float], p: float) -> float:
    return sorted_vals[min(len(sorted_vals) - 1, int(p / 100 * len(sorted_vals)))]


def bench_latency(ch: Channel, n: int) -> dict:
    req = metadata_pb2.MetadataRequest(topics=["orders"])
    for _ in range(200):
        ch.call(ApiKey.METADATA, req)
    lat = []
    t0 = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter_ns()
        ch.call(ApiKey.METADATA, req)
        lat.append((time.perf_counter_ns() - t) / 1000)
    elapsed = time.perf_counter() - t0
    lat.sort()
    return {"p50_us": _pct(lat, 50), "p99_us": _pct(lat, 99), "max_us": lat[-1],
            "calls_per_s": n / elapsed}


def bench_pipelined(ch: Channel, n: int, in_flight: int, payload: bytes) -> dict:
    req = produce_pb2.ProduceRequest(acks=1, timeout_ms=30000, topics=[produce_pb2.ProduceTopic(
        name="orders", partitions=[produce_pb2.ProducePartition(partition=0)])])
    sent = done = 0
    t0 = time.perf_counter()
    while done < n:
        while sent < n and sent - done < in_flight:
            ch.send(ApiKey.PRODUCE, req, payloads=[payload])
            sent += 1
        r = ch.recv(30_000)
        if r is None:
            raise RuntimeError("no response in 30 s")
        r.raise_for_error()
        done += 1
    elapsed = time.perf_counter() - t0
    return {"in_flight": in_flight, "req_per_s": n / elapsed,
            "mb_per_s": n * len(payload) / elapsed / 1e6}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--serve", metavar="ENDPOINT", help="run only the server (used internally)")
    ap.add_argument("--endpoint", help="bench an already running server instead of starting one")
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--payload-kb", type=int, default=100)
    ap.add_argument("--in-flight", default="1,4,16")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON (riverbed-bench records them)")
    args = ap.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return 0

    proc = None
    endpoint = args.endpoint
    if endpoint is None:
        proc = subprocess.Popen([sys.executable, "-m", "loadgen.rpc_bench", "--serve",
                                 "tcp://127.0.0.1:*"], stdout=subprocess.PIPE, text=True)
        endpoint = proc.stdout.readline().strip()
        if not endpoint:
            proc.kill()
            raise SystemExit("server failed to start")
    try:
        with Channel(endpoint, client_id="rpc-bench") as ch:
            lat = bench_latency(ch, args.requests)
            print(f"sequential METADATA round trip: p50 {lat['p50_us']:.0f} µs, "
                  f"p99 {lat['p99_us']:.0f} µs, max {lat['max_us']:.0f} µs "
                  f"({lat['calls_per_s']:.0f} calls/s)")
            payload = os.urandom(args.payload_kb * 1024)
            pipelined = []
            for k in (int(x) for x in args.in_flight.split(",")):
                r = bench_pipelined(ch, args.requests // 2, k, payload)
                pipelined.append(r)
                print(f"pipelined PRODUCE, {args.payload_kb} KB payload, {k:>3} in flight: "
                      f"{r['req_per_s']:.0f} req/s, {r['mb_per_s']:.0f} MB/s")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"metadata_round_trip": lat, "payload_kb": args.payload_kb,
                           "rows": pipelined}, f, indent=2)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
