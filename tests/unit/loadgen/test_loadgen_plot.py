"""--plot writes a real PNG (Agg backend) from a timeline."""
import struct

from loadgen.plot import PNG_MAGIC, write_plot


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_plot_from_synthetic_timeline_is_a_valid_png(tmp_path):
    timeline = [{"t_s": 5.0 * (i + 1), "records_per_sec": 100_000 + 5000 * i,
                 "mb_per_sec": 9.5 + 0.5 * i, "latency_avg_ms": 2.0 + i % 3,
                 "latency_max_ms": 20.0 + 3 * i} for i in range(12)]
    out = tmp_path / "perf.png"
    write_plot(out, timeline, title="synthetic")
    data = out.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 10_000              # axes, lines and labels, not an empty image
    width, height = _png_size(data)
    assert (width, height) == (900, 600)
    assert data[-8:-4] == b"IEND"          # complete: ends with the IEND chunk


def test_empty_timeline_still_writes_a_png(tmp_path):
    out = tmp_path / "empty.png"
    write_plot(out, [])
    assert out.read_bytes()[:8] == PNG_MAGIC
