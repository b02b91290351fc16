"""services.common.telemetry.Telemetry: the metrics endpoint serves, and a stop never waits
forever for its serve loop (BaseServer.shutdown() does when the loop does not end)."""
from __future__ import annotations

import threading
import urllib.request

from services.common import telemetry
from services.common.telemetry import Telemetry


def test_endpoint_serves_then_stops():
    tel = Telemetry("storage_node", 1, port=0, process_metrics=False)
    url = tel.start()
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
    tel.shutdown()
    assert tel._server is None


def test_a_serve_loop_that_never_ends_does_not_hold_the_stop(monkeypatch, caplog):
    monkeypatch.setattr(telemetry, "SHUTDOWN_WAIT_S", 0.2)
    tel = Telemetry("gateway", 1, port=0, process_metrics=False)
    tel.start()
    server = tel._server
    stuck = threading.Event()
    monkeypatch.setattr(server, "shutdown", lambda: stuck.wait())   # a loop that never ends
    stopping = threading.Thread(target=tel.shutdown, daemon=True)
    stopping.start()
    stopping.join(60)                          # (a guard; it returns after SHUTDOWN_WAIT_S)
    assert not stopping.is_alive()             # the stop returned ...
    assert not stuck.is_set()                  # ... while the serve loop was still running
    assert "did not stop" in caplog.text
    stuck.set()
    type(server).shutdown(server)              # end the real serve loop this test started
