"""What a partition leader's answer to WRITE_TXN_MARKERS means for the coordinator (pure;
Kafka's TransactionMarkerRequestCompletionHandler)."""
from __future__ import annotations

import enum

from riverbed.errors import ErrorCode as E


class MarkerOutcome(enum.Enum):
    DONE = "done"                    # the marker is in the partition
    RETRY = "retry"                  # try again after transaction.marker.retry.backoff.ms
    RETRY_REFRESH = "retry_refresh"  # ... after a metadata refresh (the leader moved)
    FENCED = "fenced"                # a newer coordinator or producer epoch: stop


_REFRESH = frozenset({E.NOT_LEADER_FOR_PARTITION, E.UNKNOWN_TOPIC_OR_PARTITION,
                      E.LEADER_NOT_AVAILABLE, E.KAFKA_STORAGE_ERROR, E.FENCED_LEADER_EPOCH,
                      E.NETWORK_EXCEPTION})
_FENCED = frozenset({E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED,
                     E.PRODUCER_FENCED})


def marker_outcome(code: int) -> MarkerOutcome:
    """NONE is done; a fencing error stops; every other error is retried (Kafka retries the
    retriable ones and treats the others as a bug it logs: retrying them costs only a request
    per backoff, and the coordinator never decides twice)."""
    if code == E.NONE:
        return MarkerOutcome.DONE
    if code in _FENCED:
        return MarkerOutcome.FENCED
    if code in _REFRESH:
        return MarkerOutcome.RETRY_REFRESH
    return MarkerOutcome.RETRY
