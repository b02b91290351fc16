"""Observability against a real fleet: every process's Prometheus endpoint after a known load, the
metrics following a storage node's death and return with `cluster health`, the SDK's metrics()
dicts after that load, one acks=all produce as one trace across the SDK, the gateway and the
storage node (spans exported over OTLP/HTTP to a receiver in this test), a group consumer's fetch,
join and commit as traces through the gateway to the storage node, group coordinator and offset
manager (and its riverbed.consumer.* instruments), `riverbed top`, and a real Prometheus server (Debian's package)
scraping the fleet with the scrape config the launcher writes, which also checks every series
the Grafana dashboard queries.
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from deploy.fleet import Fleet, free_base_port
from deploy.process import free_port
from riverbed import Admin, Consumer, NewTopic, Producer, TopicPartition, errors
from loadgen.otlp_sink import OtlpReceiver
from riverbed.tools.top import parse_metrics

pytestmark = pytest.mark.integration

ROOT = pathlib.Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "riverbed-dashboard.json"
TOPIC = "obs"
RECORDS = 3000
VALUE = b"v" * 100
CLIENT_METRICS: dict[str, dict] = {}     # the loaded fixture's producer and consumer metrics()


@pytest.fixture(scope="module")
def otlp():
    r = OtlpReceiver()
    yield r
    r.close()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, otlp):
    env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{otlp.url}/v1/traces",
           "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": f"{otlp.url}/v1/metrics",
           "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_METRIC_EXPORT_INTERVAL": "1000"}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)          # the fleet's processes inherit it
        f = Fleet(tmp_path_factory.mktemp("obs-fleet"), free_base_port(), storage_nodes=3,
                  controllers=2, gateways=1)
        try:
            f.up()
            yield f
        finally:
            f.down()


def endpoints(fleet) -> dict[str, tuple[str, str]]:
    return {p["name"]: (p["role"], p["metrics_endpoint"]) for p in fleet.status()["processes"]
            if p["role"] != "zookeeper"}


def scrape(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        assert r.status == 200
        return parse_metrics(r.read().decode())


def total(samples: dict, name: str, **labels) -> float:
    want = set(labels.items())
    return sum(v for (n, lab), v in samples.items() if n == name and want <= set(lab))


def role_total(fleet, role: str, name: str, **labels) -> float:
    """Summed over the processes of `role` that answer (a killed one does not)."""
    out = 0.0
    for r, url in endpoints(fleet).values():
        if r != role:
            continue
        try:
            out += total(scrape(url), name, **labels)
        except OSError:
            continue
    return out


def wait_until(fn, what: str, timeout_s: float = 60.0, interval_s: float = 0.5):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except (OSError, errors.RiverbedError) as e:
            last = e
        time.sleep(interval_s)
    raise AssertionError(f"{what}: not reached in {timeout_s} s (last: {last!r})")


def health(fleet, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "riverbed.tools", "cluster", "health",
                           "--bootstrap-server", fleet.gateway_endpoint, *args],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def loaded(fleet):
    """RECORDS records produced (acks=all) to TOPIC and consumed by group obs-group, committed."""
    bootstrap = [fleet.gateway_endpoint]
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 3, 3)])
        wait_until(lambda: all(p.leader >= 0 and len(p.isr) == 3
                               for p in admin.describe_topics([TOPIC])[0].partitions),
                   "leaders and full ISRs")
    with Producer(bootstrap, acks=-1, linger_ms=5) as p:
        futures = [p.send(TOPIC, value=VALUE, key=b"k%d" % i) for i in range(RECORDS)]
        p.flush()
        for f in futures:
            f.get(timeout=30)
        CLIENT_METRICS["producer"] = p.metrics()
        CLIENT_METRICS["batch_size_max"] = p.config["batch_size_max"]
    got = 0
    with Consumer(TOPIC, bootstrap=bootstrap, group_id="obs-group", auto_offset_reset="earliest",
                  enable_auto_commit=False, fetch_max_wait_ms=100) as c:
        deadline = time.monotonic() + 60
        while got < RECORDS and time.monotonic() < deadline:
            got += sum(len(r) for r in c.poll(timeout_ms=500).values())
        c.commit()
        CLIENT_METRICS["consumer"] = c.metrics()
    assert got == RECORDS
    return bootstrap


def test_every_process_exports_the_monitoring_set_with_plausible_values(fleet, loaded):
    eps = endpoints(fleet)
    # every service, the transaction coordinator included (idle: __transaction_state is made
    # on the first transactional request)
    assert len(eps) == 9 and all(url.startswith("http://127.0.0.1:") for _, url in eps.values())
    scrapes = {name: scrape(url) for name, (_, url) in eps.items()}
    for name, s in scrapes.items():      # process metrics everywhere
        assert total(s, "riverbed_process_memory_rss_bytes") > 10e6, name
        assert total(s, "riverbed_process_cpu_time_seconds_total") > 0, name
        assert total(s, "riverbed_process_open_file_descriptors") > 0, name
        assert total(s, "riverbed_process_gc_pauses_total") > 0, name
        assert ("riverbed_process_gc_pause_time_seconds_total", (("generation", "0"),)) in s, name
    nodes = [s for n, s in scrapes.items() if eps[n][0] == "storage_node"]
    # messages in counts each record once, on its leader (followers' appends are replication)
    assert sum(total(s, "riverbed_server_messages_in_total", topic=TOPIC) for s in nodes) == RECORDS
    bytes_in = sum(total(s, "riverbed_server_bytes_in_bytes_total", topic=TOPIC) for s in nodes)
    assert RECORDS * len(VALUE) < bytes_in < RECORDS * (len(VALUE) + 80)
    assert sum(total(s, "riverbed_server_bytes_out_bytes_total", topic=TOPIC) for s in nodes) >= bytes_in
    assert sum(total(s, "riverbed_server_replication_bytes_out_bytes_total", topic=TOPIC)
               for s in nodes) >= 2 * bytes_in            # two followers fetched everything
    assert sum(total(s, "riverbed_server_leader_count") for s in nodes) >= 3
    assert sum(total(s, "riverbed_server_partition_count") for s in nodes) >= 9
    assert sum(total(s, "riverbed_server_under_replicated_partitions") for s in nodes) == 0
    for s in nodes:
        assert total(s, "riverbed_log_dir_free_bytes") > 0
        assert total(s, "riverbed_log_dir_size_bytes") > 0
        assert ("riverbed_server_purgatory_size", (("operation", "produce"),)) in s
    produce_requests = sum(total(s, "riverbed_server_requests_total", api="PRODUCE") for s in nodes)
    assert produce_requests > 0
    remote = sum(total(s, "riverbed_server_request_time_seconds_total", api="PRODUCE",
                       phase="remote") for s in nodes)
    assert remote > 0                                 # acks=all waited for followers
    sizes = sum(total(s, "riverbed_log_size_bytes", topic=TOPIC) for s in nodes)
    assert sizes >= 3 * bytes_in                      # three replicas of every byte
    ctrls = [s for n, s in scrapes.items() if eps[n][0] == "controller"]
    assert sum(total(s, "riverbed_controller_active_controller_count") for s in ctrls) == 1
    assert sum(total(s, "riverbed_controller_offline_partitions_count") for s in ctrls) == 0
    active = next(s for s in ctrls if total(s, "riverbed_controller_active_controller_count") == 1)
    for name in ("riverbed_controller_leader_elections_total",
                 "riverbed_controller_unclean_leader_elections_total",
                 "riverbed_controller_election_time_seconds_total"):
        assert (name, ()) in active, name           # elections: rate and time, unclean ones
    assert total(active, "riverbed_controller_broker_changes_total") >= 3   # three nodes joined
    gw = next(s for n, s in scrapes.items() if eps[n][0] == "gateway")
    assert total(gw, "riverbed_gateway_requests_total", api="PRODUCE") >= 1
    assert total(gw, "riverbed_gateway_forward_requests_total") >= produce_requests
    assert total(gw, "riverbed_gateway_client_requests_total", api="PRODUCE") >= 1
    leaders = {dict(lab)["node_id"] for (n, lab), v in gw.items()
               if n == "riverbed_gateway_forward_time_seconds_total" and v > 0}
    assert len(leaders) == 3                          # forward latency per leader (3 leaders)
    gc = next(s for n, s in scrapes.items() if eps[n][0] == "group_coordinator")
    assert total(gc, "riverbed_group_coordinator_rebalances_total") >= 1
    assert total(gc, "riverbed_group_coordinator_rebalance_time_seconds_total") > 0
    assert total(gc, "riverbed_group_coordinator_groups", state="Empty") \
        + total(gc, "riverbed_group_coordinator_groups", state="Stable") >= 1
    om_url = next(url for r, url in eps.values() if r == "offset_manager")
    om = scrape(om_url)
    assert total(om, "riverbed_offset_manager_requests_total", api="OFFSET_COMMIT") >= 1
    assert total(om, "riverbed_offset_manager_request_time_seconds_total", api="OFFSET_COMMIT",
                 phase="total") > 0                   # commit latency
    # lag: committed at the end, so 0 for each of the three partitions once it is measured
    lag = wait_until(lambda: [v for (n, lab), v in scrape(om_url).items()
                              if n == "riverbed_group_lag" and ("group", "obs-group") in lab],
                     "riverbed_group_lag for obs-group", timeout_s=30)
    assert lag == [0.0, 0.0, 0.0]


def test_the_clients_metrics_dicts_after_the_known_load(loaded):
    p = CLIENT_METRICS["producer"]
    # Every record sent once: nothing was refused, and no batch went again. (Twice a batch
    # did: 855 and 858 records, refused as out of order because the gateway let a request
    # overtake the same client's earlier one; test_gateway.py now checks that order.)
    assert p["record-send-total"] == RECORDS and p["record-send-rate"] > 0
    assert p["record-retry-total"] == 0, p["errors-by-code"]
    assert p["request-total"] == p["response-total"] == p["requests_sent"] >= 1
    assert p["records-per-request-avg"] > 1                  # batched, linger_ms=5
    assert RECORDS * len(VALUE) < p["outgoing-byte-total"] < RECORDS * (len(VALUE) + 80)
    # batches grow past batch.size while full ones wait (batch_size_max), never beyond it
    assert 0 < p["batch-size-avg"] <= p["batch-size-max"] <= CLIENT_METRICS["batch_size_max"] + 1024
    assert p["compression-rate-avg"] == 1.0
    assert 0 < p["request-latency-avg"] <= p["request-latency-max"]
    assert p["record-queue-time-max"] >= p["record-queue-time-avg"] >= 0
    assert p["record-error-total"] == 0 and p["errors-by-code"] == {}
    assert p["requests-in-flight"] == 0
    assert p["buffer-available-bytes"] == p["buffer-total-bytes"] == 33554432
    c = CLIENT_METRICS["consumer"]
    assert c["records-consumed-total"] == RECORDS == c["records_consumed"]
    assert c["bytes-consumed-total"] >= p["outgoing-byte-total"]
    assert c["fetch-total"] >= 1 and c["fetch-latency-max"] >= c["fetch-latency-avg"] > 0
    assert c["fetch-size-max"] >= c["fetch-size-avg"] > 0
    assert c["records-lag"] == {f"{TOPIC}-{i}": 0 for i in range(3)}
    assert c["records-lag-max"] >= 0
    assert set(c["records-lag-max-by-partition"]) == {f"{TOPIC}-{i}" for i in range(3)}
    assert c["rebalance-total"] == 1 and c["rebalance-latency-avg"] > 0
    assert c["join-time-avg"] > 0 and c["sync-time-avg"] > 0
    assert c["commit-total"] == 1 and c["commit-latency-avg"] > 0
    assert c["time-between-poll-max"] >= 0 and c["assigned-partitions"] == 3


def test_metrics_also_go_out_over_otlp(fleet, loaded, otlp):
    wait_until(lambda: {"riverbed.server.messages_in", "riverbed.controller.active_controller_count",
                        "riverbed.process.memory.rss"} <= otlp.metric_names,
               "metrics exported over OTLP", timeout_s=30)


def test_one_acks_all_produce_is_one_trace_across_sdk_gateway_and_storage_node(fleet, loaded, otlp):
    # The SDK side in its own process: an in-memory exporter under the application's provider.
    script = textwrap.dedent(f"""
        import json
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        from riverbed import Producer
        with Producer({fleet.gateway_endpoint!r}, acks=-1) as p:
            p.send({TOPIC!r}, value=b"traced", partition=0).get(timeout=30)
        print(json.dumps([dict(name=s.name, trace_id=format(s.context.trace_id, "032x"),
                               span_id=format(s.context.span_id, "016x"),
                               kind=s.kind.name, attributes=dict(s.attributes))
                          for s in exporter.get_finished_spans()]))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    (sdk_span,) = json.loads(r.stdout)
    assert sdk_span["name"] == f"send {TOPIC}" and sdk_span["kind"] == "PRODUCER"
    assert sdk_span["attributes"]["messaging.destination.name"] == TOPIC
    assert sdk_span["attributes"]["messaging.batch.message_count"] == 1
    trace_id = sdk_span["trace_id"]

    def spans():
        mine = [s for s in otlp.spans if s["trace_id"] == trace_id]
        return mine if len(mine) >= 3 else None
    found = wait_until(spans, "the gateway's and storage node's spans", timeout_s=30)
    gw = [s for s in found if s["service"] == "riverbed-gateway"]
    node = [s for s in found if s["service"] == "riverbed-storage-node" and "PRODUCE" in s["name"]]
    wait_ = [s for s in found if s["name"] == "await followers"]
    assert len(gw) == 1 and len(node) == 1 and len(wait_) == 1, found
    assert gw[0]["parent_id"] == sdk_span["span_id"]
    assert node[0]["parent_id"] == gw[0]["span_id"]
    assert wait_[0]["parent_id"] == node[0]["span_id"]


def test_a_group_consumers_fetch_join_and_commit_are_traces_across_processes(fleet, loaded, otlp):
    """An SDK process with an in-memory exporter and a MeterProvider: its poll (FETCH), JoinGroup
    and commit spans each parent the gateway's server span, which parents the storage node's /
    group coordinator's / offset manager's; its riverbed.consumer.* instruments read metrics()."""
    script = textwrap.dedent(f"""
        import json
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        from riverbed import Consumer, TopicPartition
        got = 0
        with Consumer({TOPIC!r}, bootstrap_servers={fleet.gateway_endpoint!r},
                      group_id="traced-group", client_id="traced-consumer",
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      fetch_max_wait_ms=100) as c:
            while got < {RECORDS}:
                got += sum(len(r) for r in c.poll(timeout_ms=500).values())
            c.commit({{TopicPartition({TOPIC!r}, 0): 1}})
            names = {{}}
            for rm in reader.get_metrics_data().resource_metrics:
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        for pt in m.data.data_points:
                            if dict(pt.attributes).get("client.id") == "traced-consumer":
                                names[m.name] = pt.value
        print(json.dumps({{"records": got, "instruments": names, "spans": [
            dict(name=s.name, trace_id=format(s.context.trace_id, "032x"),
                 span_id=format(s.context.span_id, "016x"), kind=s.kind.name,
                 attributes=dict(s.attributes)) for s in exporter.get_finished_spans()]}}))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["records"] >= RECORDS
    inst = out["instruments"]
    assert inst["riverbed.consumer.records_consumed_total"] >= RECORDS
    assert inst["riverbed.consumer.assigned_partitions"] == 3
    assert inst["riverbed.consumer.rebalance_total"] == 1
    sdk = out["spans"]
    poll = next(s for s in sdk if s["name"] == f"poll {TOPIC}"
                and s["attributes"].get("messaging.batch.message_count", 0) > 0)
    assert poll["kind"] == "CONSUMER"
    assert poll["attributes"]["messaging.consumer.group.name"] == "traced-group"
    assert poll["attributes"]["messaging.operation.type"] == "receive"
    join = next(s for s in sdk if s["name"] == "JoinGroup traced-group")
    commit = next(s for s in sdk if s["name"] == f"commit {TOPIC}")
    assert join["kind"] == commit["kind"] == "CLIENT"
    assert commit["attributes"]["messaging.destination.partition.id"] == "0"
    assert commit["attributes"]["messaging.kafka.offset"] == 1

    def trace_of(span, server_service, api, min_spans=3):
        def found():
            mine = [s for s in otlp.spans if s["trace_id"] == span["trace_id"]]
            gw = [s for s in mine if s["service"] == "riverbed-gateway"]
            srv = [s for s in mine if s["service"] == server_service and api in s["name"]]
            return (gw, srv) if gw and srv else None
        return wait_until(found, f"the gateway's and {server_service}'s {api} spans",
                          timeout_s=30)

    gw, nodes = trace_of(poll, "riverbed-storage-node", "FETCH")
    assert len(gw) == 1 and gw[0]["parent_id"] == poll["span_id"] and "FETCH" in gw[0]["name"]
    assert all(n["parent_id"] == gw[0]["span_id"] for n in nodes)
    gw, coordinator = trace_of(join, "riverbed-group-coordinator", "JOIN_GROUP")
    assert len(gw) == 1 and gw[0]["parent_id"] == join["span_id"]
    assert len(coordinator) == 1 and coordinator[0]["parent_id"] == gw[0]["span_id"]
    gw, om = trace_of(commit, "riverbed-offset-manager", "OFFSET_COMMIT")
    assert len(gw) == 1 and gw[0]["parent_id"] == commit["span_id"]
    assert len(om) == 1 and om[0]["parent_id"] == gw[0]["span_id"]


def test_top_renders_a_frame_of_the_live_fleet(fleet, loaded):
    r = subprocess.run([sys.executable, "-m", "riverbed.tools", "top", "--data-dir",
                        str(fleet.data_dir), "--once", "--interval", "0.5"],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, COLUMNS="160"))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "controller: controller-" in out and "offline partitions: 0" in out
    assert TOPIC in out and "storage-3" in out and "obs-group" in out
    assert "DOWN" not in out


@pytest.mark.skipif(shutil.which("prometheus") is None,
                    reason="Debian's prometheus is not installed (make install installs it)")
def test_a_real_prometheus_scrapes_the_fleet_and_has_every_dashboard_series(fleet, loaded, tmp_path):
    config = fleet.prometheus_config_path
    assert subprocess.run(["promtool", "check", "config", str(config)], capture_output=True,
                          timeout=60).returncode == 0
    port = free_port()
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "wb"))
    try:
        def query(expr):
            url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
            with urllib.request.urlopen(url, timeout=5) as r:
                body = json.loads(r.read())
            assert body["status"] == "success", body
            return body["data"]["result"]

        def up_everywhere():
            res = query("up")
            return len(res) == 9 and all(x["value"][1] == "1" for x in res)
        wait_until(up_everywhere, "prometheus scraping all 9 processes", timeout_s=60)
        res = wait_until(lambda: query(f'sum(riverbed_server_messages_in_total{{topic="{TOPIC}"}})'),
                         "messages in through prometheus")
        assert float(res[0]["value"][1]) >= RECORDS
        res = query('riverbed_server_leader_count')
        assert {x["metric"]["role"] for x in res} == {"storage_node"}
        assert {x["metric"]["process"] for x in res} == {"storage-1", "storage-2", "storage-3"}
        # every series a dashboard panel queries exists in this Prometheus
        dashboard = json.loads(DASHBOARD.read_text())
        exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
        names = {n for e in exprs for n in re.findall(r"\b(riverbed_[a-z0-9_]+)", e)}
        assert len(names) >= 15
        wait_until(lambda: query('riverbed_group_lag{group="obs-group"}'), "lag in prometheus")
        missing = [n for n in sorted(names) if not query(f"count({n})")]
        assert missing == []
        for e in exprs:                            # and each panel's query is valid PromQL
            query(e)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_dead_follower_turns_health_red_and_its_return_green(fleet, loaded):
    assert health(fleet).returncode == 0
    with Admin(loaded) as admin:
        (desc,) = admin.describe_topics([TOPIC])
    leaders = {p.leader for p in desc.partitions}
    victim = next(n for n in (1, 2, 3) if n not in leaders) if len(leaders) < 3 else 3
    fleet.stop(f"storage-{victim}", kill=True)
    try:
        wait_until(lambda: role_total(fleet, "storage_node",
                                      "riverbed_server_under_replicated_partitions") > 0,
                   "under-replicated partitions after the kill")
        r = wait_until(lambda: (h := health(fleet)).returncode == 1 and h, "health red")
        assert f"storage node {victim} is not registered (down)" in r.stderr
        assert "under-replicated partition(s)" in r.stderr
        r = health(fleet, "--json")
        report = json.loads(r.stdout)
        assert report["healthy"] is False and victim in report["down_nodes"]
    finally:
        fleet.start(f"storage-{victim}")
    wait_until(lambda: health(fleet, "--node-id", str(victim)).returncode == 0,
               "health green with the node back in every ISR", timeout_s=90)
    assert role_total(fleet, "storage_node", "riverbed_server_under_replicated_partitions") == 0
    assert role_total(fleet, "storage_node", "riverbed_server_isr_expands_total") >= 1


def test_health_of_an_unreachable_cluster_exits_2():
    r = subprocess.run([sys.executable, "-m", "riverbed.tools", "cluster", "health",
                        "--bootstrap-server", f"tcp://127.0.0.1:{free_port()}",
                        "--timeout-ms", "1500"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "UNREACHABLE" in r.stderr
