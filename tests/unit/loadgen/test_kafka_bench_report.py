"""loadgen.kafka_bench's figures and report: Kafka beside the SDK with the ratios."""
import math

from loadgen import kafka_bench as kb


def test_figures_per_record_and_per_request():
    f = kb.figures({"records": 1_000_000, "seconds": 2.0}, cpu_s=0.5, requests=250)
    assert f["records_per_sec"] == 500_000 and f["mb_per_sec"] == 50.0
    assert f["gateway_us_per_record"] == 0.5
    assert f["records_per_request"] == 4000 and f["gateway_us_per_request"] == 2000
    f = kb.figures({"records": 10, "seconds": 1.0}, cpu_s=0.0)
    assert math.isnan(f["records_per_request"])


def test_report_puts_each_row_beside_the_sdks_with_ratios():
    kafka = kb.figures({"records": 1000, "seconds": 1.0}, cpu_s=0.002, requests=10)
    sdk = kb.figures({"records": 1000, "seconds": 0.5}, cpu_s=0.001, requests=4)
    rows = {"produce acks=1": {"kafka": kafka, "sdk": sdk},
            "consume": {"kafka": sdk, "sdk": kafka},
            "e2e": {"rate": 1000.0,
                    "kafka": {"records": 900, "latency_ms": {"p50": 1.5, "p99": 4.0, "p999": 9.0}},
                    "sdk": {"records": 900, "latency_ms": {"p50": 2.0, "p99": 5.0}}}}
    text = kb.format_report(rows, (1.5, 2.25, 3.0), 1000)
    lines = text.splitlines()
    assert "load average 1.50 2.25 3.00" in lines[0] and "1,000 records" in lines[0]
    produce = next(i for i, l in enumerate(lines) if l.startswith("produce acks=1"))
    cells = lines[produce].split()
    # Kafka: 1,000 rec/s, 0.1 MB/s, 2.00 µs/rec, 100 rec/req, 200 µs/req; ratios 0.50 and 1.00
    assert cells[-7:] == ["1,000", "0.1", "2.00", "100", "200", "0.50", "2.00"]
    assert lines[produce + 1].split() == ["SDK", "2,000", "0.2", "1.00", "250", "250"]
    consume = next(l for l in lines if l.startswith("consume"))
    assert consume.split()[-2:] == ["2.00", "0.50"]
    e2e = lines[lines.index(next(l for l in lines if l.startswith("end-to-end"))) + 1:]
    assert e2e[0].split() == ["Kafka", "1.50", "4.00", "9.00", "900"]
    assert e2e[1].split() == ["SDK", "2.00", "5.00", "nan", "900"]
