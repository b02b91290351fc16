"""riverbed-perf's wiring without a network: fake clients stand in for the SDK's, so the send
loops, per-batch latency accounting, reporting, JSON and plot are exercised in one process."""
import io
import json
import pathlib
import subprocess
import sys
import threading

import pytest

from loadgen import bench, options, perf, perf_workers
from loadgen.plot import PNG_MAGIC


@pytest.fixture(autouse=True)
def freezes(monkeypatch):
    """The runs here happen in the test process: count the heap freezes instead of freezing it."""
    calls = []
    monkeypatch.setattr(perf_workers, "freeze_setup_heap", lambda: calls.append(1))
    return calls


# --- fakes -----------------------------------------------------------------------------------

class FakeBatch:
    def __init__(self):
        self.callbacks = []
        self.done = False
        self.error = None


class FakeFuture:
    def __init__(self, batch):
        self._batch = batch

    def add_done_callback(self, fn):
        if self._batch.done:
            fn(self)
        else:
            self._batch.callbacks.append(fn)
        return self

    def failed(self):
        return self._batch.error is not None


class FakeProducer:
    """Batches of `per_batch` records, completed (on another thread) by flush()."""

    def __init__(self, per_batch=7, fail_every=0):
        self.per_batch = per_batch
        self.fail_every = fail_every
        self.batches = []
        self.sent = []
        self.closed = False

    def _batch(self):
        if not self.batches or len(self.batches[-1][1]) >= self.per_batch:
            self.batches.append((FakeBatch(), []))
        return self.batches[-1]

    def send(self, topic, value, key=None, partition=None, headers=None, timestamp_ms=None):
        batch, values = self._batch()
        values.append(value)
        self.sent.append(value)
        return FakeFuture(batch)

    def send_many(self, topic, values, partition=None, timestamp_ms=None):
        futs = []
        for start in range(0, len(values), self.per_batch):
            chunk = values[start:start + self.per_batch]
            b = FakeBatch()
            self.batches.append((b, list(chunk)))
            self.sent.extend(chunk)
            futs.append(FakeFuture(b))
        return futs

    def flush(self):
        def complete():
            for i, (b, _) in enumerate(self.batches):
                if not b.done:
                    if self.fail_every and i % self.fail_every == 0:
                        b.error = RuntimeError("boom")
                    b.done = True
                    for fn in b.callbacks:
                        fn(FakeFuture(b))
        t = threading.Thread(target=complete)   # like the SDK's sender thread
        t.start()
        t.join()

    def close(self, timeout=None):
        self.closed = True

    def metrics(self):
        return {"requests_sent": len(self.batches)}


class FakeRecord:
    def __init__(self, offset, value):
        self.offset, self.value, self.key = offset, value, None


class FakeConsumer:
    def __init__(self, total, per_poll=300):
        self.total, self.per_poll, self.next = total, per_poll, 0
        self.closed = False

    def poll(self, timeout_ms=0, max_records=None):
        if self.next >= self.total:
            return {}
        n = min(self.per_poll, self.total - self.next)
        recs = [FakeRecord(self.next + i, b"v" * 50) for i in range(n)]
        self.next += n
        return {("t", 0): recs}

    def close(self):
        self.closed = True


def _args(*extra):
    return options.parse_args(["produce", "--bootstrap-server", "tcp://127.0.0.1:1", "--topic",
                               "t", "--num-records", "1000", "--record-size", "100",
                               "--no-progress", *extra])


# --- pure helpers ---------------------------------------------------------------------------

def test_split_evenly():
    assert perf.split_evenly(10, 3) == [4, 3, 3]
    assert sum(perf.split_evenly(20001, 4)) == 20001
    assert perf.split_evenly(2, 4) == [1, 1, 0, 0]


def test_payloads_random_letters_or_file(tmp_path):
    pool = perf.make_payloads(100, seed=1)
    assert len(pool) == perf_workers.PAYLOAD_POOL and {len(v) for v in pool} == {100}
    assert all(65 <= c <= 90 for c in pool[0])
    assert len(set(pool)) > 1
    f = tmp_path / "payloads.txt"
    f.write_bytes(b"alpha\nbeta\n\ngamma\n")
    assert perf.make_payloads(payload_file=str(f)) == [b"alpha", b"beta", b"gamma"]
    f.write_bytes(b"a|b")
    assert perf.make_payloads(payload_file=str(f), delimiter="|") == [b"a", b"b"]
    with pytest.raises(ValueError):
        perf.make_payloads()


def test_bulk_chunk_is_about_256_kib_whatever_the_batch_size():
    assert perf_workers.bulk_chunk_records(100) == 2427
    assert perf_workers.bulk_chunk_records(1024) == 254
    assert perf_workers.bulk_chunk_records(100, call_bytes=100) == 1


def test_batch_group_counts_each_record_with_its_send_time(monkeypatch):
    stats = perf_workers.WorkerStats(10.0, start=0.0, clock=lambda: 1.0)
    g = perf_workers._BatchGroup(stats)
    g.add(1_000_000, 10)
    g.add(3_000_000, 10)
    monkeypatch.setattr(perf.time, "perf_counter_ns", lambda: 5_000_000)
    g.on_done(FakeFuture(FakeBatch()))
    g.add(4_000_000, 10)       # the batch completed before this add: counted alone, at once
    monkeypatch.undo()
    assert stats.records == 3 and stats.bytes == 30
    # latencies 4 ms, 2 ms (in the batch) and 1 ms (late add): mean 7/3 ms, max 4 ms
    assert stats.hist.summary_ms()["avg"] == pytest.approx(7 / 3)
    assert stats.hist.summary_ms()["max"] == pytest.approx(4.0)


def test_failed_batches_count_as_errors_not_records():
    stats = perf_workers.WorkerStats(10.0, start=0.0, clock=lambda: 1.0)
    g = perf_workers._BatchGroup(stats, count=5, nbytes=50, sum_ns=0, first_ns=0)
    b = FakeBatch()
    b.error = RuntimeError("x")
    g.on_done(FakeFuture(b))
    assert (stats.records, stats.errors) == (0, 5)


def test_warmup_counts_only_the_records_after_the_mark_in_the_steady_state():
    now = [1.0]
    stats = perf_workers.WorkerStats(10.0, start=0.0, clock=lambda: now[0], warmup=5)
    stats.record(3, 30, latency_us=9_000, max_us=9_000)      # records 1-3: warm-up
    now[0] = 2.0
    stats.record(4, 40, latency_us=5_000, max_us=6_000)      # 4-5 warm-up, 6-7 steady
    now[0] = 3.0
    stats.record_each([1_000, 2_000, 3_000], 30)              # 8-10: steady
    assert (stats.records, stats.bytes) == (10, 100)
    assert (stats.steady_records, stats.steady_bytes, stats.steady_start) == (5, 50, 2.0)
    steady = stats.steady.summary_ms()
    assert steady["max"] == pytest.approx(6.0)                # the warm-up's 9 ms left out
    assert steady["avg"] == pytest.approx((2 * 5 + 1 + 2 + 3) / 5)
    whole = stats.whole_hist().summary_ms()
    assert whole["max"] == pytest.approx(9.0) and stats.whole_hist().count == 10
    assert whole["avg"] == pytest.approx((3 * 9 + 4 * 5 + 1 + 2 + 3) / 10)


def test_record_each_splits_at_the_mark_inside_one_call():
    stats = perf_workers.WorkerStats(10.0, start=0.0, clock=lambda: 1.0, warmup=2)
    stats.record_each([50_000, 40_000, 1_000, 2_000], 40)
    assert stats.steady_records == 2
    assert stats.steady.summary_ms()["max"] == pytest.approx(2.0)


def test_without_warmup_nothing_is_counted_twice():
    stats = perf_workers.WorkerStats(10.0, start=0.0, clock=lambda: 1.0)
    stats.record(3, 30, latency_us=1_000, max_us=1_000)
    stats.record_each([1_000], 10)
    assert stats.steady is None and stats.steady_records == 0
    assert perf_workers._worker_result(stats, 0.0, errors=0, metrics={})["steady"] is None


# --- whole runs with fake clients --------------------------------------------------------------

@pytest.mark.parametrize("extra", [[], ["--bulk"], ["--throughput", "200000"]])
def test_produce_run_reports_rows_summary_json_and_plot(monkeypatch, tmp_path, extra):
    fake = FakeProducer()
    monkeypatch.setattr(perf_workers, "_producer", lambda spec: fake)
    out = io.StringIO()
    args = _args("--json", str(tmp_path / "r.json"), "--plot", str(tmp_path / "r.png"),
                 "--reporting-interval", "1", "--partition", "0", *extra)
    summary, rc = perf.run(args, live=False, out=out)
    assert rc == 0
    assert len(fake.sent) == 1000 and fake.closed
    assert summary.records == 1000 and summary.bytes == 100_000 and summary.errors == 0
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["mode"] == "produce" and doc["records"] == 1000
    assert doc["records_per_sec"] > 0 and doc["mb_per_sec"] > 0 and doc["elapsed_s"] > 0
    assert doc["latency_ms"]["max"] >= doc["latency_ms"]["p50"] >= 0
    assert doc["timeline"], "at least the final (partial) window"
    assert doc["config"]["producer"] == {}
    assert doc["config"]["bulk"] == ("--bulk" in extra)
    assert (tmp_path / "r.png").read_bytes()[:8] == PNG_MAGIC
    lines = out.getvalue().splitlines()
    assert lines[-1].startswith("1000 records sent, ")
    assert lines[-1].endswith("99.9th.")
    # the interval rows add up to every record
    rows = [int(line.split()[0]) for line in lines[:-1]]
    assert sum(rows) == 1000


@pytest.mark.parametrize("flag, expected", [([], 1), (["--gc-freeze"], 1),
                                            (["--no-gc-freeze"], 0)])
def test_each_worker_freezes_its_heap_before_the_clock_unless_told_not_to(monkeypatch, freezes,
                                                                         flag, expected):
    monkeypatch.setattr(perf_workers, "_producer", lambda spec: FakeProducer())
    summary, rc = perf.run(_args(*flag), live=False, out=io.StringIO())
    assert rc == 0 and summary.records == 1000
    assert len(freezes) == expected
    monkeypatch.setattr(perf_workers, "_consumer", lambda spec: FakeConsumer(100))
    args = options.parse_args(["consume", "--bootstrap-server", "tcp://h:1", "--topic", "t",
                               "--num-records", "100", "--no-progress", *flag])
    perf.run(args, live=False, out=io.StringIO())
    assert len(freezes) == 2 * expected


def test_freeze_setup_heap_moves_the_imported_heap_out_of_the_collectors_sight():
    # in a process of its own: freezing the test process's heap would keep its garbage
    code = ("import gc, loadgen.perf, loadgen.perf_workers as p; assert gc.get_freeze_count() == 0; "
            "p.freeze_setup_heap(); print(gc.get_freeze_count())")
    root = pathlib.Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=root)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 10_000          # the modules it imported and their objects


def test_produce_run_with_failures_exits_1(monkeypatch):
    fake = FakeProducer(per_batch=10, fail_every=2)
    monkeypatch.setattr(perf_workers, "_producer", lambda spec: fake)
    summary, rc = perf.run(_args(), live=False, out=io.StringIO())
    assert rc == 1
    assert summary.errors == 500 and summary.records == 500


def test_consume_run_counts_records_and_bytes(monkeypatch, tmp_path):
    fake = FakeConsumer(2500)
    monkeypatch.setattr(perf_workers, "_consumer", lambda spec: fake)
    args = options.parse_args(["consume", "--bootstrap-server", "tcp://h:1", "--topic", "t",
                               "--num-records", "2500", "--no-progress", "--json",
                               str(tmp_path / "c.json")])
    summary, rc = perf.run(args, live=False, out=io.StringIO())
    assert rc == 0 and fake.closed
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["mode"] == "consume" and doc["records"] == 2500 and doc["bytes"] == 2500 * 50
    assert doc["config"]["consumer"]["auto_offset_reset"] == "earliest"


def test_consume_short_of_records_exits_1(monkeypatch):
    monkeypatch.setattr(perf_workers, "_consumer", lambda spec: FakeConsumer(10))
    args = options.parse_args(["consume", "--bootstrap-server", "tcp://h:1", "--topic", "t",
                               "--num-records", "20", "--no-progress", "--timeout-ms", "1"])
    summary, rc = perf.run(args, live=False, out=io.StringIO())
    assert (summary.records, rc) == (10, 1)


def test_reporter_live_line_only_when_asked():
    err = io.StringIO()
    r = perf.Reporter("produce", 100, 1, live=True, out=io.StringIO(), err=err)
    r._last_live = -1e9
    r.handle(("progress", 0, 40))
    assert "40/100 records" in err.getvalue() and err.getvalue().startswith("\r")
    quiet = io.StringIO()
    r2 = perf.Reporter("produce", 100, 1, live=False, out=io.StringIO(), err=quiet)
    r2.handle(("progress", 0, 40))
    assert quiet.getvalue() == ""


def test_bench_matrix_and_baseline():
    rows = bench.matrix_rows()
    assert len(rows) == 12 and len(bench.matrix_rows(full=True)) == 16
    assert not any(r.acks == "all" and r.replication_factor == 1 for r in rows)
    assert bench.builder_records_per_sec(100, "lz4", 2000, repeat=1) > 0
    table = bench.format_table([{"record_size": 100, "acks": "1", "replication_factor": 3,
                                 "compression": "lz4", "records": 10, "records_per_sec": 500.0,
                                 "mb_per_sec": 0.05, "latency_p50_ms": 1.0,
                                 "latency_p99_ms": 2.0, "baseline_records_per_sec": 1000.0,
                                 "ratio": 0.5, "builder_records_per_sec": 4000.0,
                                 "ratio_to_builder": 0.125}])
    assert table.splitlines()[-1].split()[-4:] == ["1,000", "0.500", "4,000", "0.125"]


@pytest.mark.parametrize("acks, bulk", [("1", False), ("1", True), ("all", True)])
def test_null_sink_baseline_runs_the_real_producer(tmp_path, acks, bulk):
    """--null-sink: every record acknowledged with its own offset, in order, no fleet at all."""
    out = tmp_path / "r.json"
    argv = ["produce", "--bootstrap-server", "tcp://127.0.0.1:1", "--topic", "t",
            "--num-records", "3000", "--record-size", "50", "--acks", acks, "--partition", "1",
            "--batch-size", "4096", "--null-sink", "--create-topic", "--no-progress",
            "--json", str(out)] + (["--bulk"] if bulk else [])
    assert perf.main(argv) == 0
    result = json.loads(out.read_text())
    assert result["records"] == 3000 and result["errors"] == 0
    assert result["config"]["null_sink"] is True


def test_null_sink_offsets_count_records_per_partition():
    from riverbed import Producer
    from loadgen.nullsink import NULL_ENDPOINT, null_sink_factory
    with Producer([NULL_ENDPOINT], _channel_factory=null_sink_factory(2), batch_size=1000,
                  acks="all") as p:
        assert p.partitions_for("t") == {0, 1}
        futs = [p.send("t", b"v%d" % i, partition=i % 2) for i in range(400)]
        p.flush()
        offsets = [f.result(timeout=5).offset for f in futs]
    assert offsets[0::2] == list(range(200)) and offsets[1::2] == list(range(200))


def test_throttle_sleeps_in_chunks_of_at_least_two_ms_and_keeps_the_rate(monkeypatch):
    """Kafka's ThroughputThrottler: no sleep per record, only once the deficit reaches 2 ms."""
    now = [100.0]
    sleeps: list[float] = []

    def sleep(s):
        sleeps.append(s)
        now[0] += s
    monkeypatch.setattr(perf.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(perf.time, "sleep", sleep)
    limiter = perf_workers.make_limiter(50_000, now[0])          # burst: 10 ms worth (500 records)
    for _ in range(2000):
        perf_workers._throttle(limiter, 1)
    assert sleeps and min(sleeps) >= perf_workers.MIN_SLEEP_S
    assert len(sleeps) <= (2000 - 500) / 100 + 1            # ~one sleep per 100 records
    # the rate holds: 2000 records take (2000 - burst) / rate seconds, up to one chunk
    assert abs(sum(sleeps) - 1500 / 50_000) <= perf_workers.MIN_SLEEP_S


@pytest.mark.parametrize("processes", ["1", "2"])
def test_produce_run_with_warmup_prints_and_writes_the_steady_state(monkeypatch, tmp_path,
                                                                    processes):
    monkeypatch.setattr(perf_workers, "_producer", lambda spec: FakeProducer())
    monkeypatch.setattr(perf, "_run_workers", lambda kind, specs, reporter, processes:
                        [perf.produce_worker(sp, i, reporter.handle, lambda: perf.time.time())
                         for i, sp in enumerate(specs)])
    out = io.StringIO()
    summary, rc = perf.run(_args("--warmup-records", "400", "--processes", processes, "--json",
                                 str(tmp_path / "w.json")), live=False, out=out)
    assert rc == 0 and summary.records == 1000
    st = summary.steady_state
    assert st["warmup_records"] == 400 and st["records"] == 600 and st["bytes"] == 60_000
    assert 0 < st["elapsed_s"] <= summary.elapsed_s and st["latency_ms"]["p99"] >= 0
    lines = out.getvalue().splitlines()
    assert lines[-2].startswith("1000 records sent, ") and lines[-2].endswith("99.9th.")
    assert lines[-1].startswith("600 records sent, ")
    assert lines[-1].endswith("(steady state after 400 warm-up records).")
    doc = json.loads((tmp_path / "w.json").read_text())
    assert doc["steady_state"]["records"] == 600 and doc["config"]["warmup_records"] == 400


def test_no_warmup_leaves_the_output_as_it_was(monkeypatch, tmp_path):
    monkeypatch.setattr(perf_workers, "_producer", lambda spec: FakeProducer())
    out = io.StringIO()
    summary, _ = perf.run(_args("--json", str(tmp_path / "n.json")), live=False, out=out)
    assert summary.steady_state is None
    assert "steady state" not in out.getvalue()
    assert "steady_state" not in json.loads((tmp_path / "n.json").read_text())


@pytest.mark.parametrize("value, message", [("1000", "must be less than --num-records"),
                                            ("-1", "expected 0 or more")])
def test_warmup_must_leave_records_to_measure(capsys, value, message):
    with pytest.raises(SystemExit) as e:
        _args("--warmup-records", value)
    assert e.value.code == 2 and message in capsys.readouterr().err
