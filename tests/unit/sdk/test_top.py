"""`riverbed top`'s numbers from two parsed scrapes (riverbed.tools.top, no sockets)."""
from __future__ import annotations

from riverbed.tools.top import (Sample, Target, frame_data, parse_metrics, render,
                                targets_from_prometheus_config)

NODE = Target("storage-1", "storage_node", "http://h:1/metrics")
CTRL = Target("controller-1", "controller", "http://h:2/metrics")
OM = Target("offset-manager-1", "offset_manager", "http://h:3/metrics")


def node_text(messages: int, bytes_in: int, under: int) -> str:
    return f"""# TYPE riverbed_server_messages_in_total counter
riverbed_server_messages_in_total{{otel_scope_name="riverbed",topic="t"}} {messages}
# TYPE riverbed_server_bytes_in_bytes_total counter
riverbed_server_bytes_in_bytes_total{{topic="t"}} {bytes_in}
# TYPE riverbed_server_under_replicated_partitions gauge
riverbed_server_under_replicated_partitions {under}
# TYPE riverbed_server_requests_total counter
riverbed_server_requests_total{{api="PRODUCE"}} {messages // 100}
# TYPE riverbed_process_memory_rss_bytes gauge
riverbed_process_memory_rss_bytes 50000000
"""


CTRL_TEXT = """# TYPE riverbed_controller_active_controller_count gauge
riverbed_controller_active_controller_count 1
# TYPE riverbed_controller_epoch gauge
riverbed_controller_epoch 3
# TYPE riverbed_controller_offline_partitions_count gauge
riverbed_controller_offline_partitions_count 2
"""

OM_TEXT = """# TYPE riverbed_group_lag gauge
riverbed_group_lag{group="g",topic="t",partition="0"} 5
riverbed_group_lag{group="g",topic="t",partition="1"} 7
"""


def test_rates_and_state_from_two_scrapes():
    before = [Sample(NODE, 10.0, parse_metrics(node_text(1000, 100000, 0))),
              Sample(CTRL, 10.0, parse_metrics(CTRL_TEXT))]
    now = [Sample(NODE, 12.0, parse_metrics(node_text(21000, 2100000, 4))),
           Sample(CTRL, 12.0, parse_metrics(CTRL_TEXT)),
           Sample(OM, 12.0, parse_metrics(OM_TEXT))]
    fd = frame_data(now, before)
    assert fd.topics["t"]["records_in"] == 10000.0
    assert fd.topics["t"]["bytes_in"] == 1000000.0
    assert fd.under_replicated == 4
    assert fd.controller == "controller-1" and fd.controller_epoch == 3
    assert fd.offline_partitions == 2
    assert fd.groups == {"g": {"lag": 12.0, "partitions": 2}}
    node = next(p for p in fd.processes if p["name"] == "storage-1")
    assert node["requests_per_s"] == 100.0 and node["up"] and node["rss_mb"] == 50.0


def test_a_process_that_does_not_answer_is_down_and_no_controller_is_flagged():
    fd = frame_data([Sample(NODE, 1.0, None)], [])
    assert fd.processes[0]["up"] is False and fd.controller is None
    from rich.console import Console
    console = Console(record=True, width=120)
    console.print(render(fd))
    text = console.export_text()
    assert "NONE ACTIVE" in text and "DOWN" in text


def test_targets_from_the_scrape_config_riverbed_writes():
    from deploy.prometheus import Target as T, scrape_config
    text = scrape_config([T("storage-1", "storage_node", "127.0.0.1:9301", "127.0.0.1"),
                          T("gateway-1", "gateway", "127.0.0.1:9200", "127.0.0.1")])
    ts = targets_from_prometheus_config(text)
    assert sorted((t.name, t.role, t.url) for t in ts) == [
        ("gateway-1", "gateway", "http://127.0.0.1:9200/metrics"),
        ("storage-1", "storage_node", "http://127.0.0.1:9301/metrics")]
