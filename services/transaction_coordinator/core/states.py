"""Transaction states (Kafka's TransactionState) and the one table of allowed transitions (STYLE §4).

                 AddPartitions / AddOffsets
      Empty ─────────────────────────────────▶ Ongoing ◀──┐ AddPartitions (more)
        ▲ ▲                                      │  │ │ └──┘
        │ │ InitProducerId (epoch + 1)           │  │ └── InitProducerId of a new instance, or
        │ │                                      │  │     the timeout: PrepareEpochFence (in
        │ │                                      │  │     memory) then PrepareAbort at epoch + 1
        │ │             EndTxn(commit)           │  │ EndTxn(abort)
        │ │      ┌───────────────────────────────┘  └──────────────┐
        │ │      ▼                                                 ▼
        │ │  PrepareCommit ──markers written──▶ CompleteCommit   PrepareAbort ──markers──▶ CompleteAbort
        │ └──────────────────────────────────────────┴──────────────────────────────────────┘
        │                          (InitProducerId, AddPartitions start the next one)
        └── Dead (transactional.id.expiration.ms: the id is forgotten, tombstoned)

Every transition except PrepareEpochFence is a __transaction_state record written (acks=all)
before it takes effect; Prepare* is the decision (the client's EndTxn is answered once it is
durable), Complete* says every marker is written. A coordinator that loads a shard finishes
every Prepare* it finds by writing the markers again (markers are idempotent).
"""
from __future__ import annotations

from riverbed.coordinator.transaction_log import TxnStatus

__all__ = ["TxnStatus", "TRANSITIONS", "IllegalTransition", "check_transition"]

_S = TxnStatus

# to-state -> the states it may be reached from (Kafka's validPreviousStates).
VALID_PREVIOUS: dict[TxnStatus, frozenset[TxnStatus]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}

# from-state -> the states it may move to (the same table, the other way round).
TRANSITIONS: dict[TxnStatus, frozenset[TxnStatus]] = {
    src: frozenset(dst for dst, prev in VALID_PREVIOUS.items() if src in prev) for src in TxnStatus}

# States a transactional id may be forgotten in (transactional.id.expiration.ms).
EXPIRATION_ALLOWED = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})


class IllegalTransition(AssertionError):
    """A bug: the core tried a transition the table does not allow."""


def check_transition(src: TxnStatus, dst: TxnStatus) -> None:
    if src not in VALID_PREVIOUS[dst]:
        raise IllegalTransition(f"transaction state {src.kafka_name} -> {dst.kafka_name} is not "
                                "allowed")
