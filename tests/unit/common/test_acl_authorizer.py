"""The ACL core: Kafka's authorization rules, table cases and properties (hypothesis)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.common.acl import layout
from services.common.acl.authorizer import (
    CLUSTER_NAME,
    AclBinding,
    AclEntry,
    AclError,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
O = Operation
ALICE, BOB = "User:alice", "User:bob"


def entry(principal=ALICE, op=O.READ, perm=ALLOW, host="*"):
    return AclEntry(principal, host, op, perm)


def auth(*bindings, super_users=(), everyone=False):
    acls: dict = {}
    for pattern, e in bindings:
        acls.setdefault(pattern, set()).add(e)
    return Authorizer(acls, super_users=super_users, allow_everyone_if_no_acl_found=everyone)


def topic(name, pt=LIT):
    return ResourcePattern(T, name, pt)


def test_no_acl_follows_allow_everyone_if_no_acl_found():
    assert not auth().authorize(ALICE, "10.0.0.1", O.WRITE, T, "orders")
    assert auth(everyone=True).authorize(ALICE, "10.0.0.1", O.WRITE, T, "orders")
    # An ACL on the resource for someone else: no longer "no ACL found", even with everyone=True.
    a = auth((topic("orders"), entry(BOB, O.WRITE)), everyone=True)
    assert not a.authorize(ALICE, "", O.WRITE, T, "orders")
    assert a.authorize(ALICE, "", O.WRITE, T, "other")


def test_literal_wildcard_and_prefixed_names():
    a = auth((topic("orders"), entry(op=O.READ)),
             (topic("*"), entry(BOB, O.WRITE)),
             (topic("etl-", PRE), entry(op=O.WRITE)))
    assert a.authorize(ALICE, "", O.READ, T, "orders")
    assert not a.authorize(ALICE, "", O.READ, T, "orders2")
    assert a.authorize(BOB, "", O.WRITE, T, "anything")
    assert a.authorize(ALICE, "", O.WRITE, T, "etl-daily")
    assert a.authorize(ALICE, "", O.WRITE, T, "etl-")
    assert not a.authorize(ALICE, "", O.WRITE, T, "etl")
    assert not a.authorize(ALICE, "", O.WRITE, G, "etl-daily")   # another resource type


def test_deny_wins_over_allow_and_all():
    a = auth((topic("orders"), entry(op=O.ALL)),
             (topic("ord", PRE), entry(op=O.WRITE, perm=DENY)))
    assert a.authorize(ALICE, "", O.READ, T, "orders")
    assert not a.authorize(ALICE, "", O.WRITE, T, "orders")
    a = auth((topic("orders"), entry(op=O.READ)), (topic("*"), entry("User:*", O.ALL, DENY)))
    assert not a.authorize(ALICE, "", O.READ, T, "orders")


def test_implied_describe_and_describe_configs():
    for op in (O.READ, O.WRITE, O.DELETE, O.ALTER):
        a = auth((topic("t"), entry(op=op)))
        assert a.authorize(ALICE, "", O.DESCRIBE, T, "t"), op
    assert not auth((topic("t"), entry(op=O.CREATE))).authorize(ALICE, "", O.DESCRIBE, T, "t")
    assert auth((topic("t"), entry(op=O.ALTER_CONFIGS))).authorize(ALICE, "", O.DESCRIBE_CONFIGS, T, "t")
    # Implication never overrides a deny of Describe itself.
    a = auth((topic("t"), entry(op=O.READ)), (topic("t"), entry(op=O.DESCRIBE, perm=DENY)))
    assert not a.authorize(ALICE, "", O.DESCRIBE, T, "t")
    assert a.authorize(ALICE, "", O.READ, T, "t")


def test_hosts_and_wildcard_principal():
    a = auth((topic("t"), entry("User:*", O.READ, host="10.0.0.1")))
    assert a.authorize(BOB, "10.0.0.1", O.READ, T, "t")
    assert not a.authorize(BOB, "10.0.0.2", O.READ, T, "t")


def test_super_users_bypass_even_deny():
    a = auth((topic("t"), entry(ALICE, O.ALL, DENY)), super_users={ALICE})
    assert a.authorize(ALICE, "", O.WRITE, T, "t")
    assert not a.authorize(BOB, "", O.WRITE, T, "t")


def test_authorize_any_for_idempotent_producers():
    a = auth((topic("orders"), entry(op=O.WRITE)))
    assert a.authorize_any(ALICE, "", O.WRITE, T)
    assert not a.authorize_any(BOB, "", O.WRITE, T)
    a = auth((topic("orders"), entry(op=O.WRITE)), (topic("*"), entry(op=O.WRITE, perm=DENY)))
    assert not a.authorize_any(ALICE, "", O.WRITE, T)
    assert auth(everyone=True).authorize_any(BOB, "", O.WRITE, T)


def test_bad_bindings_are_typed_errors():
    with pytest.raises(AclError):
        ResourcePattern(C, "other-cluster")
    with pytest.raises(AclError):
        ResourcePattern(T, "*", PRE)
    with pytest.raises(AclError):
        AclEntry("alice", "*", O.READ, ALLOW)
    with pytest.raises(AclError):
        AclBinding(ResourcePattern(G, "g"), entry(op=O.WRITE))
    with pytest.raises(AclError):
        Operation.parse("Fly")
    assert Operation.parse("idempotent-write") is O.IDEMPOTENT_WRITE
    assert Operation.parse("DESCRIBE_CONFIGS") is O.DESCRIBE_CONFIGS
    assert ResourcePattern(C, CLUSTER_NAME).name == "kafka-cluster"


def test_znode_layout_round_trips():
    p = topic("etl-", PRE)
    assert layout.acl_path(p) == "/kafka-acl-extended/prefixed/Topic/etl-"
    assert layout.acl_path(topic("orders")) == "/kafka-acl/Topic/orders"
    es = frozenset({entry(), entry(BOB, O.WRITE, DENY, "10.0.0.1")})
    assert layout.decode_acls(layout.encode_acls(es)) == es
    for pattern in (p, topic("orders"), ResourcePattern(G, "g:x")):
        d, data = layout.encode_acl_change(pattern)
        assert layout.decode_acl_change(d, data) == pattern
    with pytest.raises(layout.LayoutError):
        layout.decode_acls(b'{"version": 9, "acls": []}')
    with pytest.raises(layout.LayoutError):
        layout.decode_acls(b"not json")
    assert layout.config_path("users", "User:CN=a,O=b") == "/config/users/User%3ACN%3Da%2CO%3Db"
    assert layout.decode_config_change(layout.encode_config_change("users", "a/b")) == ("users", "a/b")
    assert layout.decode_config_change(layout.encode_config_change("clients", "<default>")) == (
        "clients", "<default>")


# --- properties ------------------------------------------------------------------------------

names = st.text(alphabet="abc-", min_size=1, max_size=6)
principals = st.sampled_from([ALICE, BOB, "User:carol", "User:*"])
hosts = st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])
ops = st.sampled_from(list(Operation))
patterns = st.one_of(st.builds(lambda n, pre: ResourcePattern(T, n, PRE if pre else LIT),
                               names, st.booleans()), st.just(ResourcePattern(T, "*", LIT)))
entries = st.builds(AclEntry, principals, hosts,
                    st.sampled_from([o for o in Operation if o not in
                                     (O.CLUSTER_ACTION, O.IDEMPOTENT_WRITE)]),
                    st.sampled_from(list(Permission)))
acl_sets = st.lists(st.tuples(patterns, entries), max_size=8)
callers = st.sampled_from([ALICE, BOB, "User:carol"])
caller_hosts = st.sampled_from(["10.0.0.1", "10.0.0.2"])
asked_ops = st.sampled_from([o for o in Operation if o not in (O.ALL, O.CLUSTER_ACTION,
                                                                O.IDEMPOTENT_WRITE)])


@settings(max_examples=300, deadline=None)
@given(acl_sets, callers, caller_hosts, asked_ops, names, st.booleans())
def test_property_a_matching_deny_always_wins(bindings, who, host, op, name, everyone):
    a = auth(*bindings, everyone=everyone)
    denied = any(e.permission is DENY and p.matches(T, name) and e.matches(who, host, op)
                 for p, e in bindings)
    if denied:
        assert not a.authorize(who, host, op, T, name)
    # Adding a matching deny to any ACL set turns any answer into no.
    extra = (topic(name), entry(who, op, DENY, host))
    assert not auth(*bindings, extra, everyone=everyone).authorize(who, host, op, T, name)


@settings(max_examples=300, deadline=None)
@given(acl_sets, callers, caller_hosts, asked_ops, names, names)
def test_property_prefix_matches_exactly_the_names_it_starts(bindings, who, host, op, prefix, name):
    a = auth(*bindings, (topic(prefix, PRE), entry(who, op, ALLOW, host)))
    no_deny = not any(e.permission is DENY and p.matches(T, name) and e.matches(who, host, op)
                      for p, e in bindings)
    if name.startswith(prefix) and no_deny:
        assert a.authorize(who, host, op, T, name)
    # A prefixed ACL is invisible to names it is not a prefix of: the decision is unchanged.
    if not name.startswith(prefix):
        assert a.authorize(who, host, op, T, name) == auth(*bindings).authorize(who, host, op, T, name)


@settings(max_examples=200, deadline=None)
@given(acl_sets, callers, caller_hosts, asked_ops, names)
def test_property_super_users_and_decision_is_deterministic(bindings, who, host, op, name):
    a = auth(*bindings)
    assert a.authorize(who, host, op, T, name) == auth(*reversed(bindings)).authorize(
        who, host, op, T, name)
    assert auth(*bindings, super_users={who}).authorize(who, host, op, T, name)


@settings(max_examples=300, deadline=None)
@given(acl_sets, st.one_of(names, st.just("*")))
def test_property_the_index_finds_exactly_the_matching_patterns(bindings, name):
    a = auth(*bindings)
    expected = sorted({e for p, e in bindings if p.matches(T, name)}, key=AclEntry.sort_key)
    assert sorted(set(a.matching_acls(T, name)), key=AclEntry.sort_key) == expected
