"""ACL administration's pure part (services/gateway/core/acl_admin.py): Kafka's numbers, Kafka's
filter matching, what CreateAcls / DeleteAcls write."""
from riverbed._proto.v1 import acl_pb2 as a
from riverbed.errors import ErrorCode as E
from services.common.acl.authorizer import (
    AclEntry, Operation, PatternType, Permission, ResourcePattern, ResourceType,
)
from services.gateway.core import acl_admin

TOPIC, GROUP, CLUSTER = 2, 3, 4
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
READ, WRITE, DESCRIBE, ALL = 3, 4, 8, 2
DENY, ALLOW = 2, 3

ORDERS = ResourcePattern(ResourceType.TOPIC, "orders")
ORD_PREFIX = ResourcePattern(ResourceType.TOPIC, "ord", PatternType.PREFIXED)
EVERY_TOPIC = ResourcePattern(ResourceType.TOPIC, "*")
BILLING = ResourcePattern(ResourceType.GROUP, "billing")
alice_read = AclEntry("User:alice", "*", Operation.READ, Permission.ALLOW)
bob_write = AclEntry("User:bob", "10.0.0.1", Operation.WRITE, Permission.DENY)
SNAP = {ORDERS: frozenset({alice_read, bob_write}), ORD_PREFIX: frozenset({alice_read}),
        EVERY_TOPIC: frozenset({alice_read}), BILLING: frozenset({alice_read})}


def flt(rt=ANY, name=None, pt=ANY, principal=None, host=None, op=ANY, perm=ANY):
    f = a.AclBindingFilter(resource_type=rt, pattern_type=pt, operation=op, permission_type=perm)
    if name is not None:
        f.resource_name = name
    if principal is not None:
        f.principal = principal
    if host is not None:
        f.host = host
    return f


def names(resp):
    return [(b.resource_type, b.resource_name, b.pattern_type, b.principal, b.operation)
            for b in resp.bindings]


def test_any_filter_lists_every_binding_with_kafkas_numbers():
    resp = acl_admin.describe(SNAP, flt())
    assert resp.error_code == E.NONE and len(resp.bindings) == 5
    assert (GROUP, "billing", LITERAL, "User:alice", READ) in names(resp)
    assert (TOPIC, "ord", PREFIXED, "User:alice", READ) in names(resp)


def test_match_finds_what_applies_to_a_name_literal_finds_exactly_it():
    got = names(acl_admin.describe(SNAP, flt(TOPIC, "orders", MATCH)))
    assert {(n, pt) for _, n, pt, _, _ in got} == {("orders", LITERAL), ("ord", PREFIXED),
                                                   ("*", LITERAL)}
    got = names(acl_admin.describe(SNAP, flt(TOPIC, "orders", LITERAL)))
    assert {n for _, n, *_ in got} == {"orders"}
    got = names(acl_admin.describe(SNAP, flt(TOPIC, None, PREFIXED)))
    assert got == [(TOPIC, "ord", PREFIXED, "User:alice", READ)]
    got = names(acl_admin.describe(SNAP, flt(principal="User:bob", op=WRITE, perm=DENY)))
    assert got == [(TOPIC, "orders", LITERAL, "User:bob", WRITE)]
    assert not acl_admin.describe(SNAP, flt(host="10.9.9.9", principal="User:bob")).bindings


def test_bad_filters_and_unkept_types():
    assert acl_admin.describe(SNAP, flt(rt=0)).error_code == E.INVALID_REQUEST
    assert acl_admin.describe(SNAP, flt(op=99)).error_code == E.INVALID_REQUEST
    resp = acl_admin.describe(SNAP, flt(rt=7))          # users: kept nowhere, matches nothing
    assert resp.error_code == E.NONE and not resp.bindings


def binding(rt=TOPIC, name="orders", pt=LITERAL, principal="User:carol", host="*", op=READ,
            perm=ALLOW):
    return a.AclBinding(resource_type=rt, resource_name=name, pattern_type=pt,
                        principal=principal, host=host, operation=op, permission_type=perm)


def test_create_plan_groups_by_pattern_and_refuses_bad_bindings():
    plan = acl_admin.plan_create([binding(), binding(op=WRITE), binding(principal="carol"),
                                  binding(rt=GROUP, op=WRITE), binding(pt=MATCH),
                                  binding(rt=CLUSTER, name="kafka-cluster", op=ALL)])
    codes = [r.error_code for r in plan.response.results]
    assert codes == [E.NONE, E.NONE, E.INVALID_REQUEST, E.INVALID_REQUEST, E.INVALID_REQUEST,
                     E.NONE]
    entries, idx = plan.adds[ORDERS]
    assert idx == [0, 1] and {e.operation for e in entries} == {Operation.READ, Operation.WRITE}
    assert ResourcePattern(ResourceType.CLUSTER, "kafka-cluster") in plan.adds


def test_delete_plan_lists_matches_per_filter_and_what_to_remove():
    plan = acl_admin.plan_delete(SNAP, [flt(TOPIC, "orders", LITERAL),
                                        flt(principal="User:alice", op=READ), flt(rt=0)])
    r0, r1, r2 = plan.response.results
    assert len(r0.matching) == 2 and len(r1.matching) == 4
    assert r2.error_code == E.INVALID_REQUEST
    assert plan.removes[ORDERS] == (frozenset({alice_read, bob_write}), [0, 1])
    assert plan.removes[BILLING] == (frozenset({alice_read}), [1])


def test_round_trip_of_a_binding():
    b = binding(rt=GROUP, name="etl-", pt=PREFIXED, op=DESCRIBE, perm=DENY)
    ab = acl_admin.binding_from_pb(b)
    assert acl_admin.binding_to_pb(ab.pattern, ab.entry) == b
