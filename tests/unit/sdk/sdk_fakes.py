"""A fake Channel and a scripted in-memory gateway for SDK unit tests (no sockets)."""
from __future__ import annotations

import collections
import itertools
import threading

from riverbed import errors
from riverbed._proto.v1 import header_pb2
from riverbed.wire.apis import APIS
from riverbed.wire.framing import Response, synthetic_response


class FakeGateway:
    """handlers: api -> fn(body, payloads) -> (response body, payloads) or an int error code
    (envelope error) or None (no answer)."""

    def __init__(self, handlers=None):
        self.handlers = dict(handlers or {})
        self.requests: list[tuple[int, object, list]] = []
        self.channels: list[FakeChannel] = []
        # answers to these APIs are held back on every channel until FakeChannel.release()
        # (a long-polled request the server holds), the others still come at once
        self.hold_apis: set[int] = set()

    def factory(self, endpoint, client_id=""):
        ch = FakeChannel(self, endpoint)
        self.channels.append(ch)
        return ch

    def answer(self, api, body, payloads):
        self.requests.append((api, body, list(payloads)))
        h = self.handlers.get(api)
        if h is None:
            return None
        return h(body, list(payloads))


class FakeChannel:
    def __init__(self, gateway: FakeGateway, endpoint: str):
        self.gateway = gateway
        self.endpoint = endpoint
        self._corr = 0
        self._ready: collections.deque[Response] = collections.deque()
        self.closed = False
        self.held: list[Response] = []     # answers held back (hold=True)
        self.hold = False
        # a test's release() and a sender thread's send(): an answer is either held before the
        # release or never held
        self._hold_lock = threading.Lock()

    def _response(self, corr, api, out):
        if isinstance(out, int):
            return synthetic_response(corr, api, out, "fake envelope error")
        body, payloads = out
        header = header_pb2.ResponseHeader(correlation_id=corr, api=api)
        return Response(header, api, body, list(payloads))

    def send(self, api, body, *, payloads=(), timeout_ms=30000, api_version=0,
             expect_response=True):
        self._corr += 1
        corr = self._corr
        # round-trip the body through bytes like the real wire
        body = APIS[api].request_type.FromString(body.SerializeToString())
        out = self.gateway.answer(api, body, payloads)
        if expect_response:
            if out is None:
                out = errors.ErrorCode.Value("REQUEST_TIMED_OUT")
            resp = self._response(corr, api, out)
            with self._hold_lock:
                held = self.hold or api in self.gateway.hold_apis
                (self.held if held else self._ready).append(resp)
        return corr

    def release(self):
        with self._hold_lock:
            self._ready.extend(self.held)
            self.held.clear()

    def recv(self, timeout_ms):
        return self._ready.popleft() if self._ready else None

    def call(self, api, body, *, payloads=(), timeout_ms=30000, api_version=0):
        corr = self.send(api, body, payloads=payloads, timeout_ms=timeout_ms)
        for i, r in enumerate(self._ready):
            if r.correlation_id == corr:
                del self._ready[i]
                r.raise_for_error()
                return r
        raise errors.RequestTimedOutError("fake: no answer")

    def flush(self):
        return 0

    def close(self):
        self.closed = True


def pollable_fake_channels(monkeypatch) -> None:
    """Give FakeChannel a `socket` a producer's sender thread can poll: an inproc PAIR socket
    that never fires (the sender registers its channel's DEALER with a zmq.Poller)."""
    import zmq
    pair = zmq.Context.instance().socket(zmq.PAIR)
    pair.bind("inproc://fake-dealer-%d" % next(_FAKE_DEALERS))
    monkeypatch.setattr(FakeChannel, "socket", pair, raising=False)


_FAKE_DEALERS = itertools.count()
