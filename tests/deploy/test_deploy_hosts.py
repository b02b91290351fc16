"""The Ansible roles against five real SSH hosts (tests/deploy/deploy_testbed.py), through SSH only.

One test bed for the module; the tests run in order and each needs the ones before it:
validate-hosts.yml + site.yml from bare hosts (CURVE, the roles' default: keys generated on the
control machine and distributed) -> an RF3 topic through the gateway, produce and consume with the
SDK from the client namespace with the `client` key -> a client with no key or an unknown key gets
nothing through -> mount options, sysctl drop-in, rendered configs and key files (secrets 0600,
only each host's own) on the hosts -> site.yml again changes nothing (no key regenerated) ->
rolling-restart.yml under an acks=all idempotent producer loses nothing -> rotate-keys.yml (begin:
both keys admitted; finish: the old one refused) under the same producer loses nothing -> one
ZooKeeper killed, producing goes on -> a storage node decommissioned (its partitions moved), and a
second one refused (RF would drop) -> the node added back.

Skips (one line why) without root, network namespaces, loop devices, sshd or the collections.
Set RIVERBED_DEPLOY_PERF=1 to also run riverbed-perf through the deployed gateway (figures only).
"""
from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
import yaml

from deploy_testbed import TestBed, run, unavailable_reason
from deployment import (DISKS, LAYOUT, PROCESSES, STORAGE_IDS, Deployment, gaps_per_host,
                        restart_windows, write_inventory)

pytestmark = [pytest.mark.deploy, pytest.mark.timeout(1800)]

_REASON = unavailable_reason()
if _REASON:
    pytestmark.append(pytest.mark.skip(reason=f"deployment test bed unavailable: {_REASON}"))

CLIENT = pathlib.Path(__file__).resolve().parent / "deploy_client.py"
TOPIC = "deploy-rf3"
PARTITIONS = 3


class State:
    bed: TestBed
    deployment: Deployment
    inventory: pathlib.Path
    bootstrap: str
    figures: dict = {}
    failed_stage: str | None = None


@pytest.fixture(scope="module")
def bed(deployment):
    """The session's test bed (conftest.py), bare until the first stage runs site.yml."""
    State.deployment = deployment
    State.bed = deployment.bed
    State.inventory = deployment.inventory
    State.bootstrap = deployment.bootstrap
    try:
        yield deployment.bed
    finally:
        print("deployment figures: " + json.dumps(State.figures), file=sys.stderr)


@pytest.fixture(autouse=True)
def _in_order(bed):
    """Each stage needs the ones before it (conftest.py records a failed stage in State)."""
    if State.failed_stage is not None:
        pytest.skip(f"an earlier stage failed: {State.failed_stage}")


def client(*args: str, timeout: float = 300) -> dict:
    r = State.bed.client_run([sys.executable, str(CLIENT), *args], timeout=timeout)
    return json.loads(r.stdout.strip().splitlines()[-1])


def host(name: str):
    return {h.name: h for h in State.bed.hosts}[name]


# --- 1. from bare hosts ---------------------------------------------------------------------------

def test_validate_hosts_then_site_from_bare_hosts(bed):
    v = bed.ansible("validate-hosts.yml", State.inventory)
    assert v.recap() and all(h["failed"] == 0 and h["unreachable"] == 0 for h in v.recap().values())
    # Nothing of Riverbed is on any host yet.
    for h in bed.hosts:
        assert not (h.private("opt-riverbed") / "venv").exists()
    site = State.deployment.site()
    State.figures["site_from_bare_hosts_s"] = round(site.elapsed_s, 1)
    recap = site.recap()
    assert set(recap) == {h.name for h in bed.hosts}
    assert all(r["failed"] == 0 and r["unreachable"] == 0 for r in recap.values()), recap
    # Every process the inventory asks for runs, on its host, under its pid file (h2: two
    # storage-node processes, one per data disk).
    for name, procs in PROCESSES.items():
        for proc in procs:
            r = bed.ssh(host(name), f"/opt/riverbed/bin/riverbedctl status {proc}", check=False)
            assert r.returncode == 0, f"{proc} on {name}: {r.stdout} {r.stderr}"


def test_rf3_topic_through_the_gateway_with_the_sdk(bed):
    created = client("topic", "--bootstrap", State.bootstrap, "--topic", TOPIC,
                     "--partitions", str(PARTITIONS), "--replication-factor", "3")
    assert len(created["partitions"]) == PARTITIONS
    assert all(len(p["replicas"]) == 3 and set(p["replicas"]) <= {1, 2, 3, 4, 5} for p in created["partitions"])
    smoke = client("smoke", "--bootstrap", State.bootstrap, "--topic", TOPIC, "--count", "300")
    assert smoke["acked"] == 300 and smoke["all_read"], smoke


def _probe(key: str) -> dict:
    return client("probe", "--bootstrap", State.bootstrap, "--topic", TOPIC, "--key", key)


def test_a_client_without_a_valid_key_gets_nothing_through(bed):
    for key in ("none", "unknown"):
        r = _probe(key)
        assert r["outcome"] == {"metadata": "timed_out", "produce": "timed_out"}, (key, r)
        assert r["end_offsets_after"] == r["end_offsets_before"], (key, r)
    mine = _probe(str(State.inventory.parent.parent / "keys" / "private" / "client.key_secret"))
    assert mine["outcome"]["metadata"] == "answered", mine


def _stat(h, pattern: str) -> dict[str, str]:
    """{path: octal mode} of the files matching `pattern` on host h."""
    out = bed_ssh(h, f"stat -c '%a %n' {pattern}")
    return {line.split(" ", 1)[1]: line.split(" ", 1)[0] for line in out.splitlines() if line.strip()}


def bed_ssh(h, command: str) -> str:
    return State.bed.ssh(h, command).stdout


def test_hosts_hold_only_their_own_secret_keys_mode_0600(bed):
    services = {h: [p for p in procs if p != "zookeeper"] for h, procs in PROCESSES.items()}
    everyone = sorted(n for ns in services.values() for n in ns) + ["client", "operator"]
    keys = "/etc/riverbed/keys"
    for name, procs in services.items():
        h = host(name)
        secrets = _stat(h, f"{keys}/private/*")
        # a gateway's SASL_SSL listener: its TLS key and certificate chain (Kafka's PEM keystore)
        tls = {f"{keys}/private/{p}.pem" for p in procs if p.startswith("gateway-")}
        assert set(secrets) == {f"{keys}/private/{p}.key_secret" for p in procs + ["operator"]} | tls, \
            secrets
        assert set(secrets.values()) == {"600"}, secrets
        assert _stat(h, f"{keys}/private") == {f"{keys}/private": "700"}
        assert _stat(h, f"{keys}/zookeeper.credentials {keys}/tools.properties") == {
            f"{keys}/zookeeper.credentials": "600", f"{keys}/tools.properties": "600"}
        certs = _stat(h, f"{keys}/certificates/*")
        assert set(certs) == {f"{keys}/certificates/{n}.key" for n in everyone}, certs
        assert "secret-key" not in bed_ssh(h, f"cat {keys}/certificates/*")
        for proc in procs:
            props = bed_ssh(h, f"cat /etc/riverbed/{proc}.properties")
            for line in ("security.protocol=CURVE", f"curve.secret.key.file={keys}/private/{proc}.key_secret",
                         f"curve.trusted.keys.dir={keys}/certificates", "zookeeper.set.acl=true",
                         f"zookeeper.credentials.file={keys}/zookeeper.credentials"):
                assert line in props.splitlines(), (proc, line)
        tools = bed_ssh(h, f"cat {keys}/tools.properties")
        assert f"curve.secret.key.file={keys}/private/operator.key_secret" in tools
    # the control machine's copy: every secret 0600 in a 0700 directory
    control = State.inventory.parent.parent / "keys"
    assert oct((control / "private").stat().st_mode & 0o777) == "0o700"
    assert all(oct(f.stat().st_mode & 0o777) == "0o600" for f in (control / "private").iterdir())
    # ZooKeeper: the fleet's znodes are writable only with the fleet's digest credentials
    acl = bed_ssh(host("h1"), "/opt/riverbed/venv/bin/python -c \"from kazoo.client import KazooClient; "
                  f"c = KazooClient('{host('h1').address}:2181'); c.start(15); "
                  "print(sorted(str(a.id.scheme) for a in c.get_acls('/riverbed/controller_epoch')[0])); c.stop()\"")
    assert acl.strip() == "['digest', 'world']", acl


def test_kafka_clients_over_sasl_ssl_through_the_deployed_gateway(bed):
    """The gateway's SASL_SSL listener (the only Kafka listener by default), its certificate made
    and distributed by site.yml, the SCRAM user kafka-client made with its librdkafka properties
    on the control machine: kcat -F with them lists, produces and consumes; a wrong password and
    the PLAINTEXT port (not opened) get nothing."""
    import shutil as _shutil
    if _shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (make install puts Debian's kcat)")
    keys = State.inventory.parent.parent / "keys"
    conf = keys / "kafka-clients" / "kafka-client.conf"
    assert oct(conf.stat().st_mode & 0o777) == "0o600"
    props = dict(line.split("=", 1) for line in conf.read_text().splitlines()
                 if line and not line.startswith("#"))
    h1 = host("h1").address
    gateways = {f"{host(h).address}:9093" for h in LAYOUT["gateway"]}
    assert set(props["bootstrap.servers"].split(",")) == gateways, props
    assert props["security.protocol"] == "SASL_SSL"
    assert props["ssl.ca.location"] == str(keys / "kafka-ca.pem")
    gw = bed_ssh(host("h1"), "cat /etc/riverbed/gateway-1.properties")
    assert f"listeners=SASL_SSL://{h1}:9093" in gw.splitlines()
    topic = "kafka-sasl-ssl"
    lines = [f"k{i}:v{i}" for i in range(20)]
    # the producer's metadata request creates the topic (auto.create.topics.enable)
    r = subprocess.run(["ip", "netns", "exec", bed.client_ns, "kcat", "-F", str(conf), "-P",
                        "-t", topic, "-K:", "-X", "acks=all"], input="\n".join(lines) + "\n",
                       capture_output=True, text=True, timeout=120, env=bed.client_env())
    assert r.returncode == 0, r.stderr
    r = bed.client_run(["kcat", "-F", str(conf), "-L", "-J", "-t", topic], timeout=120)
    assert sorted(b["id"] for b in json.loads(r.stdout)["brokers"]) \
        == list(range(1, len(LAYOUT["gateway"]) + 1)), r.stdout
    r = bed.client_run(["kcat", "-F", str(conf), "-C", "-t", topic, "-o", "beginning", "-e",
                        "-q", "-f", "%k:%s\n"], timeout=120)
    assert sorted(r.stdout.split()) == sorted(lines)
    r = bed.client_run(["kcat", "-F", str(conf), "-X", "sasl.password=wrong", "-L", "-m", "10"],
                       check=False, timeout=120)
    assert r.returncode != 0 and "Authentication failed" in r.stderr, r.stderr
    r = bed.client_run(["kcat", "-b", f"{h1}:9094", "-L", "-m", "5"], check=False, timeout=60)
    assert r.returncode != 0          # no PLAINTEXT listener unless riverbed_kafka_listeners asks


def test_hosts_have_tuned_disks_drop_ins_and_rendered_configs(bed):
    # Mount options as the seeds advise, seen from inside each host's own mount namespace.
    for name, types in DISKS.items():
        mounts = bed.ssh(host(name), "cat /proc/self/mounts").stdout
        for i, fstype in enumerate(types, start=1):
            line = next((ln for ln in mounts.splitlines() if f" /srv/riverbed/data{i} " in ln), None)
            assert line is not None, f"{name}: /srv/riverbed/data{i} not mounted:\n{mounts}"
            dev, _, fs, opts = line.split()[:4]
            assert fs == fstype
            opts = set(opts.split(","))
            assert "noatime" in opts
            if fstype == "xfs":
                assert {"inode64", "logbsize=256k"} <= opts, opts
            elif name == "h5":
                assert "data=writeback" in opts, opts
            else:
                assert "data=writeback" not in opts, opts
        # one log dir per disk; on h2 one storage-node process per disk, each with its own
        # broker.id, ports and log dir
        ids = STORAGE_IDS[name]
        dirs = [f"/srv/riverbed/data{i}/logs" for i in range(1, len(types) + 1)]
        for k, node_id in enumerate(ids):
            props = bed.ssh(host(name), f"cat /etc/riverbed/storage-{node_id}.properties").stdout
            log_dirs = re.search(r"^log\.dirs=(.*)$", props, re.M).group(1).split(",")
            assert log_dirs == (dirs if len(ids) == 1 else [dirs[k]]), (node_id, log_dirs)
            assert f"broker.id={node_id}" in props.splitlines()
            assert f"port={9192 + k}" in props.splitlines() and f"metrics.port={9392 + k}" in props.splitlines()
        # The mounts are the host's own: the machine's namespace does not see them.
    machine_mounts = pathlib.Path("/proc/self/mounts").read_text()
    assert "/srv/riverbed/data1 " not in machine_mounts
    # ZooKeeper's transaction log on its own disk.
    zoo = bed.ssh(host("h1"), "cat /etc/riverbed/zookeeper/zoo.cfg").stdout
    assert "dataLogDir=/srv/zookeeper/txnlog/zookeeper-txnlog" in zoo
    assert all(f"server.{i}={host(f'h{i}').address}:2888:3888" in zoo for i in (1, 2, 3))
    assert "autopurge.purgeInterval=24" in zoo
    assert bed.ssh(host("h2"), "cat /var/lib/riverbed/zookeeper/myid").stdout.strip() == "2"
    # The sysctl and limits drop-ins, written on every host (applied only on real hosts).
    for h in bed.hosts:
        sysctl = bed.ssh(h, "cat /etc/sysctl.d/60-riverbed.conf").stdout
        for key in ("vm.swappiness = 1", "vm.dirty_background_ratio = 5", "vm.dirty_ratio = 60",
                    "vm.max_map_count = 262144"):
            assert key in sysctl
        assert "nofile 100000" in bed.ssh(h, "cat /etc/security/limits.d/60-riverbed.conf").stdout
    assert not pathlib.Path("/etc/sysctl.d/60-riverbed.conf").exists()   # the machine's own untouched
    # Every .properties file is what the local fleet's templates give for that host.
    storage = bed.ssh(host("h3"), "cat /etc/riverbed/storage-2.properties").stdout
    assert "broker.id=2" in storage and f"host.name={host('h3').address}" in storage
    zk = ",".join(f"{host(f'h{i}').address}:2181" for i in (1, 2, 3)) + "/riverbed"
    assert f"zookeeper.connect={zk}" in storage
    assert "metrics.port=9392" in storage
    ctrl = bed.ssh(host("h1"), "cat /etc/riverbed/controller-1.properties").stdout
    assert "default.replication.factor=3" in ctrl and "pub.port=9111" in ctrl
    # The Prometheus scrape configuration names every service's metrics endpoint.
    prom = (State.inventory.parent / "prometheus.yml").read_text()
    assert f'"{host("h3").address}:9392"' in prom and f'"{host("h1").address}:9292"' in prom
    assert prom.count("- targets:") == 11
    assert f'"{host("h2").address}:9393"' in prom     # storage-5, h2's second instance


def test_site_rerun_changes_nothing(bed):
    again = bed.ansible("site.yml", State.inventory)
    State.figures["site_rerun_s"] = round(again.elapsed_s, 1)
    assert again.changed() == 0, {h: r for h, r in again.recap().items() if r.get("changed")}


# --- 2. operations ---------------------------------------------------------------------------------

@contextlib.contextmanager
def _verifying_producer(bed, name: str, *extra: str):
    """The acks=all idempotent verifying producer (CLIENT verify `extra`) on TOPIC while the block runs:
    started and ready on entry; on a normal exit told to stop and read back, and its report
    (acked, lost, duplicates, out of order, ack times) put into the dict the block got. Killed
    when the block fails. Files under the inventory's directory, named after `name`."""
    work = State.inventory.parent
    stop, ready, result = work / f"{name}.stop", work / f"{name}.ready", work / f"{name}.json"
    log = work / f"{name}-producer.log"
    proc = bed.client_popen([sys.executable, str(CLIENT), "verify", "--bootstrap", State.bootstrap,
                             "--topic", TOPIC, "--partitions", str(PARTITIONS), "--out", str(result),
                             "--stop-file", str(stop), "--ready-file", str(ready), *extra], log)
    report: dict = {}
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the verifying producer did not start"
            time.sleep(0.2)
        yield report
        stop.write_text("stop\n")
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, log.read_text()[-3000:]
    report.update(json.loads(result.read_text()))


def test_rolling_restart_under_an_idempotent_producer_loses_nothing(bed):
    since = time.time()
    # the producer's defaults (acks=all): what an application sees during the restart
    with _verifying_producer(bed, "rr", "--sdk-defaults") as report:
        rr = bed.ansible("rolling-restart.yml", State.inventory, timeout=1200)
        State.figures["rolling_restart_s"] = round(rr.elapsed_s, 1)
        assert all(r["failed"] == 0 for r in rr.recap().values())
    # Unavailability per host: the longest gap between two acknowledgements while that host was
    # the one being restarted (from its first 'stopping' until the next host's).
    windows = restart_windows(bed, since)
    gaps = gaps_per_host(windows, report["ack_times"], report["ack_times_by_partition"])
    State.figures["rolling_restart_longest_ack_gap_s_per_host"] = {h: g["gap_s"] for h, g in gaps.items()}
    State.figures["rolling_restart_longest_partition_ack_gap_s_per_host"] = {
        h: g["partition_gap_s"] for h, g in gaps.items()}
    State.figures["rolling_restart_records"] = {k: report[k] for k in ("acked", "read", "lost", "duplicates", "out_of_order")}
    assert {h for _, h in windows} == {h.name for h in bed.hosts}, windows   # every host restarted
    assert report["ok"], report["describe"]
    assert report["lost"] == 0 and report["out_of_order"] == 0
    assert report["duplicates"] == 0, report["describe"]   # idempotent: each record once


def test_rotate_keys_under_an_idempotent_producer_loses_nothing(bed):
    """rotate-keys.yml in its two phases while the verifying producer runs: after `begin` both
    the old and the new client key are admitted; the client moves to the new one (the verifier's
    read-back uses the new key file); after `finish` a client with the old key is refused."""
    work = State.inventory.parent
    keys = work.parent / "keys"
    old_secret = work / "old-client.key_secret"
    shutil.copy2(keys / "private" / "client.key_secret", old_secret)
    old_operator = (keys / "private" / "operator.key_secret").read_text()
    try:
        with _verifying_producer(bed, "rot") as report:
            begin = bed.ansible("rotate-keys.yml", State.inventory, "-e", "riverbed_rotate_phase=begin", timeout=900)
            State.figures["rotate_keys_begin_s"] = round(begin.elapsed_s, 1)
            new_secret = keys / "private" / "client.key_secret"
            assert new_secret.read_text() != old_secret.read_text()
            for h in bed.hosts:        # both admitted everywhere; the hosts' tools on the new key
                certs = bed_ssh(h, "ls /etc/riverbed/keys/certificates").split()
                assert {"client.key", "client.retiring.key", "operator.key", "operator.retiring.key"} <= set(certs), certs
                assert bed_ssh(h, "cat /etc/riverbed/keys/private/operator.key_secret") == \
                    (keys / "private" / "operator.key_secret").read_text() != old_operator
            for key in (old_secret, new_secret):
                r = _probe(str(key))
                assert r["outcome"]["metadata"] == "answered", (key, r)
            finish = bed.ansible("rotate-keys.yml", State.inventory, "-e", "riverbed_rotate_phase=finish", timeout=900)
            State.figures["rotate_keys_finish_s"] = round(finish.elapsed_s, 1)
            for h in bed.hosts:
                certs = bed_ssh(h, "ls /etc/riverbed/keys/certificates").split()
                assert not [c for c in certs if "retiring" in c], certs
                assert "retiring" not in bed_ssh(h, "ls /etc/riverbed/keys/private")
            refused = _probe(str(old_secret))   # (end offsets move: the verifier is producing)
            assert refused["outcome"] == {"metadata": "timed_out", "produce": "timed_out"}, refused
            assert _probe(str(new_secret))["outcome"]["metadata"] == "answered"
    finally:
        old_secret.unlink(missing_ok=True)
    State.figures["rotate_keys_records"] = {k: report[k] for k in ("acked", "read", "lost", "duplicates", "out_of_order")}
    assert report["ok"], report["describe"]
    assert report["lost"] == 0 and report["out_of_order"] == 0 and report["duplicates"] == 0, report["describe"]


def test_the_fleet_survives_losing_one_zookeeper(bed):
    h3 = host("h3")
    pid = int((h3.private("var-lib-riverbed") / "run" / "zookeeper.pid").read_text())
    cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert b"org.apache.zookeeper.server.quorum.QuorumPeerMain" in cmdline  # ours, still that JVM
    assert pid in bed.host_pids(h3)
    os.kill(pid, signal.SIGKILL)
    out = State.inventory.parent / "zk.json"
    report = client("verify", "--bootstrap", State.bootstrap, "--topic", TOPIC,
                    "--partitions", str(PARTITIONS), "--out", str(out), "--acks", "600", timeout=600)
    State.figures["after_zookeeper_loss"] = {k: report[k] for k in ("acked", "lost", "duplicates")}
    assert report["ok"] and report["lost"] == 0, report["describe"]
    # Bring it back for what follows (site.yml starts what is not running).
    bed.ansible("site.yml", State.inventory)
    assert bed.ssh(h3, "/opt/riverbed/bin/riverbedctl status zookeeper", check=False).returncode == 0


def _longest_partition_gap(report: dict, t0: float, t1: float) -> float:
    worst = 0.0
    for ts in report["ack_times_by_partition"].values():
        series = [t0] + [t for t in ts if t0 <= t <= t1] + [t1]
        worst = max(worst, max(b - a for a, b in zip(series, series[1:])))
    return round(worst, 2)


def _records_ok(report: dict) -> None:
    assert report["ok"], report["describe"]
    assert report["lost"] == 0 and report["out_of_order"] == 0 and report["duplicates"] == 0, report["describe"]


def test_decommission_moves_every_partition_off_the_node(bed):
    leaving = host("h5")   # storage node 4
    before = client("describe", "--bootstrap", State.bootstrap)["partitions"]
    on_it = [p for p in before if 4 in p["replicas"]]
    assert on_it, "storage node 4 holds no partition: nothing to move"
    with _verifying_producer(bed, "dec", "--sdk-defaults") as report:
        t0 = time.time()
        dec = bed.ansible("decommission-storage-node.yml", State.inventory, "-e",
                          "riverbed_decommission_host=h5", timeout=1200)
        t1 = time.time()
    State.figures["decommission_s"] = round(dec.elapsed_s, 1)
    State.figures["decommission_longest_partition_ack_gap_s"] = _longest_partition_gap(report, t0, t1)
    _records_ok(report)
    after = {(p["topic"], p["partition"]): p for p in client("describe", "--bootstrap", State.bootstrap)["partitions"]}
    for p in before:
        q = after[(p["topic"], p["partition"])]
        assert 4 not in q["replicas"], q
        assert len(q["replicas"]) == len(p["replicas"]), (p, q)     # replication factor kept
        assert sorted(q["isr"]) == sorted(q["replicas"]), q
    assert bed.ssh(leaving, "/opt/riverbed/bin/riverbedctl status storage-4", check=False).returncode == 3
    # With h4 and h5 gone from the inventory, taking h2 away (both its storage nodes, 1 and 5)
    # would leave RF3 partitions on two nodes: the playbook refuses and changes nothing.
    layout = {**LAYOUT, "storage_node": ["h2", "h3"]}
    smaller = State.inventory.parent / "after-decommission.yml"
    write_inventory(bed, smaller, pathlib.Path(yaml.safe_load(State.inventory.read_text())["all"]["vars"]["riverbed_wheelhouse_dir"]), layout)
    refused = bed.ansible("decommission-storage-node.yml", smaller, "-e", "riverbed_decommission_host=h2",
                          check=False)
    assert refused.rc != 0
    assert "refusing to decommission storage nodes 1,5" in refused.stdout
    for proc in ("storage-1", "storage-5"):
        assert bed.ssh(host("h2"), f"/opt/riverbed/bin/riverbedctl status {proc}", check=False).returncode == 0
    still = {(p["topic"], p["partition"]): p for p in client("describe", "--bootstrap", State.bootstrap)["partitions"]}
    assert still == after


def test_add_storage_node_rejoins_and_takes_partitions(bed):
    """h5 (storage node 4, decommissioned above) joins again with add-storage-node.yml: its disk
    already holds a file system, which is kept (never reformatted), and partitions move onto it."""
    device = host("h5").disks[0].device
    uuid_before = run(["blkid", "-p", "-o", "value", "-s", "UUID", device]).stdout.strip()
    with _verifying_producer(bed, "add", "--sdk-defaults") as report:
        t0 = time.time()
        joined = bed.ansible("add-storage-node.yml", State.inventory, "-e", "riverbed_new_host=h5",
                             timeout=1200)
        t1 = time.time()
    assert all(r["failed"] == 0 for r in joined.recap().values())
    State.figures["add_storage_node_s"] = round(joined.elapsed_s, 1)
    State.figures["add_storage_node_longest_partition_ack_gap_s"] = _longest_partition_gap(report, t0, t1)
    _records_ok(report)
    assert run(["blkid", "-p", "-o", "value", "-s", "UUID", device]).stdout.strip() == uuid_before
    parts = client("describe", "--bootstrap", State.bootstrap)["partitions"]
    assert any(4 in p["replicas"] for p in parts), parts
    assert all(sorted(p["isr"]) == sorted(p["replicas"]) for p in parts), parts


PERF_ARGS = ["--num-records", "200000", "--record-size", "100", "--acks", "all", "--create-topic",
             "--partitions", "3", "--replication-factor", "3", "--no-progress"]


@pytest.mark.skipif(not os.environ.get("RIVERBED_DEPLOY_PERF"), reason="figures only: set RIVERBED_DEPLOY_PERF=1")
def test_perf_through_the_deployed_fleet_next_to_a_local_fleet(bed, tmp_path):
    """Figures, no threshold: riverbed-perf produce through the deployed gateway (from the client
    namespace) and through a local fleet (`deploy.fleet.Fleet`) on this same machine."""
    from deploy.fleet import Fleet, free_base_port

    perf = str(pathlib.Path(sys.executable).parent / "riverbed-perf")
    deployed = tmp_path / "deployed.json"
    bed.client_run([perf, "produce", "--bootstrap-server", State.bootstrap, "--topic", "perf-deployed",
                    *PERF_ARGS, "--json", str(deployed)], timeout=900)
    local = tmp_path / "local.json"
    with Fleet(tmp_path / "fleet", free_base_port(), storage_nodes=3) as fleet:
        fleet.up()
        run([perf, "produce", "--bootstrap-server", fleet.gateway_endpoint, "--topic", "perf-local",
             *PERF_ARGS, "--json", str(local)], timeout=900)
    d, loc = json.loads(deployed.read_text()), json.loads(local.read_text())
    State.figures["perf_produce"] = {"deployed": d, "local": loc}
    print("riverbed-perf produce, deployed:", json.dumps(d)[:1500])
    print("riverbed-perf produce, local fleet:", json.dumps(loc)[:1500])
