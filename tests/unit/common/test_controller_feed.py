"""ControllerFeed: which controller is active, and where the metadata subscriber listens."""
import logging

from services.common import znodes
from services.common.controller_feed import ControllerFeed


class Sub:
    def __init__(self):
        self.calls = []

    def connect(self, ep):
        self.calls.append(("connect", ep))

    def disconnect(self, ep):
        self.calls.append(("disconnect", ep))


def info(cid, port):
    return znodes.encode_controller(znodes.ControllerInfo(
        cid, f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port + 10}", 1))


def test_follows_the_controller_and_moves_the_subscriber():
    feed, sub = ControllerFeed(logging.getLogger("t")), Sub()
    assert feed.update(info(1, 100), sub) and feed.current.controller_id == 1
    assert not feed.update(info(1, 100), sub)                     # the same: nothing to do
    assert feed.update(info(2, 200), sub) and feed.current.controller_id == 2
    assert feed.update(None, sub) and feed.current is None        # /controller gone
    assert sub.calls == [("connect", "tcp://127.0.0.1:110"),
                         ("disconnect", "tcp://127.0.0.1:110"), ("connect", "tcp://127.0.0.1:210"),
                         ("disconnect", "tcp://127.0.0.1:210")]


def test_an_unreadable_payload_counts_as_no_controller():
    feed, sub = ControllerFeed(logging.getLogger("t")), Sub()
    feed.update(info(1, 100), sub)
    assert feed.update(b"{not json", sub) and feed.current is None
    assert sub.calls[-1] == ("disconnect", "tcp://127.0.0.1:110")
