"""The soak's clients, one process (soak.py starts it beside a local fleet, or in the deployment
test bed's client namespace), driven by JSON lines on stdin, answering JSON lines on stdout:

    {"op": "start", "topic": T, "partitions": N, "rate": R, "group": G}
        create T (RF 3, min.insync.replicas 2) unless it exists; start the verifying acks=all
        idempotent producer (tests/fault/verifiers.py) at R records/s and the group consumer
    {"op": "sample"}  -> {"acked", "consumed", "commits", "commit_failures", "poll_errors"}
    {"op": "stop", "timeout_s": S}
        stop the producer (every record sent completes either way); let the consumer catch up
        with the log's end and commit; read the topic back; ask the group's committed offsets;
        answer the record and commit checks (soak_check.py) and the per-second series
    {"op": "quit"}

The consumer commits synchronously about once a second what it has been given (the positions of
its partitions), remembering each commit that was acknowledged; it keeps the (offset, seq) of
every record it is given; poll and commit errors (a coordinator or gateway down) are counted and
it goes on, with a new consumer if the old one is closed.
"""
from __future__ import annotations

import argparse
import array
import collections
import pathlib
import sys
import threading
import time
import traceback

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[0] / "fault"))
sys.path.insert(0, str(HERE.parents[0] / "deploy"))

from soak_check import check_commits, parse_seq, records_json  # noqa: E402

COMMIT_INTERVAL_S = 1.0


class GroupConsumer:
    def __init__(self, bootstrap: list[str], topic: str, group: str):
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.lock = threading.Lock()
        self.consumed: dict[int, tuple[array.array, list]] = {}   # p -> (offsets, [(run, seq)])
        self.per_second: collections.Counter[int] = collections.Counter()
        self.commits: list[dict[int, int]] = []
        self.commit_failures: collections.Counter[str] = collections.Counter()
        self.poll_errors: collections.Counter[str] = collections.Counter()
        self.positions: dict[int, int] = {}
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="soak-consumer", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> None:
        self.thread.start()

    def _new(self):
        from riverbed import Consumer
        c = Consumer(bootstrap_servers=self.bootstrap, group_id=self.group,
                     enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=200)
        c.subscribe([self.topic])
        return c

    def _commit(self, c) -> None:
        from riverbed import TopicPartition
        try:
            mine = {tp.partition: c.position(tp) for tp in c.assignment() if tp.topic == self.topic}
            if not mine:
                return
            c.commit({TopicPartition(self.topic, p): off for p, off in mine.items()})
        except Exception as e:  # noqa: BLE001 - a fault in the way: counted, tried again
            self.commit_failures[type(e).__name__] += 1
            return
        with self.lock:
            self.commits.append(mine)
            self.positions.update(mine)

    def _run(self) -> None:
        c = None
        next_commit = time.monotonic() + COMMIT_INTERVAL_S
        try:
            while not self._stop.is_set():
                try:
                    if c is None:
                        c = self._new()
                    got = c.poll(timeout_ms=200)
                except Exception as e:  # noqa: BLE001 - counted; a closed consumer is replaced
                    self.poll_errors[type(e).__name__] += 1
                    if c is not None and getattr(c, "_closed", False):
                        c = None
                    self._stop.wait(0.2)
                    continue
                now = int(time.time())
                with self.lock:
                    for tp, recs in got.items():
                        offs, seqs = self.consumed.setdefault(tp.partition, (array.array("q"), []))
                        for r in recs:
                            offs.append(r.offset)
                            seqs.append(parse_seq(r.value))
                        self.per_second[now] += len(recs)
                if time.monotonic() >= next_commit:
                    self._commit(c)
                    next_commit = time.monotonic() + COMMIT_INTERVAL_S
            if c is not None:
                self._commit(c)
        except BaseException as e:  # noqa: BLE001 - reported at stop
            self.error = e
            traceback.print_exc(file=sys.stderr)
        finally:
            if c is not None:
                try:
                    c.close(autocommit=False)
                except Exception:  # noqa: BLE001
                    pass

    def consumed_count(self) -> int:
        with self.lock:
            return sum(len(o) for o, _ in self.consumed.values())

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(60)


class Workload:
    def __init__(self, bootstrap: list[str]):
        self.bootstrap = bootstrap
        self.vp = None
        self.consumer: GroupConsumer | None = None
        self.topic = ""
        self.group = ""

    def op_start(self, topic: str, partitions: int, rate: float, group: str) -> dict:
        from riverbed import Admin, errors
        from riverbed.structs import NewTopic
        from verifiers import VerifyingProducer
        self.topic, self.group = topic, group
        with Admin(self.bootstrap) as admin:
            try:
                admin.create_topics([NewTopic(topic, partitions, 3, {"min.insync.replicas": "2"})])
            except errors.TopicAlreadyExistsError:
                pass
        self.vp = VerifyingProducer(self.bootstrap, topic, partitions, acks="all",
                                    enable_idempotence=True, rate_per_s=rate,
                                    max_in_flight_requests_per_connection=5,
                                    request_timeout_ms=10000, delivery_timeout_ms=300000)
        self.vp.start()
        self.vp.wait_for_acks(50, timeout_s=120, what="at the start")
        self.consumer = GroupConsumer(self.bootstrap, topic, group)
        self.consumer.start()
        return {"run_id": self.vp.run_id}

    def op_sample(self) -> dict:
        c = self.consumer
        return {"t": time.time(), "acked": self.vp.acked_count() if self.vp else 0,
                "consumed": c.consumed_count() if c else 0,
                "commits": len(c.commits) if c else 0,
                "commit_failures": dict(c.commit_failures) if c else {},
                "poll_errors": dict(c.poll_errors) if c else {},
                "produce_failures": dict(self.vp.failed) if self.vp else {}}

    def op_stop(self, timeout_s: float = 300) -> dict:
        from riverbed import Admin, TopicPartition
        from verifiers import check_logs, read_partitions
        vp, c = self.vp, self.consumer
        vp.stop(timeout_s=timeout_s)
        logs = read_partitions(self.bootstrap, self.topic, vp.partitions, timeout_s)
        ends = {p: (log[-1][0] + 1 if log else 0) for p, log in logs.items()}
        deadline = time.monotonic() + timeout_s
        caught_up = False
        while time.monotonic() < deadline and c.error is None:
            with c.lock:
                pos = dict(c.positions)      # what was committed last
            if all(pos.get(p, 0) >= end for p, end in ends.items()):
                caught_up = True
                break
            time.sleep(0.5)
        c.stop()
        with Admin(self.bootstrap) as admin:
            final = {tp.partition: om.offset for tp, om in admin.list_group_offsets(
                self.group, [TopicPartition(self.topic, p) for p in vp.partitions]).items()}
        records = check_logs(logs, [vp])
        with c.lock:
            consumed = {p: list(zip(offs, seqs)) for p, (offs, seqs) in c.consumed.items()}
            commits = list(c.commits)
        commit_check = check_commits(logs, commits, final, consumed)
        wall = time.time() - time.monotonic()
        acks_per_s: collections.Counter[int] = collections.Counter(
            int(t + wall) for ts in vp.ack_times.values() for t in ts)
        ack_times = sorted(t + wall for ts in vp.ack_times.values() for t in ts)
        return {"records": records_json(records), "commits": commit_check.to_json(),
                "consumer_caught_up": caught_up, "consumer_error": repr(c.error) if c.error else None,
                "final_committed": final, "log_end": ends,
                "produce_failures": dict(vp.failed), "sent": vp.sent,
                "commit_failures": dict(c.commit_failures), "poll_errors": dict(c.poll_errors),
                "acks_per_s": sorted(acks_per_s.items()),
                "consumed_per_s": sorted(c.per_second.items()),
                "ack_times": [round(t, 3) for t in ack_times]}


def main() -> int:
    from json_lines import serve
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True, help="comma-separated gateway endpoints")
    a = ap.parse_args()
    serve(Workload(a.bootstrap.split(",")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
