"""Nothing lost or hung by default (issue 16, item 1), with real Python subprocesses against a
real fleet (ZooKeeper, 1 controller, 1 storage node, a group coordinator, an offset manager, a
gateway):

- a script that ends without flush()/close() loses nothing (the atexit hook closes producers);
- records that cannot be delivered before close_timeout_ms at exit are named in a WARNING;
- after os.fork() the child's inherited clients raise ForkedClientError at once (send, waiting on
  a parent's future, consumer poll, admin calls), the child's exit does not touch the parent's
  producer, and the parent goes on.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from deploy.fleet import Fleet, free_base_port
from riverbed import Admin, Consumer, NewTopic, TopicPartition

pytestmark = pytest.mark.integration

SCRIPT_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("lifecycle-fleet"), free_base_port(), storage_nodes=1,
              controllers=1, gateways=1)
    try:
        f.up()
        yield f
    finally:
        f.down()


@pytest.fixture(scope="module")
def bootstrap(fleet) -> str:
    return fleet.gateway_endpoint


def create_topic(bootstrap: str, name: str, partitions: int = 2) -> None:
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])


def count_records(bootstrap: str, topic: str, partitions: int, expected: int) -> int:
    """Read every partition from the start up to its end offset; the number of records read."""
    with Consumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=100) as c:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning()
        ends = c.end_offsets(tps)
        got = 0
        while any(c.position(tp) < ends[tp] for tp in tps):
            for recs in c.poll(timeout_ms=500).values():
                got += len(recs)
        return got


def run_script(code: str, bootstrap: str, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, RIVERBED_BOOTSTRAP=bootstrap)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S, **kw)


@pytest.mark.parametrize("linger_ms", [0, 50])
def test_script_ending_without_flush_loses_nothing(bootstrap, linger_ms):
    topic = f"exit-no-flush-{linger_ms}"
    create_topic(bootstrap, topic)
    n = 5000
    proc = run_script(f"""
        from riverbed import Producer
        p = Producer(acks=1, linger_ms={linger_ms})   # bootstrap from RIVERBED_BOOTSTRAP
        for i in range({n}):
            p.send({topic!r}, b"record-%d" % i)
        # no flush(), no close(): the interpreter exits here
    """, bootstrap)
    assert proc.returncode == 0, proc.stderr
    assert "could not be delivered" not in proc.stderr
    assert count_records(bootstrap, topic, 2, n) == n


def test_undeliverable_records_at_exit_are_named_in_a_warning(fleet, bootstrap):
    """The gateway is paused (SIGSTOP) while the script sends and exits: close at exit waits
    close_timeout_ms, then fails the records and says how many."""
    topic = "exit-undeliverable"
    create_topic(bootstrap, topic, 1)
    code = textwrap.dedent(f"""
        import sys
        from riverbed import Producer
        p = Producer(acks=1, close_timeout_ms=500, retries=0)
        p.send({topic!r}, b"first").get(timeout=30)     # metadata known, connection up
        print("ready", flush=True)
        sys.stdin.readline()                            # the test pauses the gateway
        for i in range(100):
            p.send({topic!r}, b"late-%d" % i)
    """)
    env = dict(os.environ, RIVERBED_BOOTSTRAP=bootstrap)
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    gateway = "gateway-1"
    paused = False
    try:
        assert proc.stdout.readline().strip() == "ready"
        fleet.signal(gateway, signal.SIGSTOP)
        paused = True
        out, err = proc.communicate("go\n", timeout=SCRIPT_TIMEOUT_S)
    finally:
        if paused:
            fleet.signal(gateway, signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "100 record(s) could not be delivered" in err, err


def test_forked_child_gets_a_typed_error_and_the_parent_goes_on(bootstrap):
    topic = "fork"
    create_topic(bootstrap, topic, 1)
    group = "fork-group"
    proc = run_script(f"""
        import os, sys
        from riverbed import Admin, Consumer, Producer, TopicPartition, errors

        producer = Producer(acks=1, linger_ms=60000, batch_size=1 << 20)
        producer.send({topic!r}, b"before")
        producer.flush(timeout=30)
        pending = producer.send({topic!r}, b"pending at fork")   # lingers: not sent yet
        consumer = Consumer(group_id={group!r}, auto_offset_reset="earliest")
        consumer.assign([TopicPartition({topic!r}, 0)])
        admin = Admin()

        def child() -> int:
            failures = []
            checks = {{
                "send": lambda: producer.send({topic!r}, b"from child"),
                "send_many": lambda: producer.send_many({topic!r}, [b"x"]),
                "flush": lambda: producer.flush(),
                "parent future": lambda: pending.get(),          # would hang forever
                "poll": lambda: consumer.poll(timeout_ms=100),
                "commit": lambda: consumer.commit(),
                "admin": lambda: admin.list_topics(),
            }}
            for name, call in checks.items():
                try:
                    call()
                    failures.append(name + ": no error")
                except errors.ForkedClientError as e:
                    if "os.fork()" not in str(e):
                        failures.append(name + ": " + str(e))
                except Exception as e:
                    failures.append(name + ": " + repr(e))
            producer.close()      # no-op in the child
            consumer.close()
            admin.close()
            print("child failures:", failures, flush=True)
            return 1 if failures else 0

        pid = os.fork()
        if pid == 0:
            sys.exit(child())      # a normal exit: atexit hooks run in the child too
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        # the parent's clients are untouched
        producer.send({topic!r}, b"after")
        producer.flush(timeout=30)
        print("pending offset", pending.get(timeout=0).offset)
        assert {topic!r} in admin.list_topics()
        consumer.seek_to_beginning()
        got = []
        while len(got) < 3:
            for recs in consumer.poll(timeout_ms=1000).values():
                got += [r.value for r in recs]
        print("parent read", got)
        consumer.commit()
        consumer.close()
        admin.close()
        producer.close()
    """, bootstrap)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "child failures: []" in proc.stdout
    assert "parent read [b'before', b'pending at fork', b'after']" in proc.stdout
