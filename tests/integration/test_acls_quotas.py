"""ACLs and quotas against a real fleet (ZooKeeper, controller, storage node, coordinators,
gateway), changed with the real `riverbed acls` / `riverbed configs` tools.

Principals are real: the fleet runs CURVE, every principal of these tests gets its own client
keypair (`User:<name>`) in the fleet's trusted keys directory before any test runs, and
`as_principal(name)` hands a client that key (the gateway takes the principal from the
connection's ZAP User-Id, never from anything the client sends).
allow.everyone.if.no.acl.found=false, as a CURVE fleet has it by default.
"""
from __future__ import annotations

import signal
import threading
import time
import uuid

import pytest

from deploy.fleet import Fleet, free_base_port
from riverbed.wire.security import create_keypair
from riverbed import Admin, Consumer, NewTopic, Producer, TopicPartition, errors
from riverbed.cli import main as riverbed_main

pytestmark = pytest.mark.integration

ADMIN = "admin"
PRINCIPALS = (ADMIN, "alice", "bob", "carol", "dave", "erin", "frank", "fast", "slow", "reader",
              "hank", "busy")
QUOTA_BYTES_PER_S = 200_000


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("acl-fleet"), free_base_port(), storage_nodes=1,
              controllers=1, gateways=1,
              config_overrides={"gateway": {
                  "allow.everyone.if.no.acl.found": "false",
                  "super.users": f"User:{ADMIN}",
                  # Short quota windows so the test reaches the steady state quickly
                  # (Kafka's defaults are 11 x 1 s).
                  "quota.window.num": "3", "quota.window.size.seconds": "1"}})
    try:
        f.up()
        sec = f.security
        for name in PRINCIPALS:            # a keypair per principal, trusted by the services
            create_keypair(sec.trust_dir, name, kind="client", secret_dir=sec.private_dir,
                           overwrite=True)
        f.signal("gateway-1", signal.SIGHUP)   # re-read the trusted keys now
        _wait_admitted(f, PRINCIPALS[-1])
        yield f
    finally:
        f.down()


def _settings(fleet, name: str) -> dict:
    return {"security_protocol": "CURVE",
            "curve_secret_key_file": str(fleet.security.secret_key_file(name)),
            "curve_server_keys_dir": str(fleet.security.trust_dir),
            "client_id": f"{name}-client"}


def _wait_admitted(fleet, name: str, timeout_s: float = 60.0) -> None:
    """Until the gateway admits `name`'s key (a refused handshake is not retried by libzmq:
    each try is a new client)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with Admin([fleet.gateway_endpoint], request_timeout_ms=2000,
                       **{k: v for k, v in _settings(fleet, name).items()
                          if k != "client_id"}) as a:
                a.describe_cluster()
                return
        except errors.RiverbedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.fixture(scope="module")
def bootstrap(fleet):
    return [fleet.gateway_endpoint]


@pytest.fixture(scope="module")
def as_principal(fleet):
    """Client settings that make a client User:<name>: its own CURVE key."""
    def settings(name: str) -> dict:
        assert name in PRINCIPALS, f"add {name!r} to PRINCIPALS (its key is made up front)"
        return _settings(fleet, name)
    return settings


@pytest.fixture(scope="module")
def acls(fleet):
    def run(*argv: str) -> None:
        assert riverbed_main(["acls", "--zookeeper", fleet.zk_connect,
                              "--zookeeper-credentials-file",
                              str(fleet.security.zk_credentials_file), *argv]) == 0
    return run


@pytest.fixture(scope="module")
def configs(fleet):
    def run(*argv: str) -> None:
        assert riverbed_main(["configs", "--zookeeper", fleet.zk_connect,
                              "--zookeeper-credentials-file",
                              str(fleet.security.zk_credentials_file), *argv]) == 0
    return run


@pytest.fixture(scope="module")
def admin(bootstrap, as_principal):
    with Admin(bootstrap, **as_principal(ADMIN)) as a:
        yield a


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(admin, topic: str, partitions: int = 1) -> None:
    admin.create_topics([NewTopic(topic, partitions, 1)])
    deadline = time.monotonic() + 30
    while True:
        (d,) = admin.describe_topics([topic])
        if d.partitions and all(p.leader >= 0 for p in d.partitions):
            return
        assert time.monotonic() < deadline, f"{topic}: no leader"
        time.sleep(0.1)


def eventually(check, timeout_s: float = 20.0):
    """ACL changes reach the gateway through a ZooKeeper watch: retry until `check` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return check()
        except (AssertionError, errors.RiverbedError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def end_offset(admin_bootstrap, as_principal, topic: str) -> int:
    with Consumer(bootstrap=admin_bootstrap, **as_principal(ADMIN)) as c:
        tp = TopicPartition(topic, 0)
        return c.end_offsets([tp])[tp]


def produce(bootstrap, settings: dict, topic: str, n: int = 3) -> list:
    with Producer(bootstrap, acks=1, retries=0, **settings) as p:
        futs = [p.send(topic, b"v%d" % i) for i in range(n)]
        p.flush(timeout=30)
        return [f.get(timeout=0) for f in futs]


def test_produce_allowed_literal_and_prefixed_denied_otherwise(bootstrap, admin, acls,
                                                               as_principal):
    mine, etl, other = unique("orders"), unique("etlx-daily"), unique("secret")
    for t in (mine, etl, other):
        create(admin, t)
    acls("--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", mine)
    acls("--add", "--allow-principal", "User:alice", "--operation", "Write",
         "--topic", etl.split("-daily")[0], "--resource-pattern-type", "prefixed")
    alice = as_principal("alice")
    eventually(lambda: produce(bootstrap, alice, mine))
    eventually(lambda: produce(bootstrap, alice, etl))
    before = end_offset(bootstrap, as_principal, other)
    with pytest.raises(errors.TopicAuthorizationFailedError):
        produce(bootstrap, alice, other)
    with pytest.raises(errors.TopicAuthorizationFailedError):
        produce(bootstrap, as_principal("bob"), mine)
    # A denied request changed nothing; the super user is allowed without any ACL.
    assert end_offset(bootstrap, as_principal, other) == before
    produce(bootstrap, as_principal(ADMIN), other, n=2)
    assert end_offset(bootstrap, as_principal, other) == before + 2


def test_deny_wins_over_allow(bootstrap, admin, acls, as_principal):
    topic = unique("both")
    create(admin, topic)
    acls("--add", "--allow-principal", "User:carol", "--operation", "All", "--topic", topic)
    carol = as_principal("carol")
    eventually(lambda: produce(bootstrap, carol, topic, n=1))
    acls("--add", "--deny-principal", "User:carol", "--operation", "Write", "--topic",
         topic[:4], "--resource-pattern-type", "prefixed")

    def denied():
        try:
            produce(bootstrap, carol, topic, n=1)
        except errors.TopicAuthorizationFailedError:
            return
        raise AssertionError("carol's produce was not denied")
    eventually(denied)
    before = end_offset(bootstrap, as_principal, topic)
    denied()
    assert end_offset(bootstrap, as_principal, topic) == before
    # Read is still allowed (the deny names Write only).
    with Consumer(bootstrap=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                  **carol) as c:
        c.assign([TopicPartition(topic, 0)])
        got = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                got += recs
        assert got


def test_fetch_needs_read_and_metadata_hides_topics(bootstrap, admin, acls, as_principal):
    topic, hidden = unique("reads"), unique("hidden")
    for t in (topic, hidden):
        create(admin, t)
    produce(bootstrap, as_principal(ADMIN), topic, n=5)
    acls("--add", "--allow-principal", "User:dave", "--operation", "Describe", "--topic", topic)
    dave = as_principal("dave")

    def listed():
        with Admin(bootstrap, **dave) as a:
            names = a.list_topics()
        assert topic in names
        return names
    names = eventually(listed)
    assert hidden not in names            # not describable: not listed at all
    with Consumer(bootstrap=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                  **dave) as c:
        c.assign([TopicPartition(topic, 0)])
        with pytest.raises(errors.TopicAuthorizationFailedError):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                c.poll(timeout_ms=500)
    acls("--add", "--allow-principal", "User:dave", "--operation", "Read", "--topic", topic)

    def reads():
        with Consumer(bootstrap=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                      **dave) as c:
            c.assign([TopicPartition(topic, 0)])
            got = []
            deadline = time.monotonic() + 10
            while len(got) < 5 and time.monotonic() < deadline:
                for recs in c.poll(timeout_ms=500).values():
                    got += recs
            assert len(got) == 5
    eventually(reads)


def test_group_join_and_commit(bootstrap, admin, acls, as_principal):
    topic, other = unique("grp"), unique("grp-other")
    ok_group, no_group = unique("g-ok"), unique("g-no")
    for t in (topic, other):
        create(admin, t)
    produce(bootstrap, as_principal(ADMIN), topic, n=4)
    produce(bootstrap, as_principal(ADMIN), other, n=4)
    acls("--add", "--allow-principal", "User:erin", "--consumer", "--topic", topic,
         "--group", ok_group)
    acls("--add", "--allow-principal", "User:erin", "--operation", "Describe", "--topic", other)
    erin = as_principal("erin")

    def consume_in_group():
        with Consumer(topic, bootstrap=bootstrap, group_id=ok_group,
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      fetch_max_wait_ms=100, **erin) as c:
            got = []
            deadline = time.monotonic() + 30
            while len(got) < 4 and time.monotonic() < deadline:
                for recs in c.poll(timeout_ms=500).values():
                    got += recs
            assert len(got) == 4
            c.commit()
            # A commit for a topic erin may not Read: refused for that topic, nothing stored.
            with pytest.raises(errors.TopicAuthorizationFailedError):
                c.commit({TopicPartition(other, 0): 3})
    eventually(consume_in_group, timeout_s=60)
    committed = admin.list_group_offsets(ok_group)
    assert committed[TopicPartition(topic, 0)].offset == 4
    assert TopicPartition(other, 0) not in committed

    with Consumer(topic, bootstrap=bootstrap, group_id=no_group, auto_offset_reset="earliest",
                  **erin) as c:
        with pytest.raises(errors.GroupAuthorizationFailedError):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                c.poll(timeout_ms=500)
    # The denied group never reached a coordinator: it does not exist.
    assert no_group not in {g.group_id for g in admin.list_groups()}


def test_topic_creation_needs_create(bootstrap, admin, acls, as_principal):
    prefix = unique("frank")
    acls("--add", "--allow-principal", "User:frank", "--operation", "Create", "--topic",
         prefix + "-", "--resource-pattern-type", "prefixed")
    frank = as_principal("frank")

    def creates():
        with Admin(bootstrap, **frank) as a:
            a.create_topics([NewTopic(prefix + "-1", 1, 1)])
    eventually(creates)
    with Admin(bootstrap, **frank) as a:
        with pytest.raises(errors.TopicAuthorizationFailedError):
            a.create_topics([NewTopic(prefix + "x", 1, 1)])
    assert prefix + "-1" in admin.list_topics()
    assert prefix + "x" not in admin.list_topics()


def test_acls_tool_lists_and_removes(fleet, acls, capsys):
    topic = unique("tool")
    acls("--add", "--allow-principal", "User:gina", "--operation", "Read", "--operation",
         "Describe", "--topic", topic)
    capsys.readouterr()
    acls("--list", "--topic", topic)
    out = capsys.readouterr().out
    assert "principal=User:gina" in out and "operation=Read" in out and "operation=Describe" in out
    acls("--remove", "--allow-principal", "User:gina", "--operation", "Read", "--topic", topic)
    capsys.readouterr()
    acls("--list", "--topic", topic)
    out = capsys.readouterr().out
    assert "operation=Read" not in out and "operation=Describe" in out
    capsys.readouterr()
    acls("--list", "--principal", "User:nobody")
    assert "User:gina" not in capsys.readouterr().out
    assert riverbed_main(["acls", "--zookeeper", fleet.zk_connect, "--add", "--allow-principal",
                          "User:gina", "--operation", "Fly", "--topic", topic]) == 2


def _produce_for(bootstrap, settings: dict, topic: str, seconds: float, value: bytes):
    """Send as fast as the producer allows for `seconds`; (bytes acked after the first third,
    the span of that part in s, the producer's metrics)."""
    acked = {"bytes": 0}
    with Producer(bootstrap, acks=1, linger_ms=5, batch_size=64 * 1024, **settings) as p:
        start = time.monotonic()
        measure_from = start + seconds / 3

        def on_ack(_md):
            if time.monotonic() >= measure_from:
                acked["bytes"] += len(value)

        while time.monotonic() - start < seconds:
            p.send(topic, value).add_callback(on_ack)
            while (p.metrics()["buffer_memory_used"] > 256 * 1024
                   and time.monotonic() - start < seconds):
                time.sleep(0.005)   # never grow the buffer without end while throttled
        elapsed = time.monotonic() - measure_from
        metrics = p.metrics()
    return acked["bytes"], elapsed, metrics


def test_quota_throttles_one_producer_not_another(bootstrap, admin, acls, configs,
                                                  as_principal, capsys):
    topic = unique("quota")
    create(admin, topic)
    acls("--add", "--allow-principal", "User:slow", "--allow-principal", "User:fast",
         "--producer", "--topic", topic)
    for who in ("slow", "fast"):
        eventually(lambda: produce(bootstrap, as_principal(who), topic, n=1))
    configs("--entity-type", "users", "--entity-name", "slow", "--alter", "--add-config",
            f"producer_byte_rate={QUOTA_BYTES_PER_S}")
    capsys.readouterr()
    configs("--entity-type", "users", "--describe")
    assert f"'slow' are producer_byte_rate={QUOTA_BYTES_PER_S}" in capsys.readouterr().out
    value = b"x" * 10_000
    fast: dict = {}
    # Another client on the same gateway, with no quota, runs at the same time.
    other = threading.Thread(target=lambda: fast.update(zip(
        ("bytes", "s", "metrics"), _produce_for(bootstrap, as_principal("fast"), topic, 6.0,
                                                value))))
    other.start()
    try:
        slow_bytes, slow_s, slow_m = _produce_for(bootstrap, as_principal("slow"), topic, 9.0,
                                                  value)
    finally:
        other.join(60)
    rate = slow_bytes / slow_s
    print(f"quota {QUOTA_BYTES_PER_S} B/s: throttled producer {rate:.0f} B/s, "
          f"unthrottled {fast['bytes'] / fast['s']:.0f} B/s on the same gateway")
    assert 0.3 * QUOTA_BYTES_PER_S <= rate <= 2.0 * QUOTA_BYTES_PER_S, rate
    assert slow_m["produce_throttled_responses"] > 0
    assert slow_m["produce_throttle_time_max"] > 0
    assert fast["metrics"]["produce_throttle_time_max"] == 0      # every answer said 0
    assert fast["metrics"]["produce_throttled_responses"] == 0
    assert fast["bytes"] / fast["s"] > rate                       # a ratio in the same run


def test_client_id_fetch_quota_throttles_and_loses_nothing(bootstrap, admin, acls, configs,
                                                           as_principal):
    topic = unique("fquota")
    create(admin, topic)
    n, value = 60, b"y" * 5_000                      # 300 kB
    produce_settings = as_principal(ADMIN)
    with Producer(bootstrap, acks=1, **produce_settings) as p:
        for _ in range(n):
            p.send(topic, value)
        p.flush(timeout=30)
    reader = as_principal("reader")
    acls("--add", "--allow-principal", "User:reader", "--operation", "Read", "--topic", topic)
    # A client-id quota (the client id here is the one the reader fixture gives).
    configs("--entity-type", "clients", "--entity-name", reader["client_id"], "--alter",
            "--add-config", "consumer_byte_rate=50000")

    def reads_all():
        with Consumer(bootstrap=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                      max_partition_fetch_bytes=20_000, **reader) as c:
            c.assign([TopicPartition(topic, 0)])
            got = []
            deadline = time.monotonic() + 60
            while len(got) < n and time.monotonic() < deadline:
                for recs in c.poll(timeout_ms=500).values():
                    got += recs
            assert [r.value for r in got] == [value] * n           # throttled, nothing dropped
            m = c.metrics()
        # The gateway learns of the quota from ZooKeeper a moment later: a read that finished
        # before that was not throttled, so read again until one is.
        assert m["fetch_throttle_time_max"] > 0, m["fetch_throttle_time_max"]
        return m
    eventually(reads_all, timeout_s=120)


def test_idempotent_producer_id_needs_write_on_some_topic(bootstrap, admin, acls, as_principal):
    topic = unique("idem")
    create(admin, topic)
    acls("--add", "--allow-principal", "User:hank", "--operation", "Describe", "--topic", topic)
    hank = as_principal("hank")

    def refused():
        with Producer(bootstrap, acks=-1, enable_idempotence=True, **hank) as p:
            try:
                p.send(topic, b"x").get(timeout=30)
            except errors.ClusterAuthorizationFailedError:
                return
        raise AssertionError("INIT_PRODUCER_ID was not refused")
    eventually(refused)
    acls("--add", "--allow-principal", "User:hank", "--operation", "Write", "--topic", topic)

    def works():
        with Producer(bootstrap, acks=-1, enable_idempotence=True, **hank) as p:
            assert p.send(topic, b"x").get(timeout=30).offset >= 0
            assert p.metrics()["producer_id"] >= 0
    eventually(works)


def test_request_percentage_quota_throttles(bootstrap, admin, acls, configs, as_principal):
    topic = unique("rquota")
    create(admin, topic)
    acls("--add", "--allow-principal", "User:busy", "--producer", "--topic", topic)
    # 0.01 % of one thread: a few requests exceed it, whatever the machine's speed.
    configs("--entity-type", "users", "--entity-name", "busy", "--alter", "--add-config",
            "request_percentage=0.01")

    def throttled():
        with Producer(bootstrap, acks=1, **as_principal("busy")) as p:
            for i in range(20):
                p.send(topic, b"r%d" % i).get(timeout=30)       # one request each
                m = p.metrics()
                if m["produce_throttled_responses"]:
                    break
        assert m["produce_throttled_responses"] > 0, m
    eventually(throttled, timeout_s=60)
