"""SASL on a Kafka connection, as a Kafka broker's `SaslServerAuthenticator` does it: a pure state
machine per connection (no sockets, no clock; the nonce and the secret for unknown users are
handed in).

    HANDSHAKE --SaslHandshake(enabled mechanism)--> AUTHENTICATE --last token ok--> COMPLETE
        |                                              |
        +---- anything wrong ------------------------> FAILED (the shell answers, then closes)

- Before COMPLETE only ApiVersions, SaslHandshake and SaslAuthenticate are allowed (`allows`);
  anything else closes the connection, as Kafka does.
- SaslHandshake v1 (KIP-152): the tokens come in SaslAuthenticate requests. SaslHandshake v0:
  the tokens come as bare size-prefixed frames without a request header, and the answers go
  back the same way (`raw_tokens`).
- SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802 / 7677) as Kafka's ScramSaslServer: its message
  grammar (no channel binding; extensions accepted and ignored), its lenient check of the
  client's final nonce (only that it ends with the server's: librdkafka before 2.2 repeats its
  own nonce, which scramp and other strict servers refuse), the credentials in Kafka's format
  (services/common/acl/scram.py); hashlib/hmac for the proofs. An unknown user gets a made-up
  salt derived from the gateway's secret, so it fails at the proof like a wrong password and
  cannot be told apart from one on that gateway (RFC 5802 section 9).
- PLAIN (RFC 4616; off unless listed in sasl.enabled.mechanisms): `authzid NUL user NUL
  password`, checked against the user's SCRAM credential (the same store; see verify_password).
  It costs a PBKDF2 run, so the shell calls `authenticate` in a thread for PLAIN.
- Every failure is SASL_AUTHENTICATION_FAILED (58) with Kafka's message; a malformed token is a
  failure, never an exception out of here.
The principal of a completed authentication is `User:<name>`. Sessions do not expire
(connections.max.reauth.ms 0: no KIP-368 re-authentication).
"""
from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from services.common.acl import scram as sc
from services.gateway.kafka.listeners import SASL_MECHANISMS, check_mechanisms  # noqa: F401

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
API_VERSIONS = 18
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})
PLAIN = "PLAIN"
SUPPORTED_MECHANISMS = SASL_MECHANISMS
NONE = 0
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58

CredentialLookup = Callable[[str, str], "sc.ScramCredential | None"]   # (user, mechanism)


class State(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


TRANSITIONS = {
    State.HANDSHAKE: {State.AUTHENTICATE, State.FAILED},
    State.AUTHENTICATE: {State.AUTHENTICATE, State.COMPLETE, State.FAILED},
    State.COMPLETE: set(),
    State.FAILED: set(),
}


@dataclass(frozen=True, slots=True)
class Answer:
    """What to tell the client and what to do next."""
    error_code: int = NONE
    error_message: str | None = None
    token: bytes = b""                 # the server's SASL bytes
    mechanisms: tuple[str, ...] = ()   # SaslHandshake's answer
    close: bool = False                # close the connection once the answer is written
    principal: str | None = None       # set when authentication completed
    user: str | None = None            # who tried (for the log; never the password)
    reason: str = ""                   # why it failed (for the log; never the password)


def failed_message(mechanism: str) -> str:
    # Kafka's SaslServerAuthenticator words, which clients show to people
    return ("Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {mechanism}")


class SaslServer:
    def __init__(self, enabled: tuple[str, ...], credentials: CredentialLookup, *,
                 nonce: str, unknown_user_secret: bytes):
        self.enabled = enabled
        self._credentials = credentials
        self._nonce = nonce
        self._secret = unknown_user_secret
        self.state = State.HANDSHAKE
        self.mechanism: str | None = None
        self.raw_tokens = False          # SaslHandshake v0: bare token frames follow
        self.principal: str | None = None
        self._scram: Any = None          # _ScramExchange between the two SCRAM steps
        self._user: str | None = None

    def _to(self, state: State) -> None:
        assert state in TRANSITIONS[self.state], f"SASL {self.state} -> {state}"
        self.state = state

    @property
    def complete(self) -> bool:
        return self.state is State.COMPLETE

    def allows(self, api_key: int) -> bool:
        return self.complete or api_key in BEFORE_AUTHENTICATION

    # -- SaslHandshake --------------------------------------------------------------------------
    def handshake(self, mechanism: str, version: int) -> Answer:
        if self.state is not State.HANDSHAKE:
            self._fail()
            return Answer(ILLEGAL_SASL_STATE, "SaslHandshake in the wrong state",
                          mechanisms=self.enabled, close=True)
        if mechanism not in self.enabled:
            self._fail()
            return Answer(UNSUPPORTED_SASL_MECHANISM,
                          f"Unsupported SASL mechanism {mechanism}", mechanisms=self.enabled,
                          close=True)
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        self._to(State.AUTHENTICATE)
        return Answer(mechanisms=self.enabled)

    # -- SaslAuthenticate (or a bare token after a v0 handshake) ---------------------------------
    def authenticate(self, token: bytes) -> Answer:
        if self.state is not State.AUTHENTICATE:
            self._fail()
            return Answer(ILLEGAL_SASL_STATE, "SaslAuthenticate before a SaslHandshake",
                          close=True)
        mech = self.mechanism
        assert mech is not None
        try:
            if mech == PLAIN:
                return self._plain(bytes(token))
            return self._scram_step(mech, bytes(token))
        except (UnicodeError, ValueError, binascii.Error) as e:
            # malformed: a failed authentication, no more (the reason names the step, never a
            # secret)
            return self._failed(f"{type(e).__name__}: {e}")

    def _failed(self, reason: str = "invalid credentials") -> Answer:
        self._fail()
        return Answer(SASL_AUTHENTICATION_FAILED, failed_message(self.mechanism or ""),
                      close=True, user=self._user, reason=reason)

    def _fail(self) -> None:
        if self.state is not State.FAILED:
            self._to(State.FAILED)
        self._scram = None

    def _done(self, user: str, token: bytes = b"") -> Answer:
        self._to(State.COMPLETE)
        self.principal = f"User:{user}"
        self._scram = None
        return Answer(token=token, principal=self.principal, user=user)

    def _plain(self, token: bytes) -> Answer:
        parts = token.split(b"\0")
        if len(parts) != 3:
            return self._failed()
        authzid, user, password = (p.decode("utf-8") for p in parts)
        self._user = user
        if not user or not password or (authzid and authzid != user):
            return self._failed()
        for mech in (sc.SCRAM_SHA_512, sc.SCRAM_SHA_256):
            cred = self._credentials(user, mech)
            if cred is not None:
                if sc.verify_password(mech, cred, password):
                    return self._done(user)
                break
        return self._failed()

    def _scram_step(self, mech: str, token: bytes) -> Answer:
        text = token.decode("utf-8")
        if self._scram is None:
            first = parse_client_first(text)
            user = first.user
            self._user = user
            if first.authzid and first.authzid != user:
                return self._failed("an authorization id other than the user")
            cred = self._credentials(user, mech) or self._unknown(mech, user)
            nonce = first.nonce + self._nonce
            server_first = (f"r={nonce},s={base64.b64encode(cred.salt).decode()},"
                            f"i={cred.iterations}")
            self._scram = _ScramExchange(first, server_first, nonce, cred)
            return Answer(token=server_first.encode("utf-8"), user=user)
        ex: _ScramExchange = self._scram
        final = parse_client_final(text)
        # Kafka checks only that the client's nonce ends with the one it sent (ScramSaslServer):
        # librdkafka before 2.2 sends its own nonce twice, and Kafka's brokers accept that.
        if not final.nonce.endswith(ex.nonce):
            return self._failed("the client's final nonce is not the server's")
        if final.channel_binding != ex.first.gs2_header.encode("ascii"):
            return self._failed("channel binding data other than the GS2 header")
        name = sc.HASHES[mech]
        auth_message = f"{ex.first.bare},{ex.server_first},{final.without_proof}".encode("utf-8")
        client_signature = hmac.digest(ex.cred.stored_key, auth_message, name)
        if len(final.proof) != len(client_signature):
            return self._failed("a proof of the wrong length")
        client_key = bytes(a ^ b for a, b in zip(final.proof, client_signature))
        if not hmac.compare_digest(hashlib.new(name, client_key).digest(), ex.cred.stored_key):
            return self._failed("invalid credentials")
        server_signature = hmac.digest(ex.cred.server_key, auth_message, name)
        return self._done(ex.first.user,
                          b"v=" + base64.b64encode(server_signature))

    def _unknown(self, mech: str, user: str) -> sc.ScramCredential:
        """A made-up credential for a user without one, the same every time: the exchange goes
        on and fails at the proof, as with a wrong password (no client can match its keys)."""
        name = sc.HASHES[mech]
        salt = hmac.digest(self._secret, f"{mech}:{user}".encode(), "sha256")
        junk = hmac.digest(self._secret, salt, name)
        return sc.ScramCredential(salt, junk, junk, sc.DEFAULT_ITERATIONS)


# -- SCRAM messages (RFC 5802 section 7, as Kafka's ScramMessages reads them) -----------------------

# saslname: UTF-8 without ',' and '=', those two escaped as =2C and =3D
_SASLNAME = r"(?:[^,=\x00]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"             # a nonce: printable ASCII but ','
_BASE64 = r"[A-Za-z0-9+/]*={0,2}"
_EXTENSIONS = r"(?:,[A-Za-z0-9_]+=[^,\x00]*)*"    # Kafka's SCRAM extensions (tokenauth=...)
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)"
    rf"(?P<bare>(?:m=[^,\x00]*,)?n=(?P<user>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS})")
_CLIENT_FINAL = re.compile(
    rf"(?P<without>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),"
    rf"p=(?P<proof>{_BASE64})")


@dataclass(frozen=True, slots=True)
class ClientFirst:
    gs2_header: str          # "n,," or "n,a=<authzid>,": no channel binding (as Kafka)
    authzid: str
    user: str
    nonce: str
    bare: str                # client-first-message-bare, for the AuthMessage


@dataclass(frozen=True, slots=True)
class ClientFinal:
    channel_binding: bytes
    nonce: str
    proof: bytes
    without_proof: str       # client-final-message-without-proof, for the AuthMessage


@dataclass(frozen=True, slots=True)
class _ScramExchange:
    first: ClientFirst
    server_first: str
    nonce: str               # the client's nonce + the server's
    cred: sc.ScramCredential


def _unescape(name: str) -> str:
    return name.replace("=2C", ",").replace("=3D", "=")


def parse_client_first(text: str) -> ClientFirst:
    """ValueError for anything but `n,[a=authzid],n=user,r=nonce[,ext=...]` (Kafka accepts only
    the `n` GS2 flag: no channel binding)."""
    m = _CLIENT_FIRST.fullmatch(text)
    if m is None:
        raise ValueError("malformed SCRAM client-first message")
    return ClientFirst(m["gs2"], _unescape(m["authzid"] or ""), _unescape(m["user"]),
                       m["nonce"], m["bare"])


def parse_client_final(text: str) -> ClientFinal:
    m = _CLIENT_FINAL.fullmatch(text)
    if m is None:
        raise ValueError("malformed SCRAM client-final message")
    return ClientFinal(base64.b64decode(m["channel"], validate=True), m["nonce"],
                       base64.b64decode(m["proof"], validate=True), m["without"])


# -- Kafka responses (kio entities) ----------------------------------------------------------------

def handshake_response(version: int, answer: Answer) -> Any:
    from kio.index import load_response_schema
    from kio.schema.errors import ErrorCode
    return load_response_schema(SASL_HANDSHAKE, version)(
        error_code=ErrorCode(answer.error_code), mechanisms=tuple(answer.mechanisms))


def authenticate_response(version: int, answer: Answer) -> Any:
    import datetime

    from kio.index import load_response_schema
    from kio.schema.errors import ErrorCode
    cls = load_response_schema(SASL_AUTHENTICATE, version)
    kw: dict[str, Any] = dict(error_code=ErrorCode(answer.error_code),
                              error_message=answer.error_message, auth_bytes=answer.token)
    if "session_lifetime" in cls.__dataclass_fields__:
        kw["session_lifetime"] = datetime.timedelta(0)     # no re-authentication (KIP-368)
    return cls(**kw)
