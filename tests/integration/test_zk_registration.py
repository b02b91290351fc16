"""services.common.zk.register_ephemeral against a real ZooKeeper: how every role registers."""
import threading

import pytest

from services.common import zk as zkmod

pytestmark = pytest.mark.integration


def test_a_retried_create_in_the_same_session_is_ours(zk):
    sid = zk.client_id[0]
    first = zkmod.register_ephemeral(zk, "/r/ids/1", b"a", session_id=sid, timeout_s=5)
    again = zkmod.register_ephemeral(zk, "/r/ids/1", b"a", session_id=sid, timeout_s=5)
    assert first.ephemeralOwner == again.ephemeralOwner == sid
    assert first.czxid == again.czxid


def test_a_node_held_by_another_live_session_is_refused_after_the_timeout(zk, zk_chroot):
    other = zkmod.connect(zk_chroot, timeout_s=10)
    try:
        other.create("/r/ids/2", b"x", ephemeral=True, makepath=True)
        with pytest.raises(zkmod.EphemeralHeldError):
            zkmod.register_ephemeral(zk, "/r/ids/2", b"y", session_id=zk.client_id[0],
                                     timeout_s=0.3, retry_s=0.05)
        assert zk.get("/r/ids/2")[0] == b"x"            # untouched
    finally:
        zkmod.close(other)


def test_an_earlier_sessions_node_is_waited_out(zk, zk_chroot):
    old = zkmod.connect(zk_chroot, timeout_s=10)
    old.create("/r/ids/3", b"old", ephemeral=True, makepath=True)
    # The earlier session ends while we wait (as an expiring session of a restarted process).
    ender = threading.Timer(0.5, zkmod.close, args=(old,))
    ender.start()
    try:
        stat = zkmod.register_ephemeral(zk, "/r/ids/3", b"new", session_id=zk.client_id[0],
                                        timeout_s=20, retry_s=0.05)
    finally:
        ender.join()
    assert stat.ephemeralOwner == zk.client_id[0]
    assert zk.get("/r/ids/3")[0] == b"new"
