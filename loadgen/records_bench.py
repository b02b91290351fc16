"""Records/s of the v2 batch codec: build (append, append_values), validate and decode.

    .venv/bin/python -m loadgen.records_bench [--records 1000] [--size 100] [--rounds 200]

Pure Python, one core; figures vary with machine load (take the best of --repeat runs).
"""
from __future__ import annotations

import argparse
import json
import os
import time

from riverbed.records import BatchBuilder, Compression, decode_batch, validate_batch


def _best(fn, rounds: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(rounds):
            fn()
        best = min(best, (time.perf_counter() - start) / rounds)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--size", type=int, default=100, help="value bytes per record")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON (riverbed-bench records them)")
    args = parser.parse_args(argv)
    values = [os.urandom(args.size) for _ in range(args.records)]
    timestamp_ms = 1_700_000_000_000

    def build_append(compression=Compression.NONE):
        builder = BatchBuilder(compression=compression)
        append = builder.append
        for value in values:
            append(timestamp_ms, None, value)
        return builder.build()

    def build_append_values(compression=Compression.NONE):
        builder = BatchBuilder(compression=compression)
        builder.append_values(timestamp_ms, values)
        return builder.build()

    batch = build_append_values()
    n = args.records
    rows = [
        ("build append", _best(build_append, args.rounds, args.repeat)),
        ("build append_values", _best(build_append_values, args.rounds, args.repeat)),
        ("decode", _best(lambda: decode_batch(batch), args.rounds, args.repeat)),
    ]
    for codec in (Compression.LZ4, Compression.ZSTD, Compression.SNAPPY, Compression.GZIP):
        compressed = build_append_values(codec)
        rows.append((f"build append_values {codec.name.lower()}",
                     _best(lambda: build_append_values(codec), args.rounds // 4 or 1, args.repeat)))
        rows.append((f"decode {codec.name.lower()}",
                     _best(lambda: decode_batch(compressed), args.rounds // 4 or 1, args.repeat)))
    validate_s = _best(lambda: validate_batch(batch), args.rounds * 10, args.repeat)
    print(f"{n} records x {args.size} B per batch, batch {len(batch)} B")
    for name, seconds in rows:
        print(f"{name:32s} {n / seconds / 1e6:6.2f} M records/s  ({seconds * 1e6:8.1f} us/batch)")
    print(f"{'validate_batch (header + CRC)':32s} {validate_s * 1e6:6.1f} us/batch")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"records_per_batch": n, "value_bytes": args.size, "batch_bytes": len(batch),
                       "rows": [{"operation": name, "m_records_per_sec": n / seconds / 1e6,
                                 "us_per_batch": seconds * 1e6} for name, seconds in rows],
                       "validate_batch_us": validate_s * 1e6}, f, indent=2)


if __name__ == "__main__":
    main()
