"""Issue 24: after a network cut, a service's ZooKeeper client tries again within about a
second (services.common.zk.connection_retry). kazoo's default doubled its delay up to an hour:
a storage node cut off for a minute re-registered (and got its replicas back) up to a minute
after the network returned. The policy is run directly, sleeps recorded; no ZooKeeper."""
from kazoo.retry import ForceRetryError

from services.common import zk


def _sleeps(retry, failures: int) -> list[float]:
    """What `retry` sleeps between `failures` failed connection attempts."""
    sleeps: list[float] = []
    retry.sleep_func = sleeps.append
    left = [failures]

    def attempt():
        if left[0]:
            left[0] -= 1
            raise ForceRetryError("connection refused")
        return "connected"

    assert retry(attempt) == "connected"
    return sleeps


def test_reconnect_attempts_never_wait_more_than_a_second_plus_jitter():
    sleeps = _sleeps(zk.connection_retry(), 40)      # forty failed attempts: a long cut
    assert len(sleeps) == 40
    assert max(sleeps) <= zk.RECONNECT_DELAY_MAX_S * 1.4
    assert sleeps[0] <= 0.1 * 1.4                    # the first retry is quick


def test_every_client_connect_makes_uses_that_policy(monkeypatch):
    made = []

    class FakeClient:
        def __init__(self, hosts, **kw):
            made.append((hosts, kw))

        def start(self, timeout):
            pass

        def ensure_path(self, path):
            pass

        def stop(self):
            pass

        def close(self):
            pass

    monkeypatch.setattr(zk, "KazooClient", FakeClient)
    zk.connect("127.0.0.1:2181/riverbed", timeout_s=1)
    assert [hosts for hosts, _ in made] == ["127.0.0.1:2181", "127.0.0.1:2181/riverbed"]
    retries = [kw["connection_retry"] for _, kw in made]
    assert all(r.max_delay == zk.RECONNECT_DELAY_MAX_S and r.max_tries == -1 for r in retries)
    assert retries[0] is not retries[1]               # one each: kazoo sets its interrupt on it
