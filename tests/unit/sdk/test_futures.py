import threading

import pytest

from riverbed import errors
from riverbed.futures import BatchResult, FutureRecordMetadata
from riverbed.structs import RecordMetadata


def test_offsets_are_base_plus_index():
    b = BatchResult("t", 3)
    futs = [FutureRecordMetadata(b, i, 1000 + i) for i in range(3)]
    assert not futs[0].done()
    b.complete(40)
    assert all(f.done() and f.succeeded() for f in futs)
    assert futs[2].result() == RecordMetadata("t", 3, 42, 1002)
    assert futs[0].get(timeout=0).offset == 40


def test_log_append_time_and_acks0():
    b = BatchResult("t", 0)
    f = FutureRecordMetadata(b, 5, 1)
    b.complete(-1, 777)
    assert f.result() == RecordMetadata("t", 0, -1, 777)


def test_failure_raises_the_error_naming_topic_partition():
    b = BatchResult("orders", 7)
    f = FutureRecordMetadata(b, 0, 1)
    b.fail(errors.for_code(10, "too big", topic="orders", partition=7))
    assert f.failed()
    with pytest.raises(errors.MessageTooLargeError, match=r"orders-7"):
        f.result()
    assert isinstance(f.exception(), errors.MessageTooLargeError)


def test_result_timeout():
    f = FutureRecordMetadata(BatchResult("t", 0), 0, 1)
    with pytest.raises(errors.KafkaTimeoutError):
        f.result(timeout=0.01)


def test_callbacks_run_once_before_and_after_completion():
    b = BatchResult("t", 1)
    seen = []
    f1 = FutureRecordMetadata(b, 0, 1).add_done_callback(lambda f: seen.append(("a", f.result().offset)))
    FutureRecordMetadata(b, 1, 1).add_callback(lambda md: seen.append(("ok", md.offset)))
    FutureRecordMetadata(b, 1, 1).add_errback(lambda e: seen.append(("err", e)))
    assert seen == []
    b.complete(10)
    assert seen == [("a", 10), ("ok", 11)]
    f1.add_done_callback(lambda f: seen.append("late"))
    assert seen[-1] == "late"


def test_waiter_in_other_thread_wakes():
    b = BatchResult("t", 0)
    f = FutureRecordMetadata(b, 2, 1)
    out = []
    th = threading.Thread(target=lambda: out.append(f.result(timeout=10)))
    th.start()
    b.complete(100)
    th.join(10)
    assert out[0].offset == 102


def test_a_batch_completes_once():
    b = BatchResult("t", 0)
    b.complete(1)
    with pytest.raises(AssertionError):
        b.fail(RuntimeError())
