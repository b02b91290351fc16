"""Storage-engine throughput: PartitionLog append/read next to a plain file write/read loop.

    python -m loadgen.log_bench [--total-bytes 1GiB] [--batch-bytes 64KiB] [--dir /tmp]

Appends `--batch-bytes` v2 batches (one record each, built once and re-stamped by the log) until
`--total-bytes`, then reads everything back sequentially with `PartitionLog.read` (budget
`--read-bytes`, default one batch). The plain loop writes and reads the same number of
`--batch-bytes` chunks with os.write/os.read on the same disk. By default no fsync in either
(flushing is left to the OS, Kafka's default), so both measure copies into the page cache; with
`--fsync` each write phase ends with an fsync of everything written (the plain file's fd; the
log's `flush()`), so both measure bytes made durable on the disk. Prints MB/s and ratios
(log / plain).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time

from riverbed.records import LOG_OVERHEAD, build_batch, read_header
from services.storage_node.log import LogConfig, PartitionLog

_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(text: str) -> int:
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    if t and t[-1] in _UNITS:
        return int(float(t[:-1]) * _UNITS[t[-1]])
    return int(t)


def make_batch(batch_bytes: int) -> bytes:
    value = os.urandom(max(batch_bytes - 61 - 20, 1))
    batch = build_batch([(int(time.time() * 1000), None, value)])
    return batch


def bench_plain(path: str, chunk: bytes, count: int, fsync: bool = False) -> tuple[float, float]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    t0 = time.perf_counter()
    for _ in range(count):
        os.write(fd, chunk)
    if fsync:
        os.fsync(fd)
    t_write = time.perf_counter() - t0
    os.close(fd)
    fd = os.open(path, os.O_RDONLY)
    n = len(chunk)
    total = 0
    t0 = time.perf_counter()
    while True:
        data = os.read(fd, n)
        if not data:
            break
        total += len(data)
    t_read = time.perf_counter() - t0
    os.close(fd)
    assert total == n * count
    return t_write, t_read


def bench_log(directory: str, batch: bytes, count: int, read_bytes: int,
              fsync: bool = False) -> tuple[float, float]:
    cfg = LogConfig.from_topic_configs(None, {})
    plog = PartitionLog.open(directory, "bench", 0, cfg, now_ms=0, rng=random.Random(0))
    now = int(time.time() * 1000)
    append = plog.append
    t0 = time.perf_counter()
    for _ in range(count):
        append(batch, now_ms=now, leader_epoch=0)
    if fsync:
        plog.flush()
    t_write = time.perf_counter() - t0
    assert plog.log_end_offset == count
    offset = 0
    total = 0
    read = plog.read
    end = plog.log_end_offset
    t0 = time.perf_counter()
    while offset < end:
        result = read(offset, read_bytes)
        total += len(result.data)
        offset = result.next_offset
    t_read = time.perf_counter() - t0
    assert total == len(batch) * count, (total, len(batch) * count)
    last = plog.read(end - 1, read_bytes).data
    assert read_header(last).base_offset == end - 1
    plog.close()
    return t_write, t_read


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--total-bytes", default="1GiB")
    ap.add_argument("--batch-bytes", default="64KiB")
    ap.add_argument("--read-bytes", default=None, help="read budget per call (default: one batch)")
    ap.add_argument("--rounds", type=int, default=2,
                    help="alternate plain and log this many times; report the best of each")
    ap.add_argument("--dir", default=None, help="parent dir for the temp dir (default: /tmp)")
    ap.add_argument("--fsync", action="store_true",
                    help="end each write phase with an fsync (durable MB/s, not page-cache MB/s)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON (riverbed-bench records them)")
    args = ap.parse_args(argv)
    total = parse_size(args.total_bytes)
    batch = make_batch(parse_size(args.batch_bytes))
    size = read_header(batch).batch_length + LOG_OVERHEAD
    assert size == len(batch)
    count = max(total // size, 1)
    read_bytes = parse_size(args.read_bytes) if args.read_bytes else size
    work = tempfile.mkdtemp(prefix="log_bench_", dir=args.dir)
    mb = size * count / 1e6
    pw = pr = lw = lr = float("inf")
    try:
        for _ in range(args.rounds):
            w, r = bench_plain(os.path.join(work, "plain.bin"), batch, count, args.fsync)
            os.unlink(os.path.join(work, "plain.bin"))
            pw, pr = min(pw, w), min(pr, r)
            w, r = bench_log(os.path.join(work, "bench-0"), batch, count, read_bytes, args.fsync)
            shutil.rmtree(os.path.join(work, "bench-0"))
            lw, lr = min(lw, w), min(lr, r)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{count} batches x {size} B = {mb:.1f} MB, read budget {read_bytes} B, "
          f"best of {args.rounds} rounds, fsync {'on' if args.fsync else 'off'}, dir {work}")
    print(f"plain write  {mb / pw:9.1f} MB/s    plain read  {mb / pr:9.1f} MB/s")
    print(f"log append   {mb / lw:9.1f} MB/s    log read    {mb / lr:9.1f} MB/s")
    print(f"ratio write  {pw / lw:9.2f}         ratio read  {pr / lr:9.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"batches": count, "batch_bytes": size, "mb": mb, "fsync": args.fsync,
                       "rounds": args.rounds,
                       "rows": [{"engine": "plain file", "write_mb_per_sec": mb / pw,
                                 "read_mb_per_sec": mb / pr},
                                {"engine": "PartitionLog", "write_mb_per_sec": mb / lw,
                                 "read_mb_per_sec": mb / lr}],
                       "ratio_write": pw / lw, "ratio_read": pr / lr}, f, indent=2)


if __name__ == "__main__":
    main()
