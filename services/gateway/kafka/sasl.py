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
- SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802 / 7677): the message grammar and proofs are scramp's
  (a maintained SCRAM library); the credentials are Kafka's (services/common/acl/scram.py). An
  unknown user gets a made-up salt derived from the gateway's secret, so it fails at the proof
  like a wrong password and cannot be told apart from one (RFC 5802 section 9).
- PLAIN (RFC 4616; off unless listed in sasl.enabled.mechanisms): `authzid NUL user NUL
  password`, checked against the user's SCRAM credential (the same store; see verify_password).
  It costs a PBKDF2 run, so the shell calls `authenticate` in a thread for PLAIN.
- Every failure is SASL_AUTHENTICATION_FAILED (58) with Kafka's message; a malformed token is a
  failure, never an exception out of here.
The principal of a completed authentication is `User:<name>`. Sessions do not expire
(connections.max.reauth.ms 0: no KIP-368 re-authentication).
"""
from __future__ import annotations

import enum
import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import scramp

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
        self._scram: Any = None          # scramp.ScramServer while a SCRAM exchange runs
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
        except (scramp.ScramException, UnicodeError, ValueError, TypeError, LookupError):
            return self._failed()      # malformed or wrong: a failed authentication, no more

    def _failed(self) -> Answer:
        self._fail()
        return Answer(SASL_AUTHENTICATION_FAILED, failed_message(self.mechanism or ""),
                      close=True, user=self._user)

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
            server = scramp.ScramMechanism(mech).make_server(self._lookup(mech),
                                                             s_nonce=self._nonce)
            self._scram = server
            server.set_client_first(text)
            return Answer(token=server.get_server_first().encode("utf-8"), user=self._user)
        server = self._scram
        server.set_client_final(text)
        final = server.get_server_final()
        assert self._user is not None
        return self._done(self._user, final.encode("utf-8"))

    def _lookup(self, mech: str) -> Callable[[str], tuple]:
        def auth_fn(user: str) -> tuple:
            self._user = user
            cred = self._credentials(user, mech)
            if cred is None:
                # A made-up salt, the same for this user every time: the exchange goes on and
                # fails at the proof, as with a wrong password (no keys can match).
                salt = hmac.digest(self._secret, f"{mech}:{user}".encode(), "sha256")
                digest = hashlib.new(sc.HASHES[mech]).digest_size
                junk = hmac.digest(self._secret, salt, sc.HASHES[mech])[:digest]
                return salt, junk, junk, sc.DEFAULT_ITERATIONS
            return cred.salt, cred.stored_key, cred.server_key, cred.iterations
        return auth_fn


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
