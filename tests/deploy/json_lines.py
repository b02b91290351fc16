"""A helper process driven by JSON lines (the ring's agent, the soak's workload): one command a
line on its stdin, one answer a line on its stdout, its log on stderr.

    client = LineClient(popen, log)          # waits for the helper's {"ok": true, "ready": true}
    client.call("state")                     # {"op": "state"} -> the answer without "ok"
    client.close()                           # {"op": "quit"}, then SIGKILL to its group if need be

    serve(obj)                               # in the helper: {"op": X, **kw} -> obj.op_X(**kw)

Every answer carries "ok"; a failed command answers {"ok": false, "error": "..."} (call raises
it as an AssertionError) and the helper goes on.
"""
from __future__ import annotations

import json
import os
import pathlib
import selectors
import signal
import subprocess
import sys
import threading
import traceback


class LineClient:
    def __init__(self, proc: subprocess.Popen, log: pathlib.Path, ready_timeout_s: float = 180):
        self.proc, self.log = proc, log
        self.lock = threading.Lock()       # one caller at a time
        first = self._line(ready_timeout_s)
        if not first.get("ready"):
            raise AssertionError(f"the helper did not start: {first}")

    def _line(self, timeout_s: float) -> dict:
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        try:
            if not sel.select(timeout_s):
                raise AssertionError(f"the helper did not answer within {timeout_s:.0f} s; its log "
                                     f"{self.log}: {_tail(self.log)}")
        finally:
            sel.close()
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"the helper exited (rc {self.proc.poll()}); its log {self.log}: "
                                 f"{_tail(self.log)}")
        return json.loads(line)

    def call(self, op: str, timeout_s: float = 300, **kw) -> dict:
        with self.lock:
            self.proc.stdin.write(json.dumps({"op": op, **kw}) + "\n")
            self.proc.stdin.flush()
            out = self._line(timeout_s)
        if not out.pop("ok"):
            raise AssertionError(f"{op}: {out['error']}")
        return out

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=30)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def _tail(path: pathlib.Path) -> str:
    try:
        return path.read_text(errors="replace")[-3000:]
    except OSError:
        return "(unreadable)"


def serve(obj) -> None:
    """The helper's loop: say ready, then run each command line until "quit" or end of input."""
    print(json.dumps({"ok": True, "ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            cmd = json.loads(line)
            op = cmd.pop("op")
            if op == "quit":
                break
            out = {"ok": True, **getattr(obj, f"op_{op}")(**cmd)}
        except Exception as e:  # noqa: BLE001 - answered; the helper goes on
            traceback.print_exc(file=sys.stderr)
            out = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        print(json.dumps(out), flush=True)
