"""Incremental fetch sessions (Kafka's KIP-227) for replica fetches. Pure: no sockets, clocks
or randomness (now_ms and new session ids come in).

Without a session every replica-fetch round names every partition a fetcher follows from its
leader, and the leader answers each one, busy or idle. With one, the leader keeps the fetch
state the follower last sent per partition (`FetchSession`, in a `FetchSessionCache` bounded by
`max.incremental.fetch.session.cache.slots`), so that:

- the follower names only partitions whose fetch state changed (fetch offset, current leader
  epoch, last fetched epoch, log start offset, max bytes) or that are new, and lists the ones it
  no longer fetches as forgotten (`FetchSessionHandler`, one per replica fetcher);
- the leader still evaluates *every* partition of the session on every fetch, at its cached
  state: each counts as fetched for the ISR (replica.lag.time.max.ms) and each can wake the
  long poll; but it answers only partitions with records, an error, a diverging epoch, or a
  high watermark / log start offset / leader epoch it has not told this session yet
  (`FetchContext.include`).

Kafka's request metadata (FetchMetadata): `session_epoch` 0 (INITIAL_EPOCH) is a full fetch;
with `session_id` 0 it asks for a new session, with a session id it closes that one first.
`session_epoch` -1 (FINAL_EPOCH) is a full fetch without a session (closing `session_id` if
given): consumers' fetches. An epoch >= 1 is an incremental fetch in `session_id`, which must
exist (FETCH_SESSION_ID_NOT_FOUND) and expect exactly that epoch (INVALID_FETCH_SESSION_EPOCH);
each accepted one moves the epoch on by one (wrapping to 1). The follower answers either error,
a lost answer or anything unexpected with a full fetch, which always resynchronises both sides.
"""
from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple
from dataclasses import dataclass, field

from riverbed import errors

from services.storage_node.core.replica_state import NONE, TopicPartition

FETCH_SESSION_ID_NOT_FOUND = errors.FetchSessionIdNotFoundError.code
INVALID_FETCH_SESSION_EPOCH = errors.InvalidFetchSessionEpochError.code

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1
# Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS: a session unused for this long may be
# evicted for a new one (and is dropped when the cache is next used).
MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = 120_000


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch` (Kafka FetchMetadata.nextEpoch): 0 -> 1, wraps to 1."""
    return 1 if epoch < 0 or epoch >= MAX_EPOCH else epoch + 1


# ---------------------------------------------------------------------------------------------
# follower side

# The first retry of a partition answered with an error comes after this long, each next one
# after twice as long as the one before, up to replica.fetch.backoff.ms. A new topic's
# partitions, which a follower often hears of a few milliseconds before their leader does (the
# leader answers UNKNOWN_TOPIC_OR_PARTITION meanwhile), waited the full backoff (1 s) before.
FIRST_ERROR_BACKOFF_MS = 25


def error_backoff_ms(errors_in_a_row: int, backoff_ms: int) -> int:
    """How long a partition waits after its `errors_in_a_row`-th error in a row."""
    return min(backoff_ms, FIRST_ERROR_BACKOFF_MS << min(errors_in_a_row - 1, 20))



class PartitionFetchState(NamedTuple):
    """What a follower sends for one partition; a change of any field is sent again (a tuple:
    compared at C speed for every partition of every round)."""
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int = -1
    partition_max_bytes: int = 0


@dataclass(frozen=True, slots=True)
class FetchRequestData:
    """The next request: its session metadata, the partitions to name (every one for a full
    fetch) and the ones to forget (incremental only)."""
    session_id: int
    session_epoch: int
    to_send: tuple[tuple[TopicPartition, PartitionFetchState], ...]
    forgotten: tuple[TopicPartition, ...]

    @property
    def full(self) -> bool:
        return self.session_epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FetchSessionHandler:
    """A replica fetcher's side of its session with one leader (Kafka FetchSessionHandler).

    `build(partitions)` makes the next request from what the fetcher follows now;
    `handle_response(error_code, session_id)` says whether its answer may be applied and
    commits what the leader now holds; `handle_error()` after a failed call (a timeout, a lost
    answer: the leader may or may not have seen the request) makes the next request a full one.
    """

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.next_epoch = INITIAL_EPOCH
        # The fetch state the leader holds for this session (committed by answers).
        self._session: dict[TopicPartition, PartitionFetchState] = {}
        self._pending: dict[TopicPartition, PartitionFetchState] | None = None
        self.full_fetches = 0
        self.incremental_fetches = 0
        self.resets = 0

    @property
    def in_session(self) -> bool:
        return self.next_epoch != INITIAL_EPOCH

    def session_partitions(self) -> Mapping[TopicPartition, PartitionFetchState]:
        return self._session

    def build(self, partitions: Mapping[TopicPartition, PartitionFetchState]) -> FetchRequestData:
        """The next request for `partitions` (every partition this fetcher follows, with its
        current state). Every partition of the answer was evaluated at the state given here."""
        pending = dict(partitions)
        self._pending = pending
        if not self.in_session:
            self.full_fetches += 1
            return FetchRequestData(self.session_id, INITIAL_EPOCH, tuple(pending.items()), ())
        self.incremental_fetches += 1
        session = self._session
        to_send = tuple((tp, st) for tp, st in pending.items() if session.get(tp) != st)
        forgotten = tuple(tp for tp in session if tp not in pending)
        return FetchRequestData(self.session_id, self.next_epoch, to_send, forgotten)

    def handle_response(self, error_code: int, session_id: int) -> bool:
        """The leader answered the request `build` made last. True: apply its partitions; False:
        drop the answer (the next request is a full fetch)."""
        pending, self._pending = self._pending, None
        if pending is None:
            self._reset(keep_id=True)
            return False
        if error_code != NONE:
            # FETCH_SESSION_ID_NOT_FOUND: the leader has no such session (restarted, evicted):
            # ask for a new one. Anything else (INVALID_FETCH_SESSION_EPOCH, ...): close ours
            # and start over with a full fetch.
            self._reset(keep_id=error_code != FETCH_SESSION_ID_NOT_FOUND)
            return False
        if not self.in_session:                       # the answer to a full fetch
            if session_id == INVALID_SESSION_ID:      # no session (no room): full again
                self.session_id = INVALID_SESSION_ID
                self._session = {}
            else:
                self.session_id = session_id
                self.next_epoch = next_epoch(INITIAL_EPOCH)
                self._session = pending
            return True
        if session_id != self.session_id:
            # Not the session we fetched in (the leader closed it): start over.
            self._reset(keep_id=False)
            return False
        self._session = pending
        self.next_epoch = next_epoch(self.next_epoch)
        return True

    def handle_error(self) -> None:
        """The call failed (timeout, broken connection): the leader may have taken the request
        or not, so the two sides may disagree; the next request is a full fetch closing the
        session."""
        self._pending = None
        self._reset(keep_id=True)

    def _reset(self, keep_id: bool) -> None:
        self.resets += 1
        if not keep_id:
            self.session_id = INVALID_SESSION_ID
        self.next_epoch = INITIAL_EPOCH
        self._session = {}


# ---------------------------------------------------------------------------------------------
# leader side


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: the fetch state the follower last sent (attribute names of
    FetchPartition, so the shell evaluates it like a named one) and what the leader last told
    this session about it (None: nothing yet)."""
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    log_start_offset: int
    last_fetched_epoch: int
    told_high_watermark: int | None = None
    told_log_start_offset: int | None = None
    told_leader_epoch: int | None = None

    @classmethod
    def of(cls, p) -> CachedPartition:
        return cls(p.partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch,
                   p.log_start_offset, p.last_fetched_epoch)

    def told(self, high_watermark: int, log_start_offset: int, leader_epoch: int) -> bool:
        """Whether these are the high watermark, log start offset and leader epoch this
        session was last told."""
        return (self.told_high_watermark == high_watermark
                and self.told_log_start_offset == log_start_offset
                and self.told_leader_epoch == leader_epoch)

    def update(self, p) -> None:
        self.fetch_offset = p.fetch_offset
        self.partition_max_bytes = p.partition_max_bytes
        self.current_leader_epoch = p.current_leader_epoch
        self.log_start_offset = p.log_start_offset
        self.last_fetched_epoch = p.last_fetched_epoch


@dataclass(slots=True)
class FetchSession:
    id: int
    replica_id: int
    privileged: bool                  # a follower's (Kafka: may evict consumers' sessions)
    epoch: int                        # the epoch the next incremental fetch must carry
    created_ms: int
    last_used_ms: int
    partitions: dict[TopicPartition, CachedPartition] = field(default_factory=dict)


class ContextKind(enum.Enum):
    SESSIONLESS = "sessionless"       # a full fetch, no session (consumers; no room)
    FULL = "full"                     # a full fetch that opened a session
    INCREMENTAL = "incremental"
    ERROR = "error"                   # the session is unknown or the epoch wrong


@dataclass(slots=True)
class FetchContext:
    """One FETCH as the cache sees it. `entries`: (topic, partition data) to evaluate, in order
    (the request's for a full fetch; the whole session's for an incremental one);
    `session_id`: for the answer."""
    kind: ContextKind
    entries: list = field(default_factory=list)
    session: FetchSession | None = None
    error_code: int = NONE
    error_message: str = ""

    @property
    def session_id(self) -> int:
        return self.session.id if self.session is not None else INVALID_SESSION_ID

    def include(self, tp: TopicPartition, *, has_data: bool, error_code: int,
                high_watermark: int, log_start_offset: int, leader_epoch: int,
                diverging: bool) -> bool:
        """Is this partition in the answer? Every one is in a full fetch's answer; an
        incremental one's holds those with records, an error, a diverging epoch, or a high
        watermark / log start offset / leader epoch not yet told this session (Kafka
        CachedPartition.maybeUpdateResponseData). Records what is told."""
        if self.session is None:
            return True
        cp = self.session.partitions.get(tp)
        if cp is None:
            return self.kind is not ContextKind.INCREMENTAL
        must = self.kind is not ContextKind.INCREMENTAL or has_data or error_code != NONE \
            or diverging
        if not cp.told(high_watermark, log_start_offset, leader_epoch):
            cp.told_high_watermark = high_watermark
            cp.told_log_start_offset = log_start_offset
            cp.told_leader_epoch = leader_epoch
            must = True
        if must and self.kind is ContextKind.INCREMENTAL:
            # Kafka's fairness rule: a partition answered goes to the end of the session, so
            # under replica.fetch.response.max.bytes the others get their turn first next time.
            parts = self.session.partitions
            parts[tp] = parts.pop(tp)
        return must


class FetchSessionCache:
    """The leader's sessions (Kafka FetchSessionCache), at most `max_slots`. A full fetch from
    a follower opens one when there is room, or when the least recently used session has been
    idle for `eviction_ms` (evicted), or when a consumer's session can make way for a
    follower's; else it is answered without a session (session_id 0) and the follower goes on
    with full fetches. `new_id()` gives candidate ids (the shell: random, so a restarted leader
    does not hand out the ids it had before; 0 and ids in use are skipped)."""

    def __init__(self, max_slots: int, new_id: Callable[[], int],
                 eviction_ms: int = MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS):
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._new_id = new_id
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()   # LRU first
        self.evictions = 0
        self.created = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def partitions_cached(self) -> int:
        return sum(len(s.partitions) for s in self._sessions.values())

    def remove(self, session_id: int) -> FetchSession | None:
        return self._sessions.pop(session_id, None)

    def new_context(self, replica_id: int, session_id: int, session_epoch: int,
                    named: Iterable[tuple[str, object]], forgotten: Iterable[TopicPartition],
                    now_ms: int, may_create: bool = True) -> FetchContext:
        """Decide what a FETCH is (Kafka FetchManager.newContext). `named`: (topic, partition
        data with FetchPartition's attributes) in request order; `may_create`: whether a full
        fetch may open a session (followers' fetches do, consumers' do not)."""
        named = list(named)
        if session_epoch == FINAL_EPOCH:
            self._close(replica_id, session_id)
            return FetchContext(ContextKind.SESSIONLESS, named)
        if session_epoch == INITIAL_EPOCH:
            self._close(replica_id, session_id)
            session = self._create(replica_id, named, now_ms) if may_create else None
            if session is None:
                return FetchContext(ContextKind.SESSIONLESS, named)
            return FetchContext(ContextKind.FULL, named, session)
        session = self._sessions.get(session_id) if session_id != INVALID_SESSION_ID else None
        if session is None or session.replica_id != replica_id:
            return FetchContext(ContextKind.ERROR, error_code=FETCH_SESSION_ID_NOT_FOUND,
                                error_message=f"fetch session {session_id} not found")
        if session_epoch != session.epoch:
            return FetchContext(ContextKind.ERROR, error_code=INVALID_FETCH_SESSION_EPOCH,
                                error_message=f"fetch session {session_id}: epoch "
                                              f"{session_epoch}, expected {session.epoch}")
        parts = session.partitions
        for tp in forgotten:
            parts.pop(tp, None)
        for topic, p in named:
            tp = (topic, p.partition)
            cp = parts.get(tp)
            if cp is None:
                parts[tp] = CachedPartition.of(p)
            else:
                cp.update(p)
        session.epoch = next_epoch(session.epoch)
        self._touch(session, now_ms)
        return FetchContext(ContextKind.INCREMENTAL, [(tp[0], cp) for tp, cp in parts.items()],
                            session)

    def _close(self, replica_id: int, session_id: int) -> None:
        """A full fetch naming its old session closes it: only the replica's own."""
        s = self._sessions.get(session_id) if session_id != INVALID_SESSION_ID else None
        if s is not None and s.replica_id == replica_id:
            del self._sessions[session_id]

    def expire(self, now_ms: int) -> int:
        """Drop the sessions idle for more than eviction_ms (a fetcher that stopped, a follower
        gone). Returns how many."""
        n = 0
        while self._sessions:
            s = next(iter(self._sessions.values()))
            if now_ms - s.last_used_ms <= self.eviction_ms:
                break
            self._sessions.popitem(last=False)
            n += 1
        self.evictions += n
        return n

    def _touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = max(session.last_used_ms, now_ms)
        self._sessions.move_to_end(session.id)

    def _create(self, replica_id: int, named: list, now_ms: int) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        self.expire(now_ms)
        privileged = replica_id >= 0
        if len(self._sessions) >= self.max_slots and not self._evict_for(privileged, len(named)):
            return None
        sid = self._new_id()
        while sid == INVALID_SESSION_ID or sid in self._sessions:
            sid = self._new_id()
        session = FetchSession(sid, replica_id, privileged, next_epoch(INITIAL_EPOCH), now_ms,
                               now_ms)
        for topic, p in named:
            session.partitions[(topic, p.partition)] = CachedPartition.of(p)
        self._sessions[sid] = session
        self.created += 1
        return session

    def _evict_for(self, privileged: bool, size: int) -> bool:
        """Make room (the cache is full and nothing is stale): a follower's new session evicts
        the least valuable consumer session; a consumer's only a smaller consumer session."""
        victim = min(self._sessions.values(),
                     key=lambda s: (s.privileged, len(s.partitions), s.last_used_ms),
                     default=None)
        if victim is None or victim.privileged:
            return False
        if not privileged and len(victim.partitions) >= size:
            return False
        del self._sessions[victim.id]
        self.evictions += 1
        return True
