"""kafka-python 3.0 admin, ACLs: create_acls gives what succeeded and the classes of what failed
(an ACL for a delegation token: InvalidRequestError; one that exists succeeds again),
describe_acls matches by principal and by MATCH on a name (the literal and prefixed patterns
that apply), delete_acls gives each filter with what it removed, and a filter with an UNKNOWN
operation is InvalidRequestError. The principals are made up for the run, so the fleet's own
grants are neither shown nor touched. Usage: python admin_acls.py BOOTSTRAP PREFIX"""
import sys

from kafka import KafkaAdminClient
from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                         ResourcePattern, ResourcePatternFilter, ResourceType)
from kafka.errors import InvalidRequestError

BOOTSTRAP, PREFIX = sys.argv[1], sys.argv[2]
ALICE, BOB = f"User:{PREFIX}-alice", f"User:{PREFIX}-bob"
ORDERS = ResourcePattern(ResourceType.TOPIC, PREFIX + "-orders")
PREFIXED = ResourcePattern(ResourceType.TOPIC, PREFIX + "-", ACLResourcePatternType.PREFIXED)
GROUP = ResourcePattern(ResourceType.GROUP, PREFIX + "-billing")
ANY_RESOURCE = ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY)
ALLOW, DENY = ACLPermissionType.ALLOW, ACLPermissionType.DENY


def of(principal, operation=ACLOperation.ANY, resource=ANY_RESOURCE):
    return ACLFilter(principal, None, operation, ACLPermissionType.ANY, resource)


with KafkaAdminClient(bootstrap_servers=BOOTSTRAP) as admin:
    created = admin.create_acls([
        ACL(ALICE, "*", ACLOperation.READ, ALLOW, ORDERS),
        ACL(ALICE, "*", ACLOperation.DESCRIBE, ALLOW, ORDERS),
        ACL(ALICE, "*", ACLOperation.READ, ALLOW, GROUP),
        ACL(BOB, "10.0.0.1", ACLOperation.WRITE, DENY, PREFIXED),
        ACL(BOB, "*", ACLOperation.READ, ALLOW,
            ResourcePattern(ResourceType.DELEGATION_TOKEN, "token")),
    ])
    print(created["succeeded"])
    print([e.__name__ for e in created["failed"]])
    again = admin.create_acls([ACL(ALICE, "*", ACLOperation.READ, ALLOW, ORDERS)])
    print(len(again["succeeded"]), again["failed"])

    acls, error = admin.describe_acls(of(ALICE))
    print(acls, error.__name__)
    acls, _ = admin.describe_acls(of(BOB))
    print(acls)
    # MATCH: every pattern that applies to the topic PREFIX-orders (its literal and PREFIX-)
    acls, _ = admin.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                            ResourcePatternFilter(ResourceType.TOPIC,
                                                                  PREFIX + "-orders",
                                                                  ACLResourcePatternType.MATCH)))
    print(sorted(repr(a) for a in acls if a.principal in (ALICE, BOB)))
    try:
        admin.describe_acls(of(ALICE, ACLOperation.UNKNOWN))
    except InvalidRequestError as e:
        print("UNKNOWN operation:", type(e).__name__)

    for flt, removed, error in admin.delete_acls([of(ALICE, ACLOperation.READ),
                                                  of(PREFIX + "-nobody")]):
        print(flt, removed, error.__name__)
    print(admin.describe_acls(of(ALICE))[0])
    rest = admin.delete_acls([of(ALICE), of(BOB)])
    print([(len(removed), error.__name__) for _, removed, error in rest])
    print(admin.describe_acls(of(ALICE))[0], admin.describe_acls(of(BOB))[0])
print("admin_acls: OK")
