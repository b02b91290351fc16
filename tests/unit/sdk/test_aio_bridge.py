"""riverbed.aio's pure parts, without sockets: the greenlet bridge that runs sync client code
on the loop (results, errors both ways, WouldBlock outside it, sleeps that let other tasks
run), the asyncio Condition the producer's waits use, awaitable record futures (completed on
the loop or from another thread), the batch builder, and riverbed-perf's --asyncio flag."""
from __future__ import annotations

import asyncio
import threading

import pytest

from riverbed.aio import BatchBuilder, bridge
from riverbed.futures import BatchResult, FutureRecordMetadata
from riverbed.structs import RecordMetadata


def run(coro):
    return asyncio.run(coro)


def test_run_sync_hands_waits_to_the_loop_and_returns_the_result():
    log = []

    def sync_code(x):
        log.append("before")
        got = bridge.await_(asyncio.sleep(0, result=x * 2))
        log.append("after")
        return got + 1

    async def other():
        log.append("other task ran")

    async def main():
        t = asyncio.ensure_future(other())
        result = await bridge.run_sync(sync_code, 20)
        await t
        return result
    assert run(main()) == 41
    assert log == ["before", "other task ran", "after"]


def test_errors_travel_both_ways():
    async def boom():
        raise KeyError("from the loop")

    def catches():
        try:
            bridge.await_(boom())
        except KeyError as e:
            return f"caught {e.args[0]}"

    def raises():
        bridge.await_(asyncio.sleep(0))
        raise ValueError("from sync code")

    async def main():
        assert await bridge.run_sync(catches) == "caught from the loop"
        with pytest.raises(ValueError, match="from sync code"):
            await bridge.run_sync(raises)
    run(main())


def test_await_outside_run_sync_is_would_block_and_in_bridge_tells():
    async def main():
        assert not bridge.in_bridge()
        with pytest.raises(bridge.WouldBlock):
            bridge.await_(asyncio.sleep(0))
        assert await bridge.run_sync(bridge.in_bridge)
    run(main())


def test_bridge_sleep_lets_concurrent_sync_calls_interleave():
    order = []

    def worker(name, delay):
        bridge.sleep(delay)
        order.append(name)

    async def main():
        await asyncio.gather(bridge.run_sync(worker, "slow", 0.05),
                             bridge.run_sync(worker, "fast", 0.0))
    run(main())
    assert order == ["fast", "slow"]


def test_async_condition_wait_notify_timeout_and_wait_for():
    cond = bridge.AsyncCondition()
    state = {"ready": False}

    def waiter():
        with cond:
            return cond.wait_for(lambda: state["ready"], timeout=5)

    def times_out():
        with cond:
            return cond.wait(0.01)

    async def main():
        w = asyncio.ensure_future(bridge.run_sync(waiter))
        await asyncio.sleep(0.01)
        assert not w.done()
        state["ready"] = True
        with cond:
            cond.notify_all()
        assert await w is True
        assert await bridge.run_sync(times_out) is False
        with pytest.raises(bridge.WouldBlock):
            with cond:
                cond.wait(1)
    run(main())


def test_record_futures_are_awaitable_on_the_loop_and_from_a_thread():
    async def main():
        b1 = BatchResult("t", 0)
        f1 = FutureRecordMetadata(b1, 2, 1000)
        asyncio.get_running_loop().call_later(0.01, b1.complete, 40, -1)
        assert await f1 == RecordMetadata("t", 0, 42, 1000)
        b2 = BatchResult("t", 1)
        f2 = FutureRecordMetadata(b2, 0, 5)
        threading.Timer(0.01, b2.fail, args=(RuntimeError("nope"),)).start()
        with pytest.raises(RuntimeError, match="nope"):
            await f2
        assert await f1 == RecordMetadata("t", 0, 42, 1000)     # done: at once
    run(main())


def test_batch_builder_counts_and_refuses_empty_records():
    b = BatchBuilder().append(value=b"a").append(key=b"k", value=b"b", timestamp=5)
    assert b.record_count() == 2
    with pytest.raises(ValueError):
        b.append()


def test_perf_asyncio_flag_parses_and_refuses_bulk_and_null_sink():
    from loadgen import options
    args = options.parse_args(["produce", "--bootstrap-server", "tcp://x:1", "--topic", "t",
                               "--num-records", "10", "--record-size", "10", "--asyncio"])
    assert args.asyncio
    for extra in ("--bulk", "--null-sink"):
        with pytest.raises(SystemExit):
            options.parse_args(["produce", "--topic", "t", "--num-records", "10",
                                "--record-size", "10", "--asyncio", extra])


def test_an_async_rebalance_listener_is_awaited_from_the_consumer_calls():
    from riverbed.aio.consumer import _Listener
    from riverbed.structs import TopicPartition
    seen = []

    class AiokafkaStyle:
        async def on_partitions_revoked(self, revoked):
            await asyncio.sleep(0)
            seen.append(("revoked", revoked))

        async def on_partitions_assigned(self, assigned):
            seen.append(("assigned", assigned))

    tp = {TopicPartition("t", 0)}

    def membership_calls(listener):
        listener.on_partitions_assigned(tp)
        listener.on_partitions_lost(tp)         # no on_partitions_lost: revoked stands in

    asyncio.run(bridge.run_sync(membership_calls, _Listener(AiokafkaStyle())))
    assert seen == [("assigned", tp), ("revoked", tp)]
