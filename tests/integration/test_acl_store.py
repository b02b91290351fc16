"""The ACL / quota-config ZooKeeper shell against a real ZooKeeper: Kafka's layout, conditional
writes from two writers, notifications, the watching cache."""
from __future__ import annotations

import json
import threading
import time

import pytest

from services.common import zk as zkmod
from services.common.acl import layout, store
from services.common.acl.authorizer import (
    AclEntry,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)

pytestmark = pytest.mark.integration

ORDERS = ResourcePattern(ResourceType.TOPIC, "orders")
ETL = ResourcePattern(ResourceType.TOPIC, "etl-", PatternType.PREFIXED)


def allow(principal: str, op: Operation = Operation.READ) -> AclEntry:
    return AclEntry(principal, "*", op, Permission.ALLOW)


def wait_for(cond, timeout_s: float = 15.0):
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def test_kafka_layout_and_notifications(zk):
    assert store.add_acls(zk, ORDERS, [allow("User:alice")])
    assert not store.add_acls(zk, ORDERS, [allow("User:alice")])       # already there
    assert store.add_acls(zk, ETL, [allow("User:bob", Operation.WRITE)])
    data, _ = zk.get("/kafka-acl/Topic/orders")
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
    assert zk.exists("/kafka-acl-extended/prefixed/Topic/etl-")
    assert [zk.get(f"{layout.ACL_CHANGES}/{c}")[0] for c in zk.get_children(layout.ACL_CHANGES)] \
        == [b"Topic:orders"]
    (c,) = zk.get_children(layout.ACL_EXTENDED_CHANGES)
    assert json.loads(zk.get(f"{layout.ACL_EXTENDED_CHANGES}/{c}")[0])["patternType"] == "PREFIXED"
    assert store.remove_acls(zk, ORDERS)
    assert not zk.exists("/kafka-acl/Topic/orders")      # an empty resource leaves no znode
    assert store.read_acls(zk) == {ETL: frozenset({allow("User:bob", Operation.WRITE)})}
    # Old notifications are pruned by writers (Kafka's 15 minutes).
    store._prune_notifications(zk, layout.ACL_CHANGES,
                               now_ms=int(time.time() * 1000) + layout.CHANGE_EXPIRATION_MS + 60_000)
    assert zk.get_children(layout.ACL_CHANGES) == []


def test_concurrent_writers_lose_no_entry(zk_chroot, zk):
    clients = [zkmod.connect(zk_chroot, timeout_s=10) for _ in range(4)]
    try:
        def add(i, client):
            for j in range(10):
                store.add_acls(client, ORDERS, [allow(f"User:u{i}-{j}")])
        threads = [threading.Thread(target=add, args=(i, c)) for i, c in enumerate(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        for c in clients:
            zkmod.close(c)
    assert len(store.read_acls(zk)[ORDERS]) == 40


def test_caches_follow_changes(zk):
    acl_snaps, config_snaps = [], []
    acl_watch = store.watch_acls(zk, acl_snaps.append)
    config_watch = store.watch_configs(zk, config_snaps.append)
    try:
        assert acl_snaps and acl_snaps[-1] == {}          # the first snapshot, before start returns
        store.add_acls(zk, ETL, [allow("User:bob")])
        wait_for(lambda: acl_snaps[-1].get(ETL) == frozenset({allow("User:bob")}))
        store.remove_acls(zk, ETL, [allow("User:bob")])
        wait_for(lambda: acl_snaps[-1] == {})
        store.alter_config(zk, "users", "User:CN=x", set_={"producer_byte_rate": "100"})
        store.alter_config(zk, "clients", "<default>", set_={"consumer_byte_rate": "5"})
        wait_for(lambda: config_snaps[-1] == {("users", "User:CN=x"): {"producer_byte_rate": "100"},
                                              ("clients", "<default>"): {"consumer_byte_rate": "5"}})
        assert zk.exists("/config/users/User%3ACN%3Dx") and zk.exists("/config/clients/<default>")
        store.alter_config(zk, "users", "User:CN=x", delete=["producer_byte_rate"])
        wait_for(lambda: ("users", "User:CN=x") not in config_snaps[-1])
    finally:
        acl_watch.stop()
        config_watch.stop()
