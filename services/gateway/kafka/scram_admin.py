"""Kafka's SCRAM user APIs at the gateway (KIP-554): DescribeUserScramCredentials (50) and
AlterUserScramCredentials (51), pure: answers from a snapshot of the credentials the gateway
holds (the users' config znodes, store.py), and the writes an alteration needs. The shell
(the gateway) checks the ACLs (DESCRIBE / ALTER on the cluster, as Kafka), performs the writes
through the same store as `riverbed configs`, and hands the outcome back.

Kafka's rules: mechanisms are numbers (1 SCRAM-SHA-256, 2 SCRAM-SHA-512; others
UNSUPPORTED_SASL_MECHANISM); iterations 4096..16384 and a non-empty user (else
UNACCEPTABLE_CREDENTIAL); a user named twice for one mechanism in a request, or twice in a
describe, is DUPLICATE_RESOURCE; describing or deleting what does not exist is
RESOURCE_NOT_FOUND. An upsertion carries the salt and the salted password (the client hashed the
password), from which the stored and server keys are made here.
"""
from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from services.common.acl import scram as sc

DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51
MECHANISM_NUMBERS = {1: sc.SCRAM_SHA_256, 2: sc.SCRAM_SHA_512}
NUMBERS = {v: k for k, v in MECHANISM_NUMBERS.items()}
NONE = 0
CLUSTER_AUTHORIZATION_FAILED = 31
UNSUPPORTED_SASL_MECHANISM = 33
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93

Credentials = Mapping[str, Mapping[str, sc.ScramCredential]]     # user -> mechanism -> credential


def _schema(api_key: int, version: int):
    import sys

    from kio.index import load_response_schema
    top = load_response_schema(api_key, version)
    return top, sys.modules[top.__module__]


def _ec(code: int):
    from kio.schema.errors import ErrorCode
    return ErrorCode(code)


def describe(version: int, body: Any, creds: Credentials, authorized: bool) -> Any:
    top, mod = _schema(DESCRIBE_USER_SCRAM_CREDENTIALS, version)
    zero = datetime.timedelta(0)
    if not authorized:
        # Kafka answers CLUSTER_AUTHORIZATION_FAILED at the top and for each user named.
        # librdkafka (up to 2.16 at least) frees the top-level error string it did not
        # allocate and aborts the client's process on any top-level error here, so the error
        # goes only with each user named; asked for every user, such a principal sees none.
        msg = "DESCRIBE on the cluster is needed"
        return top(throttle_time=zero, error_code=_ec(NONE), error_message=None,
                   results=tuple(mod.DescribeUserScramCredentialsResult(
                       user=u.name, error_code=_ec(CLUSTER_AUTHORIZATION_FAILED),
                       error_message=msg, credential_infos=())
                       for u in dict.fromkeys(u for u in body.users or ())))
    # null or empty: every user (Kafka's; librdkafka sends an empty array)
    names = sorted(u for u in creds if creds[u]) if not body.users else [u.name for u in body.users]
    seen: dict[str, int] = {}
    for n in names:
        seen[n] = seen.get(n, 0) + 1
    results = []
    for n in dict.fromkeys(names):
        if seen[n] > 1:
            code, msg, infos = DUPLICATE_RESOURCE, "Cannot describe the same user twice", ()
        elif not creds.get(n):
            code, msg, infos = RESOURCE_NOT_FOUND, "Attempt to describe a user credential " \
                                                  "that does not exist", ()
        else:
            code, msg = NONE, None
            infos = tuple(mod.CredentialInfo(mechanism=NUMBERS[m], iterations=c.iterations)
                          for m, c in sorted(creds[n].items()) if m in NUMBERS)
        results.append(mod.DescribeUserScramCredentialsResult(
            user=n, error_code=_ec(code), error_message=msg, credential_infos=infos))
    return top(throttle_time=zero, error_code=_ec(NONE), error_message=None,
               results=tuple(results))


@dataclass
class AlterPlan:
    users: list[str] = field(default_factory=list)                 # the answer's order
    errors: dict[str, tuple[int, str]] = field(default_factory=dict)
    # user -> (configs to set: mechanism -> Kafka's credential string, mechanisms to delete)
    writes: dict[str, tuple[dict[str, str], list[str]]] = field(default_factory=dict)


def plan_alter(body: Any, creds: Credentials, authorized: bool) -> AlterPlan:
    plan = AlterPlan()
    items = [("delete", d) for d in body.deletions] + [("upsert", u) for u in body.upsertions]
    for _, x in items:
        if x.name not in plan.users:
            plan.users.append(x.name)
    if not authorized:
        for u in plan.users:
            plan.errors[u] = (CLUSTER_AUTHORIZATION_FAILED, "ALTER on the cluster is needed")
        return plan
    pairs: dict[tuple[str, int], int] = {}
    for _, x in items:
        pairs[(x.name, x.mechanism)] = pairs.get((x.name, x.mechanism), 0) + 1

    def fail(user: str, code: int, msg: str) -> None:
        plan.errors.setdefault(user, (code, msg))

    for kind, x in items:
        user = x.name
        mech = MECHANISM_NUMBERS.get(x.mechanism)
        if not user:
            fail(user, UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mech is None:
            fail(user, UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {x.mechanism}")
        elif pairs[(user, x.mechanism)] > 1:
            fail(user, DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the "
                                           "same request")
        elif kind == "delete":
            if mech not in creds.get(user, {}):
                fail(user, RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does "
                                               "not exist")
            else:
                plan.writes.setdefault(user, ({}, []))[1].append(mech)
        else:
            try:
                cred = sc.credential_from_salted_password(mech, bytes(x.salt),
                                                          bytes(x.salted_password), x.iterations)
            except sc.ScramConfigError as e:
                fail(user, UNACCEPTABLE_CREDENTIAL, str(e))
            else:
                plan.writes.setdefault(user, ({}, []))[0][mech] = sc.encode_credential(cred)
    for user in plan.errors:              # a user with any bad item is not changed at all
        plan.writes.pop(user, None)
    return plan


def alter_response(version: int, plan: AlterPlan,
                   write_errors: Mapping[str, tuple[int, str]] = {}) -> Any:
    top, mod = _schema(ALTER_USER_SCRAM_CREDENTIALS, version)
    results = []
    for u in plan.users:
        code, msg = plan.errors.get(u) or write_errors.get(u) or (NONE, None)
        results.append(mod.AlterUserScramCredentialsResult(user=u, error_code=_ec(code),
                                                           error_message=msg))
    return top(throttle_time=datetime.timedelta(0), results=tuple(results))
