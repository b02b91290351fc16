"""SASL on the Kafka listener, as pure cores: SCRAM credentials in Kafka's format
(services/common/acl/scram.py) and the per-connection SASL state machine
(services/gateway/kafka/sasl.py), with RFC 7677's SCRAM-SHA-256 exchange, SCRAM-SHA-512 against
scramp's client, PLAIN, the states, and random bytes into every step.
"""
from __future__ import annotations

import base64

import pytest
import scramp
from hypothesis import given, settings
from hypothesis import strategies as st

from services.common.acl import scram as sc
from services.gateway.kafka import sasl

# RFC 7677 section 3: user "user", password "pencil".
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_C_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_S_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
SECRET = b"gateway-secret"


def store(**users: dict[str, sc.ScramCredential]):
    return lambda user, mech: users.get(user, {}).get(mech)


def server(lookup, enabled=(sc.SCRAM_SHA_256, sc.SCRAM_SHA_512), nonce=RFC_S_NONCE):
    return sasl.SaslServer(tuple(enabled), lookup, nonce=nonce, unknown_user_secret=SECRET)


RFC_CRED = sc.make_credential(sc.SCRAM_SHA_256, "pencil", RFC_SALT, 4096)


# -- credentials (Kafka's format) --------------------------------------------------------------

def test_credential_round_trips_in_kafkas_format():
    text = sc.encode_credential(RFC_CRED)
    assert text.startswith("salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=")
    assert text.endswith(",iterations=4096")
    assert sc.decode_credential(text) == RFC_CRED
    assert "pencil" not in repr(RFC_CRED) and "stored" not in repr(RFC_CRED)


@pytest.mark.parametrize("bad", ["", "salt=AA==", "salt=AA==,stored_key=AA==,server_key=AA==",
                                 "salt=AA==,stored_key=AA==,server_key=AA==,iterations=x",
                                 "salt=!!,stored_key=AA==,server_key=AA==,iterations=4096",
                                 "salt=AA==,stored_key=AA==,server_key=AA==,iterations=4096,x=1",
                                 "salt=AA==,salt=AA==,server_key=AA==,iterations=4096"])
def test_unreadable_credentials_are_a_typed_error(bad):
    with pytest.raises(sc.ScramConfigError):
        sc.decode_credential(bad)


def test_verify_password_against_the_stored_keys():
    assert sc.verify_password(sc.SCRAM_SHA_256, RFC_CRED, "pencil")
    assert not sc.verify_password(sc.SCRAM_SHA_256, RFC_CRED, "pen")
    assert not sc.verify_password(sc.SCRAM_SHA_512, RFC_CRED, "pencil")


def test_iterations_are_bounded_as_kafka_bounds_them():
    with pytest.raises(sc.ScramConfigError):
        sc.make_credential(sc.SCRAM_SHA_512, "p", b"salt", 4095)
    with pytest.raises(sc.ScramConfigError):
        sc.make_credential(sc.SCRAM_SHA_512, "p", b"salt", 16385)
    with pytest.raises(sc.ScramConfigError):
        sc.make_credential("SCRAM-SHA-1", "p", b"salt", 4096)


def test_kafka_configs_spelling_is_parsed():
    items = sc.split_config("SCRAM-SHA-256=[iterations=8192,password=a,b],producer_byte_rate=10,"
                            "SCRAM-SHA-512=[password=x=y]")
    assert items == ["SCRAM-SHA-256=[iterations=8192,password=a,b]", "producer_byte_rate=10",
                     "SCRAM-SHA-512=[password=x=y]"]
    assert sc.parse_scram_value(sc.SCRAM_SHA_256, "[iterations=8192,password=a,b]") == ("a,b", 8192)
    assert sc.parse_scram_value(sc.SCRAM_SHA_512, "[password=x=y]") == ("x=y", 4096)
    for bad in ("password=hunter2", "[]", "[iterations=8192]", "[iterations=100,password=hunter2]",
                "[iterations=n,password=hunter2]", "[password=]"):
        with pytest.raises(sc.ScramConfigError) as e:
            sc.parse_scram_value(sc.SCRAM_SHA_512, bad)
        assert "hunter2" not in str(e.value)
    with pytest.raises(sc.ScramConfigError):
        sc.split_config("SCRAM-SHA-512=[password=x")


def test_credentials_of_a_config_snapshot_and_describe():
    snap = {("users", "alice"): {sc.SCRAM_SHA_512: sc.encode_credential(RFC_CRED),
                                 "producer_byte_rate": "10"},
            ("users", "bob"): {sc.SCRAM_SHA_256: "garbage"},
            ("clients", "alice"): {sc.SCRAM_SHA_512: sc.encode_credential(RFC_CRED)}}
    assert sc.credentials_of(snap) == {"alice": {sc.SCRAM_SHA_512: RFC_CRED}}
    assert sc.describe(snap[("users", "alice")]) == "SCRAM-SHA-512=iterations=4096"
    assert sc.describe({"producer_byte_rate": "1"}) == ""


# -- the SCRAM exchange ------------------------------------------------------------------------

def test_rfc7677_scram_sha_256_exchange():
    s = server(store(user={sc.SCRAM_SHA_256: RFC_CRED}))
    assert not s.allows(3) and s.allows(18) and s.allows(17) and s.allows(36)
    a = s.handshake(sc.SCRAM_SHA_256, 1)
    assert a.error_code == 0 and a.mechanisms == (sc.SCRAM_SHA_256, sc.SCRAM_SHA_512)
    assert s.state is sasl.State.AUTHENTICATE and not s.raw_tokens
    a = s.authenticate(RFC_CLIENT_FIRST)
    assert (a.error_code, a.token, a.close) == (0, RFC_SERVER_FIRST, False)
    a = s.authenticate(RFC_CLIENT_FINAL)
    assert (a.error_code, a.token, a.principal) == (0, RFC_SERVER_FINAL, "User:user")
    assert s.complete and s.allows(3) and s.principal == "User:user"


def _client_exchange(s: sasl.SaslServer, mech: str, user: str, password: str) -> sasl.Answer:
    c = scramp.ScramClient([mech], user, password)
    s.handshake(mech, 1)
    a = s.authenticate(c.get_client_first().encode())
    if a.error_code:
        return a
    c.set_server_first(a.token.decode())
    a = s.authenticate(c.get_client_final().encode())
    if a.error_code == 0:
        c.set_server_final(a.token.decode())   # the client checks the server's signature
    return a


@pytest.mark.parametrize("mech", [sc.SCRAM_SHA_256, sc.SCRAM_SHA_512])
def test_scram_with_a_client_right_and_wrong_password(mech):
    cred = sc.make_credential(mech, "s3cret, with=signs", b"0123456789abcdef", 8192)
    lookup = store(**{"app,one=x": {mech: cred}})
    a = _client_exchange(server(lookup, nonce="abc"), mech, "app,one=x", "s3cret, with=signs")
    assert a.principal == "User:app,one=x" and a.error_code == 0
    s = server(lookup, nonce="abc")
    a = _client_exchange(s, mech, "app,one=x", "wrong")
    assert a.error_code == sasl.SASL_AUTHENTICATION_FAILED and a.close
    assert a.error_message == sasl.failed_message(mech) and "wrong" not in a.error_message
    assert s.state is sasl.State.FAILED and not s.allows(3) and s.principal is None


def test_an_unknown_user_fails_at_the_proof_like_a_wrong_password():
    s = server(store(), nonce="n1")
    c = scramp.ScramClient([sc.SCRAM_SHA_512], "nobody", "pw")
    s.handshake(sc.SCRAM_SHA_512, 1)
    first = s.authenticate(c.get_client_first().encode())
    assert first.error_code == 0               # a salt and iterations, as for a real user
    again = server(store(), nonce="n1")
    again.handshake(sc.SCRAM_SHA_512, 1)
    c2 = scramp.ScramClient([sc.SCRAM_SHA_512], "nobody", "pw", c_nonce=c.c_nonce.nonce)
    assert again.authenticate(c2.get_client_first().encode()).token == first.token   # stable salt
    c.set_server_first(first.token.decode())
    a = s.authenticate(c.get_client_final().encode())
    assert a.error_code == sasl.SASL_AUTHENTICATION_FAILED and a.user == "nobody"


def test_mechanism_not_enabled_and_wrong_order():
    s = server(store(), enabled=(sc.SCRAM_SHA_512,))
    a = s.handshake(sc.SCRAM_SHA_256, 1)
    assert a.error_code == sasl.UNSUPPORTED_SASL_MECHANISM and a.close
    assert a.mechanisms == (sc.SCRAM_SHA_512,)
    s = server(store())
    a = s.authenticate(RFC_CLIENT_FIRST)
    assert a.error_code == sasl.ILLEGAL_SASL_STATE and a.close
    s = server(store())
    s.handshake(sc.SCRAM_SHA_256, 0)
    assert s.raw_tokens
    assert s.handshake(sc.SCRAM_SHA_256, 1).error_code == sasl.ILLEGAL_SASL_STATE


def test_plain_checks_the_scram_store():
    cred = sc.make_credential(sc.SCRAM_SHA_512, "pw", b"0123456789ab")
    lookup = store(alice={sc.SCRAM_SHA_512: cred})
    enabled = (sasl.PLAIN, sc.SCRAM_SHA_512)
    s = server(lookup, enabled)
    s.handshake("PLAIN", 1)
    assert s.authenticate(b"\0alice\0pw").principal == "User:alice"
    for token in (b"\0alice\0nope", b"bob\0alice\0pw", b"\0alice", b"\0nobody\0pw",
                  b"\0alice\0", b"\xff\0alice\0pw"):
        s = server(lookup, enabled)
        s.handshake("PLAIN", 1)
        a = s.authenticate(token)
        assert a.error_code == sasl.SASL_AUTHENTICATION_FAILED and a.close, token
    s = server(lookup, enabled)
    s.handshake("PLAIN", 1)
    assert s.authenticate(b"alice\0alice\0pw").error_code == 0     # authzid = user is fine


def test_enabled_mechanisms_config():
    assert sasl.check_mechanisms("scram-sha-512, PLAIN") == ("SCRAM-SHA-512", "PLAIN")
    for bad in ("", "GSSAPI", "OAUTHBEARER,SCRAM-SHA-256"):
        with pytest.raises(ValueError):      # ListenerError, a ValueError
            sasl.check_mechanisms(bad)


def test_responses_for_every_version():
    ok = sasl.Answer(token=b"t", mechanisms=("PLAIN",))
    for v in (0, 1):
        assert sasl.handshake_response(v, ok).mechanisms == ("PLAIN",)
    for v in (0, 1, 2):
        r = sasl.authenticate_response(v, ok)
        assert r.auth_bytes == b"t" and r.error_code == 0


# -- nothing malformed gets out as an exception --------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(st.sampled_from([sc.SCRAM_SHA_256, sc.SCRAM_SHA_512, sasl.PLAIN]),
       st.lists(st.one_of(st.binary(max_size=120),
                          st.text(max_size=80).map(lambda t: t.encode("utf-8", "surrogatepass")),
                          st.sampled_from([RFC_CLIENT_FIRST, RFC_CLIENT_FINAL, b"n,,n=user,r=x",
                                           b"n,a=user,n=user,r=x", b"p=tls-unique,,n=u,r=x",
                                           b"c=biws,r=x,p=AAAA"])),
                min_size=1, max_size=4))
def test_random_tokens_only_fail_the_authentication(mech, tokens):
    cred = sc.make_credential(sc.SCRAM_SHA_256, "pencil", RFC_SALT, 4096)
    s = server(store(user={sc.SCRAM_SHA_256: cred}),
               enabled=(sc.SCRAM_SHA_256, sc.SCRAM_SHA_512, sasl.PLAIN))
    s.handshake(mech, 1)
    for t in tokens:
        a = s.authenticate(t)
        assert a.error_code in (0, sasl.SASL_AUTHENTICATION_FAILED, sasl.ILLEGAL_SASL_STATE)
        if a.close:
            assert not s.complete
            break
        if s.complete:
            assert a.principal == "User:user"
            break


def _proof(mech: str, password: str, cred: sc.ScramCredential, auth_message: bytes) -> bytes:
    import hashlib
    import hmac
    name = sc.HASHES[mech]
    salted = sc.salted_password(mech, password, cred.salt, cred.iterations)
    client_key = hmac.digest(salted, b"Client Key", name)
    signature = hmac.digest(hashlib.new(name, client_key).digest(), auth_message, name)
    return bytes(a ^ b for a, b in zip(client_key, signature))


def test_librdkafka_before_2_2_repeating_its_nonce_is_accepted_as_kafka_accepts_it():
    # librdkafka 2.0 (Debian's kcat) sends r=<client nonce><client nonce><server nonce>; Kafka's
    # ScramSaslServer only checks that it ends with the nonce it sent, and so does this one.
    s = server(store(user={sc.SCRAM_SHA_256: RFC_CRED}))
    s.handshake(sc.SCRAM_SHA_256, 1)
    server_first = s.authenticate(RFC_CLIENT_FIRST).token
    nonce = RFC_C_NONCE + RFC_S_NONCE
    without = f"c=biws,r={RFC_C_NONCE}{nonce}"
    auth = b"n=user,r=" + RFC_C_NONCE.encode() + b"," + server_first + b"," + without.encode()
    p = base64.b64encode(_proof(sc.SCRAM_SHA_256, "pencil", RFC_CRED, auth)).decode()
    a = s.authenticate(f"{without},p={p}".encode())
    assert a.error_code == 0 and a.principal == "User:user"
    # a nonce that does not end with the server's is refused
    s = server(store(user={sc.SCRAM_SHA_256: RFC_CRED}))
    s.handshake(sc.SCRAM_SHA_256, 1)
    s.authenticate(RFC_CLIENT_FIRST)
    a = s.authenticate(f"c=biws,r={RFC_C_NONCE}x,p={p}".encode())
    assert a.error_code == sasl.SASL_AUTHENTICATION_FAILED


def test_scram_grammar_as_kafka_reads_it():
    first = sasl.parse_client_first("n,a=bob,n=al=2Cice=3D,r=abc,tokenauth=true")
    assert (first.authzid, first.user, first.nonce) == ("bob", "al,ice=", "abc")
    assert first.bare == "n=al=2Cice=3D,r=abc,tokenauth=true" and first.gs2_header == "n,a=bob,"
    for bad in ("y,,n=u,r=x", "p=tls-unique,,n=u,r=x", "n,,n=,r=x", "n,,n=u,r=a,b", "n,,r=x,n=u",
                "n,,n=u=X,r=x"):
        with pytest.raises(ValueError):
            sasl.parse_client_first(bad)
    s = server(store(alice={sc.SCRAM_SHA_256: RFC_CRED}))
    s.handshake(sc.SCRAM_SHA_256, 1)
    a = s.authenticate(b"n,a=bob,n=alice,r=abc")      # someone else's authorization: refused
    assert a.error_code == sasl.SASL_AUTHENTICATION_FAILED


# -- Describe/AlterUserScramCredentials (KIP-554) -------------------------------------------------

def test_describe_user_scram_credentials():
    from kio.schema.describe_user_scram_credentials.v0 import request as dreq

    from services.gateway.kafka import scram_admin as sa
    creds = {"alice": {sc.SCRAM_SHA_256: RFC_CRED, sc.SCRAM_SHA_512: RFC_CRED}, "bob": {}}
    r = sa.describe(0, dreq.DescribeUserScramCredentialsRequest(users=None), creds, True)
    assert [(x.user, [(i.mechanism, i.iterations) for i in x.credential_infos])
            for x in r.results] == [("alice", [(1, 4096), (2, 4096)])]      # bob has none
    named = dreq.DescribeUserScramCredentialsRequest(users=tuple(
        dreq.UserName(name=n) for n in ("alice", "nobody", "alice")))
    r = sa.describe(0, named, creds, True)
    assert [(x.user, x.error_code.value) for x in r.results] == [("alice", 92), ("nobody", 91)]
    r = sa.describe(0, named, creds, False)      # no top-level error: librdkafka aborts on one
    assert r.error_code.value == 0 and [(x.user, x.error_code.value) for x in r.results] == [
        ("alice", 31), ("nobody", 31)]
    assert sa.describe(0, dreq.DescribeUserScramCredentialsRequest(users=()), creds,
                       False).results == ()
    # an empty list is every user, as null (librdkafka sends an empty list)
    r = sa.describe(0, dreq.DescribeUserScramCredentialsRequest(users=()), creds, True)
    assert [x.user for x in r.results] == ["alice"]


def test_alter_user_scram_credentials_plans_kafkas_way():
    from kio.schema.alter_user_scram_credentials.v0 import request as areq

    from services.gateway.kafka import scram_admin as sa
    salt = b"0123456789abcdef"
    salted = sc.salted_password(sc.SCRAM_SHA_512, "pw", salt, 8192)
    up = areq.ScramCredentialUpsertion
    body = areq.AlterUserScramCredentialsRequest(
        deletions=(areq.ScramCredentialDeletion(name="alice", mechanism=1),
                   areq.ScramCredentialDeletion(name="carol", mechanism=1)),
        upsertions=(up(name="bob", mechanism=2, iterations=8192, salt=salt, salted_password=salted),
                    up(name="dan", mechanism=3, iterations=8192, salt=salt, salted_password=salted),
                    up(name="erin", mechanism=2, iterations=100, salt=salt, salted_password=salted),
                    up(name="alice", mechanism=1, iterations=4096, salt=salt,
                       salted_password=salted[:32])))
    creds = {"alice": {sc.SCRAM_SHA_256: RFC_CRED}}
    plan = sa.plan_alter(body, creds, True)
    assert plan.users == ["alice", "carol", "bob", "dan", "erin"]
    assert {u: c for u, (c, _) in plan.errors.items()} == {"alice": 92, "carol": 91, "dan": 33,
                                                            "erin": 93}
    assert list(plan.writes) == ["bob"]
    (set_, delete) = plan.writes["bob"]
    cred = sc.decode_credential(set_[sc.SCRAM_SHA_512])
    assert delete == [] and sc.verify_password(sc.SCRAM_SHA_512, cred, "pw")
    r = sa.alter_response(0, plan, {"bob": (-1, "not written")})
    assert [(x.user, x.error_code.value) for x in r.results] == [
        ("alice", 92), ("carol", 91), ("bob", -1), ("dan", 33), ("erin", 93)]
    denied = sa.plan_alter(body, creds, False)
    assert denied.writes == {} and {c for c, _ in denied.errors.values()} == {31}
