"""A verifying producer and consumer (Kafka's VerifiableProducer / ProduceConsumeValidateTest).

VerifyingProducer runs a background thread that sends records to a topic's partitions round
robin, with acks=all by default. Each value is `b"<run id>:<partition>:<seq>:"` padded to
`value_size` bytes; `seq` counts per partition from 0 in send order. Every acknowledgement
(partition, offset, seq) is remembered; every failure is counted by error class.

verify(...) reads every partition from the beginning to its high watermark and checks:
- every acknowledged record is present at its acknowledged offset (nothing lost or moved);
- per partition, acknowledged records' offsets increase with their seq (order kept);
- offsets read are strictly increasing (and counts gaps);
and counts duplicates (a payload of this run at more than one offset: allowed while the
producer is not idempotent, as with Kafka's non-idempotent producer after a lost answer),
unacknowledged records that were written anyway, and foreign or malformed values.
"""
from __future__ import annotations

import collections
import dataclasses
import threading
import time
import uuid
from collections.abc import Iterable, Sequence

from riverbed import Consumer, Producer, TopicPartition

__all__ = ["VerifyingProducer", "Verification", "check_logs", "read_partitions", "verify"]


class VerifyingProducer:
    """Background producer remembering every acknowledged (partition, offset, seq).

        with VerifyingProducer(bootstrap, "t", partitions=4) as vp:
            vp.wait_for_acks(100)            # at least 100 more acks (all partitions)
            ...faults...
        report = verify(bootstrap, "t", [vp])

    `max_in_flight_requests_per_connection=1` keeps per-partition order even without
    idempotence (a retry cannot overtake a later batch); `enable_idempotence` defaults to False
    so the duplicate count measures the non-idempotent producer (pass None for the SDK's
    default, which turns it on with acks=all when the cluster serves INIT_PRODUCER_ID).
    `sdk_defaults=True` gives the producer `acks` and nothing else: every other setting is the
    SDK's default (idempotence on with acks=all, 5 requests in flight, its retries and
    timeouts), as an application that sets only acks would run it."""

    def __init__(self, bootstrap: Sequence[str], topic: str, partitions: int | Sequence[int], *,
                 acks: int | str = "all", value_size: int = 64, rate_per_s: float = 400.0,
                 max_outstanding: int = 400, run_id: str | None = None,
                 enable_idempotence: bool | None = False, sdk_defaults: bool = False,
                 **producer_kw):
        self.topic = topic
        self.partitions = list(range(partitions)) if isinstance(partitions, int) else list(partitions)
        self.run_id = run_id or uuid.uuid4().hex[:8]
        self.value_size = value_size
        self.rate_per_s = rate_per_s
        self.max_outstanding = max_outstanding
        kw = dict(acks=acks, linger_ms=2, retries=1_000_000, retry_backoff_ms=50,
                  request_timeout_ms=5000, delivery_timeout_ms=30000,
                  max_in_flight_requests_per_connection=1, enable_idempotence=enable_idempotence)
        kw.update(producer_kw)
        if sdk_defaults:
            kw = dict(acks=acks, **producer_kw)
        self.producer = Producer(list(bootstrap), **kw)
        self._lock = threading.Condition()
        self.acked: dict[int, dict[int, int]] = {p: {} for p in self.partitions}  # p -> seq -> off
        self.ack_times: dict[int, list[float]] = {p: [] for p in self.partitions}
        self.failed: collections.Counter[str] = collections.Counter()
        self.sent = 0
        self._seq = {p: 0 for p in self.partitions}
        self._outstanding = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.thread_error: BaseException | None = None

    # -- values ---------------------------------------------------------------------------
    def value(self, partition: int, seq: int) -> bytes:
        v = b"%s:%d:%d:" % (self.run_id.encode(), partition, seq)
        return v.ljust(self.value_size, b".")

    @staticmethod
    def parse(value: bytes | None) -> tuple[str, int, int] | None:
        try:
            run, p, seq, _ = value.split(b":", 3)   # type: ignore[union-attr]
            return run.decode(), int(p), int(seq)
        except (AttributeError, ValueError, UnicodeDecodeError):
            return None

    # -- running --------------------------------------------------------------------------
    def start(self) -> "VerifyingProducer":
        self._thread = threading.Thread(target=self._run, name=f"verifying-producer-{self.run_id}",
                                        daemon=True)
        self._thread.start()
        return self

    def _on_done(self, partition: int, seq: int, fut) -> None:
        exc = fut.exception(timeout=0)
        with self._lock:
            self._outstanding -= 1
            if exc is None:
                self.acked[partition][seq] = fut.result(timeout=0).offset
                self.ack_times[partition].append(time.monotonic())
            else:
                self.failed[type(exc).__name__] += 1
            self._lock.notify_all()

    def _run(self) -> None:
        interval = 1.0 / self.rate_per_s if self.rate_per_s else 0.0
        next_t = time.monotonic()
        try:
            while not self._stop.is_set():
                for p in self.partitions:
                    with self._lock:
                        self._lock.wait_for(lambda: self._outstanding < self.max_outstanding
                                            or self._stop.is_set(), timeout=1.0)
                        if self._stop.is_set():
                            return
                        if self._outstanding >= self.max_outstanding:
                            continue
                        self._outstanding += 1
                        seq = self._seq[p]
                        self._seq[p] = seq + 1
                        self.sent += 1
                    fut = self.producer.send(self.topic, self.value(p, seq), partition=p)
                    fut.add_done_callback(lambda f, p=p, s=seq: self._on_done(p, s, f))
                    if interval:
                        next_t += interval
                        delay = next_t - time.monotonic()
                        if delay > 0:
                            self._stop.wait(delay)
                        else:
                            next_t = time.monotonic()
        except BaseException as e:  # noqa: BLE001 - reported by stop()
            self.thread_error = e

    def acked_count(self, partition: int | None = None) -> int:
        with self._lock:
            if partition is not None:
                return len(self.acked[partition])
            return sum(len(a) for a in self.acked.values())

    def wait_for_acks(self, n: int, partition: int | None = None, timeout_s: float = 60.0,
                      what: str = "") -> None:
        """Wait until `n` more records are acknowledged (on `partition`, or on any)."""
        target = self.acked_count(partition) + n
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while (len(self.acked[partition]) if partition is not None else
                   sum(len(a) for a in self.acked.values())) < target:
                left = deadline - time.monotonic()
                if left <= 0 or self.thread_error is not None:
                    raise AssertionError(
                        f"{n} more acks{' on partition %d' % partition if partition is not None else ''}"
                        f" not seen within {timeout_s:.0f} s {what}; failures so far: "
                        f"{dict(self.failed)}; thread error: {self.thread_error!r}")
                self._lock.wait(min(left, 0.5))

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop sending and wait for every outstanding record to complete (either way)."""
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join(timeout_s)
        try:
            self.producer.flush(timeout=timeout_s)
        finally:
            self.producer.close(timeout=5)
        if self.thread_error is not None:
            raise AssertionError(f"verifying producer thread failed: {self.thread_error!r}")

    def __enter__(self) -> "VerifyingProducer":
        return self.start()

    def __exit__(self, *exc) -> None:
        if not self._stop.is_set():
            try:
                self.stop()
            except Exception:  # noqa: BLE001 - don't hide the test's own failure
                if exc[0] is None:
                    raise

    def summary(self) -> dict:
        return {"run_id": self.run_id, "sent": self.sent, "acked": self.acked_count(),
                "failed": dict(self.failed)}


def read_partitions(bootstrap: Sequence[str], topic: str, partitions: Iterable[int],
                    timeout_s: float = 60.0) -> dict[int, list[tuple[int, bytes | None]]]:
    """Every record of each partition from the beginning up to its high watermark (read at
    the start), as (offset, value) lists."""
    tps = [TopicPartition(topic, p) for p in partitions]
    out: dict[int, list[tuple[int, bytes | None]]] = {tp.partition: [] for tp in tps}
    with Consumer(bootstrap=list(bootstrap), auto_offset_reset="earliest",
                  fetch_max_wait_ms=100) as c:
        c.assign(tps)
        ends = c.end_offsets(tps)
        c.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout_s
        todo = {tp for tp in tps if ends[tp] > c.position(tp)}
        while todo:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"could not read {topic} up to its high watermarks within {timeout_s:.0f} s: "
                    + ", ".join(f"{tp.partition}: {c.position(tp)}/{ends[tp]}" for tp in todo))
            for tp, recs in c.poll(timeout_ms=500).items():
                out[tp.partition] += [(r.offset, r.value) for r in recs]
            todo = {tp for tp in todo if c.position(tp) < ends[tp]}
    return out


@dataclasses.dataclass
class Verification:
    acked: int = 0
    read: int = 0
    lost: list = dataclasses.field(default_factory=list)         # (p, seq, offset, found)
    out_of_order: list = dataclasses.field(default_factory=list)  # (p, seq, offset, prev off)
    duplicates: int = 0              # extra copies of this run's records
    unacked_written: int = 0         # records never acknowledged that were written anyway
    foreign: int = 0                 # values not from the runs checked
    offset_gaps: int = 0
    non_increasing_offsets: int = 0

    @property
    def ok(self) -> bool:
        return not self.lost and not self.out_of_order and not self.non_increasing_offsets

    def describe(self) -> str:
        return (f"acked {self.acked}, read {self.read}, lost {len(self.lost)} {self.lost[:5]}, "
                f"out of order {len(self.out_of_order)} {self.out_of_order[:5]}, "
                f"duplicates {self.duplicates}, unacked but written {self.unacked_written}, "
                f"foreign {self.foreign}, offset gaps {self.offset_gaps}, "
                f"non-increasing offsets {self.non_increasing_offsets}")


def verify(bootstrap: Sequence[str], topic: str, producers: Sequence[VerifyingProducer],
           timeout_s: float = 60.0) -> Verification:
    """Read the whole topic back and check it against what `producers` had acknowledged."""
    parts = sorted({p for vp in producers for p in vp.partitions})
    return check_logs(read_partitions(bootstrap, topic, parts, timeout_s), producers)


def check_logs(logs: dict[int, list[tuple[int, bytes | None]]],
               producers: Sequence[VerifyingProducer]) -> Verification:
    """The check of `verify` on logs already read (partition -> [(offset, value)]): pure, so
    other checkers (the soak's) build on it. `producers` need only `run_id`, `partitions`,
    `acked` ({partition: {seq: offset}}) and `value(partition, seq)`."""
    parts = sorted({p for vp in producers for p in vp.partitions})
    runs = {vp.run_id: vp for vp in producers}
    v = Verification(acked=sum(len(a) for vp in producers for a in vp.acked.values()))
    for p in parts:
        log = logs[p]
        v.read += len(log)
        at: dict[int, bytes | None] = {}
        copies: collections.Counter[tuple[str, int]] = collections.Counter()
        prev = None
        for off, value in log:
            if prev is not None:
                if off <= prev:
                    v.non_increasing_offsets += 1
                elif off != prev + 1:
                    v.offset_gaps += 1
            prev = off
            at[off] = value
            parsed = VerifyingProducer.parse(value)
            if parsed is None or parsed[0] not in runs or parsed[1] != p:
                v.foreign += 1
                continue
            copies[(parsed[0], parsed[2])] += 1
        v.duplicates += sum(n - 1 for n in copies.values() if n > 1)
        for vp in producers:
            acked = vp.acked.get(p, {})
            prev_off = -1
            for seq in sorted(acked):
                off = acked[seq]
                expected = vp.value(p, seq)
                if at.get(off) != expected:
                    v.lost.append((p, seq, off, at.get(off, "missing")))
                if off <= prev_off:
                    v.out_of_order.append((p, seq, off, prev_off))
                prev_off = off
            v.unacked_written += sum(1 for (run, seq) in copies
                                     if run == vp.run_id and seq not in acked)
    return v
