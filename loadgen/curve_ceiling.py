"""What CurveZMQ itself costs here: one PUSH -> PULL stream over tcp loopback, NONE vs CURVE.

Each message has the shape of a Riverbed request: a small header frame, a small body frame and
one payload frame of the given size.

    .venv/bin/python -m loadgen.curve_ceiling [--sizes 262144,1048576] [--seconds 1.5]

For each size: messages/s and MB/s of each mode, CURVE ÷ NONE (the raw socket ceiling), and the
CPU seconds per GB the two contexts' ZeroMQ I/O threads spent (the sender's encrypts, the
receiver's decrypts; with NONE they only frame and copy). The difference between the modes is
what one encrypted hop adds per GB; `loadgen.bench --security` prints it beside the fleet rows
and turns it into the bound CPU puts on the fleet's ratio (`cpu_bound_ratio`).

Sender and receiver are two contexts of one I/O thread each in this process (as a client and a
server are); the Python loop only hands libzmq the same frames again, so its share is small.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

import zmq

from loadgen import proc_cpu

__all__ = ["stream", "ceiling", "cpu_bound_ratio", "extra_cpu_per_gb", "format_ceiling"]

HEADER = b"h" * 24       # a RequestHeader is ~20-30 bytes
BODY = b"b" * 64         # a one-partition ProduceRequest body


def stream(curve: bool, payload_bytes: int, seconds: float = 1.5) -> dict:
    """One PUSH -> PULL stream for `seconds`: messages/s, MB/s (payload bytes), and the CPU
    seconds of this process's I/O threads and of the rest per GB of payload."""
    sctx, cctx = zmq.Context(io_threads=1), zmq.Context(io_threads=1)
    pull, push = sctx.socket(zmq.PULL), cctx.socket(zmq.PUSH)
    try:
        for s in (pull, push):
            s.setsockopt(zmq.LINGER, 0)
            s.setsockopt(zmq.SNDHWM, 100)
            s.setsockopt(zmq.RCVHWM, 100)
        if curve:
            spub, ssec = zmq.curve_keypair()
            cpub, csec = zmq.curve_keypair()
            pull.curve_server = True
            pull.curve_secretkey = ssec
            push.curve_serverkey = spub
            push.curve_publickey = cpub
            push.curve_secretkey = csec
        port = pull.bind_to_random_port("tcp://127.0.0.1")
        push.connect(f"tcp://127.0.0.1:{port}")
        frames = [HEADER, BODY, zmq.Frame(b"x" * payload_bytes)]
        count = [0]

        def receive():
            while True:
                m = pull.recv_multipart(copy=False)
                if len(m) == 1:
                    return
                count[0] += 1

        reader = threading.Thread(target=receive, daemon=True)
        reader.start()
        push.send_multipart(frames, copy=False)     # the handshake, outside the timing
        while count[0] == 0:
            time.sleep(0.01)
        me = {"self": [os.getpid()]}
        c0, n0, t0 = proc_cpu.snapshot(me), count[0], time.perf_counter()
        deadline = t0 + seconds
        while time.perf_counter() < deadline:
            for _ in range(20):
                push.send_multipart(frames, copy=False)
        push.send(b"e")
        reader.join(30)
        dt = time.perf_counter() - t0
        used = proc_cpu.delta(c0, proc_cpu.snapshot(me))["self"]
        n = count[0] - n0
        gb = n * payload_bytes / 1e9 or float("nan")
        return {"messages_per_sec": n / dt, "mb_per_sec": n * payload_bytes / dt / 1e6,
                "io_cpu_s_per_gb": used.io / gb, "io_busiest_cpu_s_per_gb": used.io_busiest / gb,
                "other_cpu_s_per_gb": used.other / gb}
    finally:
        push.close(0)
        pull.close(0)
        sctx.term()
        cctx.term()


def ceiling(sizes: list[int], seconds: float = 1.5, rounds: int = 2) -> dict[int, dict]:
    """Per payload size, the better of `rounds` runs of each mode (alternating) and
    CURVE ÷ NONE."""
    out: dict[int, dict] = {}
    for size in sizes:
        best: dict[str, dict] = {}
        for r in range(rounds):
            for curve in ((False, True) if r % 2 == 0 else (True, False)):
                key = "CURVE" if curve else "NONE"
                res = stream(curve, size, seconds)
                if key not in best or res["mb_per_sec"] > best[key]["mb_per_sec"]:
                    best[key] = res
        out[size] = {"NONE": best["NONE"], "CURVE": best["CURVE"],
                     "ratio": best["CURVE"]["mb_per_sec"] / best["NONE"]["mb_per_sec"],
                     "extra_io_cpu_s_per_gb": extra_cpu_per_gb(best["NONE"], best["CURVE"])}
    return out


def extra_cpu_per_gb(none: dict, curve: dict) -> float:
    """CPU seconds one encrypted hop adds per GB (encrypt + decrypt, in the I/O threads)."""
    return max(0.0, curve["io_cpu_s_per_gb"] - none["io_cpu_s_per_gb"])


def cpu_bound_ratio(none_cpu_s_per_gb: float, hops: int, extra_per_hop: float) -> float:
    """The CURVE ÷ NONE ratio a CPU-bound fleet can reach: NONE spends `none_cpu_s_per_gb`
    (all processes, per GB of records), CURVE the same plus `hops` encrypted hops of
    `extra_per_hop` each, on the same cores."""
    if none_cpu_s_per_gb <= 0:
        return float("nan")
    return none_cpu_s_per_gb / (none_cpu_s_per_gb + hops * extra_per_hop)


def format_ceiling(result: dict[int, dict]) -> str:
    head = (f"{'payload':>9} {'NONE MB/s':>10} {'CURVE MB/s':>11} {'CURVE/NONE':>11} "
            f"{'NONE io s/GB':>13} {'CURVE io s/GB':>14} {'+s/GB/hop':>10}")
    lines = [head, "-" * len(head)]
    for size, r in result.items():
        lines.append(f"{_size(size):>9} {r['NONE']['mb_per_sec']:>10,.0f} "
                     f"{r['CURVE']['mb_per_sec']:>11,.0f} {r['ratio']:>11.2f} "
                     f"{r['NONE']['io_cpu_s_per_gb']:>13.2f} {r['CURVE']['io_cpu_s_per_gb']:>14.2f} "
                     f"{r['extra_io_cpu_s_per_gb']:>10.2f}")
    return "\n".join(lines)


def _size(n: int) -> str:
    if n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n % 1024 == 0:
        return f"{n >> 10} KiB"
    return f"{n} B"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.curve_ceiling",
                                description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="262144,1048576",
                   help="payload frame sizes in bytes, comma-separated (default: a 256 KiB "
                        "produce batch and a 1 MiB fetch response)")
    p.add_argument("--seconds", type=float, default=1.5, help="per stream")
    p.add_argument("--rounds", type=int, default=2, help="per mode, alternating; best kept")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON (riverbed-bench records them)")
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    print(f"one PUSH->PULL stream over tcp loopback, [24 B, 64 B, payload] per message, "
          f"libzmq {zmq.zmq_version()}, pyzmq {zmq.__version__}")
    result = ceiling(sizes, args.seconds, args.rounds)
    print(format_ceiling(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"libzmq": zmq.zmq_version(), "pyzmq": zmq.__version__,
                       "rows": [{"payload_bytes": size, "none_mb_per_sec": r["NONE"]["mb_per_sec"],
                                 "curve_mb_per_sec": r["CURVE"]["mb_per_sec"],
                                 "curve_over_none": r["ratio"],
                                 "none_io_cpu_s_per_gb": r["NONE"]["io_cpu_s_per_gb"],
                                 "curve_io_cpu_s_per_gb": r["CURVE"]["io_cpu_s_per_gb"],
                                 "extra_io_cpu_s_per_gb": r["extra_io_cpu_s_per_gb"]}
                                for size, r in result.items()]}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
