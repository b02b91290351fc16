"""The jobs of jobs/ against a real fleet: the clickstream job's driver SIGKILLed mid-batch and
restarted still counts every input record exactly once; the enrichment and backfill jobs
output exactly the events they should."""
from __future__ import annotations

import json

import pytest

from riverbed import Admin, NewTopic, TopicPartition
from spark_helpers import (
    JOBS,
    batch_files,
    generate_clicks,
    kill_group,
    load_job,
    output_counts,
    sdk_records,
    spark_submit,
    truth_counts,
    wait_exit,
    wait_for,
    wait_for_leaders,
)


def create(bootstrap, *topics):
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(t, n, 2) for t, n in topics])
    for t, n in topics:
        wait_for_leaders(bootstrap, t, n)


def parsed(records):
    """The good events among records, as the generator wrote them."""
    out = []
    for r in records:
        try:
            e = json.loads(r.value)
        except ValueError:
            continue
        if isinstance(e, dict) and e.get("page") and e.get("event_id") and e.get("user_id") \
                and e.get("ts", "").endswith("Z"):
            out.append((r, e))
    return out


@pytest.mark.timeout(1500)   # bounds for a loaded machine, not speed checks
def test_clickstream_job_killed_mid_batch_counts_every_record_once(spark, bootstrap,
                                                                   bootstrap_option, tmp_path):
    create(bootstrap, ("clicks-kill", 4), ("clicks-kill-dlq", 2))
    truth_path = tmp_path / "truth.json"
    gen = generate_clicks(bootstrap_option, "clicks-kill", truth_path, "--events", "30000",
                          "--rate", "2000", "--step-ms", "20", "--close-windows-ms", "300000",
                          wait=False)
    out, chk = tmp_path / "out", tmp_path / "chk"
    job = [str(JOBS / "clickstream.py"), "--bootstrap-servers", bootstrap_option,
           "--topic", "clicks-kill", "--dead-letter-topic", "clicks-kill-dlq",
           "--output", str(out), "--checkpoint", str(chk), "--max-offsets-per-trigger", "3000"]
    first = spark_submit(job + ["--trigger", "1 second"], tmp_path / "first.log")
    try:
        # kill the driver (and its Python workers) while a batch is planned but not committed
        def batch_in_flight():
            commits = batch_files(chk / "aggregates" / "commits")
            return len(commits) >= 2 and len(batch_files(chk / "aggregates" / "offsets")) > \
                len(commits) and first.poll() is None
        wait_for(batch_in_flight, 600, "a batch in flight after two committed", interval_s=0.02)
        kill_group(first)
        planned = batch_files(chk / "aggregates" / "offsets")
        committed = batch_files(chk / "aggregates" / "commits")
        assert len(planned) > len(committed)
    finally:
        if first.poll() is None:
            kill_group(first)
    try:
        assert gen.wait(300) == 0
    finally:
        if gen.poll() is None:
            kill_group(gen)
    second = spark_submit(job + ["--trigger", "available-now"], tmp_path / "second.log")
    assert wait_exit(second, 600, tmp_path / "second.log") == 0, \
        (tmp_path / "second.log").read_text()[-3000:]
    truth = json.loads(truth_path.read_text())
    got = output_counts(spark, out)
    got = {k: v for k, v in got.items() if k[0] != "/heartbeat"}
    assert sum(got.values()) == truth["good"]
    assert got == truth_counts(truth)
    # the dead-letter topic is at-least-once: every bad event, maybe twice; once per source
    letters = sdk_records(bootstrap, [TopicPartition("clicks-kill-dlq", p) for p in range(2)])
    sources = {dict(r.headers)["riverbed.source"] for r in letters}
    assert len(sources) == truth["bad"]
    assert all(dict(r.headers).get("dlq.error") for r in letters)


def test_enrich_job_writes_shopping_events_with_their_pages(spark, bootstrap, bootstrap_option,
                                                            tmp_path):
    create(bootstrap, ("clicks-enrich", 2), ("clicks-enriched", 2))
    generate_clicks(bootstrap_option, "clicks-enrich", tmp_path / "truth.json", "--events", "6000",
                    "--step-ms", "50", "--seed", "3")
    enrich = load_job("enrich")
    assert enrich.main(["--bootstrap-servers", bootstrap_option, "--topic", "clicks-enrich",
                        "--output-topic", "clicks-enriched", "--trigger", "available-now",
                        "--checkpoint", str(tmp_path / "chk")], spark=spark) == 0
    src = parsed(sdk_records(bootstrap, [TopicPartition("clicks-enrich", p) for p in range(2)]))
    want = {e["event_id"]: (r, e) for r, e in src
            if e["event_type"] in ("add_to_cart", "purchase") and "bot" not in e["user_agent"]}
    got = sdk_records(bootstrap, [TopicPartition("clicks-enriched", p) for p in range(2)])
    out = {json.loads(r.value)["event_id"]: r for r in got}
    assert len(got) == len(out) == len(want) > 0
    assert set(out) == set(want)
    for event_id, rec in out.items():
        r, e = want[event_id]
        value = json.loads(rec.value)
        assert rec.key == e["user_id"].encode()
        assert dict(rec.headers)["riverbed.source"] == b"clicks-enrich/%d/%d" % (r.partition,
                                                                                r.offset)
        assert value["ts"] == e["ts"] and value["page"] == e["page"]
        if e["page"].startswith("/products/"):
            assert value["category"] != "unknown" and value["price"] > 0
        elif e["page"] == "/checkout":
            assert value["category"] == "site"


def test_a_job_killed_while_writing_its_first_checkpoint_entry_starts_again(
        spark, bootstrap, bootstrap_option, tmp_path):
    # What a driver SIGKILLed between writing a query's first offset-log entry to its temporary
    # file and renaming it leaves (seen in the kill test above, for the dead-letter query).
    # Spark 4 then refuses the new query: STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY.
    create(bootstrap, ("clicks-torn", 1), ("clicks-torn-out", 1))
    generate_clicks(bootstrap_option, "clicks-torn", tmp_path / "truth.json", "--events", "500",
                    "--step-ms", "50", "--seed", "7")
    chk = tmp_path / "chk"
    (chk / "offsets").mkdir(parents=True)
    torn = chk / "offsets" / ".0.91be4e12-6f2b-4f43-8e69-591949eae64e.tmp"
    torn.write_text("v1\n{}\n")
    enrich = load_job("enrich")
    assert enrich.main(["--bootstrap-servers", bootstrap_option, "--topic", "clicks-torn",
                        "--output-topic", "clicks-torn-out", "--trigger", "available-now",
                        "--checkpoint", str(chk)], spark=spark) == 0
    assert not torn.exists() and batch_files(chk / "offsets") == [0]


def test_backfill_job_writes_exactly_the_time_range(spark, bootstrap, bootstrap_option, tmp_path):
    create(bootstrap, ("clicks-backfill", 3))
    generate_clicks(bootstrap_option, "clicks-backfill", tmp_path / "truth.json", "--events",
                    "6000", "--step-ms", "100", "--seed", "5")
    start = 1795564800000 + 120_000        # 2026-11-25T00:02:00Z
    end = start + 180_000
    backfill = load_job("backfill")
    args = ["--bootstrap-servers", bootstrap_option, "--topic", "clicks-backfill",
            "--from", str(start), "--to", "2026-11-25T00:05:00Z", "--output",
            str(tmp_path / "out"), "--max-disorder", "5s", "--min-partitions", "6"]
    src = parsed(sdk_records(bootstrap, [TopicPartition("clicks-backfill", p) for p in range(3)]))
    want = sorted(e["event_id"] for r, e in src if start <= r.timestamp < end)
    assert 1000 < len(want) < 6000
    for _ in range(2):                  # a second run replaces the same dates: same output
        assert backfill.main(args, spark=spark) == 0
        rows = spark.read.parquet(str(tmp_path / "out")).select("event_id", "date").collect()
        assert sorted(r["event_id"] for r in rows) == want
        assert {str(r["date"]) for r in rows} == {"2026-11-25"}
