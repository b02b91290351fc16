"""The local fleet launcher: ZooKeeper plus every Riverbed service as subprocesses on one machine.

State directory D (reused by the next `up`, which restarts on the same data):

    D/fleet.json               the layout: per process name, role, id, pid, endpoint, command, config
    D/zookeeper/               zoo.cfg, log4j.properties, data/, zookeeper.log
    D/<name>/<name>.properties each service's config (rewritten on every `up`)
    D/<name>/logs/             storage nodes' log.dirs
    D/logs/<name>.log          each process's stdout+stderr

Port plan from base port P (see ROLES): gateway-1 on P, ZooKeeper on P+1, gateway-i (i >= 2) on
P+i, controller-i on P+9+i with its PUB on P+19+i, group-coordinator-i on P+29+i, offset-manager-i
on P+39+i, transaction-coordinator-i on P+69+i, storage-i (broker.id i) on P+100+i. Gateway-i's
Kafka listeners, on the fleet's host (127.0.0.1 as in Kafka's quickstart): PLAINTEXT on P+49+i
(gateway-1: `kcat -b 127.0.0.1:P+50 -L`), SASL_SSL (SCRAM-SHA-256/512 over TLS) on P+59+i
(gateway-1: `kcat -F D/security/kafka-client.conf -L`). Each service's Prometheus endpoint
(`metrics.port`) is its port + 200: gateway-1 on P+200, storage-i on P+300+i, ...; `status()`
gives each process's `metrics_endpoint`, and `write_prometheus_config()` writes
D/prometheus.yml naming them all (role, name and host as labels).

Python API (tests use it; the CLI in deploy/fleet_cli.py is a thin layer over it):

    with Fleet(tmp_path, base_port) as fleet:      # always stops everything on exit
        fleet.up()                                  # returns once every process is ready
        fleet.status()                              # {"processes": [...], "controller": .., "partitions": [..]}
        fleet.stop("storage-2", kill=True); fleet.start("storage-2")
        fleet.gateway_endpoint, fleet.zk_connect
        fleet.client_config()                       # the SDK's security keyword arguments

Security: CURVE by default (`security_protocol="NONE"` to turn it off): every service gets its
own keypair, clients the `client` keypair, ZooKeeper digest credentials and znode ACLs
(deploy/fleet_security.py). Either way the gateways' SASL_SSL listeners get a TLS CA and
certificates, and `up` creates the SCRAM user `kafka-client` (granted what the client key has)
and writes D/security/kafka-client.conf: librdkafka properties for it (bootstrap.servers,
security.protocol, sasl.*, ssl.ca.location). `status()["security"]` names the files a client
needs; after `up()` the RIVERBED_* variables in this process's environment point at them.

`role_modules={"storage_node": "pkg.module" | "/path/to/script.py"}` replaces a role's program
(tests' stand-ins: tests/integration/fake_service.py). Adding a role is one entry in ROLES.

Roles, ports and config templates: deploy/fleet_roles.py; ACLs, the SCRAM user and client settings:
deploy/fleet_access.py; the status's cluster view: deploy/cluster_view.py (re-exported here);
readiness beyond open ports (the gateways listing each other): deploy/fleet_ready.py.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from deploy.process import (LaunchError, is_alive, is_ours, port_accepts, send_signal, spawn,
                            stop_all, tail, wait_for)
from deploy.cluster_view import ClusterView
from deploy.fleet_access import FleetAccess
from deploy.fleet_ready import wait_gateways_know_each_other
from deploy.fleet_roles import (  # noqa: F401 - re-exported: deploy.fleet's names
    KAFKA_LISTENER_PORTS, METRICS_PORT_OFFSET, OFFSETS_TOPIC_NUM_PARTITIONS, PORT_SPAN, ROLES,
    SESSION_TIMEOUT_MS, TRANSACTION_STATE_NUM_PARTITIONS, ConfigContext, RoleSpec, free_base_port,
    kafka_listeners)
from deploy.fleet_security import ClientEnv, FleetSecurity
from deploy.prometheus import scrape_config, target_of
from deploy.zookeeper import ZooKeeperServer, ruok

log = logging.getLogger(__name__)

__all__ = ["Fleet", "FleetError", "free_base_port", "PORT_SPAN", "ProcessRecord", "RoleSpec", "ROLES", "ZK_CHROOT",
           "parse_config_overrides", "STATE_FILE"]

STATE_FILE = "fleet.json"
STATE_VERSION = 1
ZK_NAME = "zookeeper"
ZK_ROLE = "zookeeper"
ZK_PORT_OFFSET = 1
ZK_CHROOT = "/riverbed"
READY_TIMEOUT_S = 30.0
# Services get this long after SIGTERM before SIGKILL: enough to close a ZooKeeper session
# and flush logs; a storage node that needs longer is a bug to fix, not a timeout to raise.
STOP_GRACE_S = 10.0


class FleetError(LaunchError):
    """The fleet cannot do what was asked (already running, port taken, unknown name...)."""


def parse_config_overrides(items: Iterable[str] | None) -> dict[str, dict[str, str]]:
    """["storage_node:log.segment.bytes=1024", "storage-2:port=1"] -> {target: {key: value}}.
    A target is a role (`storage_node`, `storage-node`) or a process name (`storage-2`)."""
    out: dict[str, dict[str, str]] = {}
    for item in items or []:
        target, sep, pair = item.partition(":")
        key, eq, value = pair.partition("=")
        if not sep or not eq or not target.strip() or not key.strip():
            raise FleetError(f"config override {item!r} is not ROLE:key=value")
        out.setdefault(target.strip(), {})[key.strip()] = value.strip()
    return out


# --- records ------------------------------------------------------------------------------------

@dataclasses.dataclass
class ProcessRecord:
    name: str
    role: str
    id: int | None
    port: int
    endpoint: str
    command: list[str]
    config: str | None         # path of its .properties (zoo.cfg for ZooKeeper)
    log: str                   # stdout+stderr
    pid: int | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)  # e.g. pub_endpoint

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "ProcessRecord":
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in obj.items() if k in fields})


def _write_properties(path: pathlib.Path, props: Mapping[str, str], header: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"# {header}", "# Written by `riverbed fleet up`; rewritten on every up."]
    lines += [f"{k}={v}" for k, v in props.items()]
    path.write_text("\n".join(lines) + "\n")


def _atomic_write_json(path: pathlib.Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2) + "\n")
    os.replace(tmp, path)


# --- the fleet ----------------------------------------------------------------------------------

class Fleet(FleetAccess):
    def __init__(self, data_dir: str | os.PathLike, base_port: int, *, storage_nodes: int = 3,
                 controllers: int = 2, gateways: int = 1, counts: Mapping[str, int] | None = None,
                 config_overrides: Mapping[str, Mapping[str, str]] | Iterable[str] | None = None,
                 role_modules: Mapping[str, str] | None = None, python: str | None = None,
                 host: str = "127.0.0.1", ready_timeout_s: float = READY_TIMEOUT_S,
                 stop_grace_s: float = STOP_GRACE_S, zk_heap_mb: int = 256,
                 security_protocol: str = "CURVE"):
        self.data_dir = pathlib.Path(data_dir).resolve()
        # CURVE unless NONE is asked for: keys, trusted keys and ZooKeeper credentials under
        # D/security (deploy/fleet_security.py); up() exports the client settings (RIVERBED_*)
        # into this process's environment, down() puts the old values back.
        self.security = FleetSecurity(self.data_dir, security_protocol)
        self._client_env = ClientEnv()
        self.base_port = int(base_port)
        self.host = host
        self.python = python or sys.executable
        self.ready_timeout_s = ready_timeout_s
        self.stop_grace_s = stop_grace_s
        self.zk_heap_mb = zk_heap_mb
        self.counts = {role: spec.default_count for role, spec in ROLES.items()}
        self.counts.update({"controller": controllers, "storage_node": storage_nodes,
                            "gateway": gateways})
        for role, n in (counts or {}).items():
            if role not in ROLES:
                raise FleetError(f"unknown role {role!r}; known: {', '.join(ROLES)}")
            self.counts[role] = n
        for role, n in self.counts.items():
            if not 0 <= n <= ROLES[role].max_count:
                raise FleetError(f"{role}: {n} processes asked, 0..{ROLES[role].max_count} allowed")
        if isinstance(config_overrides, Mapping):
            self.config_overrides = {k: dict(v) for k, v in config_overrides.items()}
        else:
            self.config_overrides = parse_config_overrides(config_overrides)
        self.role_modules = dict(role_modules or {})
        for role in self.role_modules:
            if role not in ROLES:
                raise FleetError(f"role_modules: unknown role {role!r}")
        self._check_override_targets()
        self._records: dict[str, ProcessRecord] = {}
        self._popen: dict[str, subprocess.Popen] = {}
        self._zk_view: "ClusterView | None" = None
        self._load_or_plan()

    # --- layout ---------------------------------------------------------------------------
    @property
    def state_path(self) -> pathlib.Path:
        return self.data_dir / STATE_FILE

    @property
    def zk_port(self) -> int:
        return self.base_port + ZK_PORT_OFFSET

    @property
    def zk_connect(self) -> str:
        """The services' `zookeeper.connect`, chroot included."""
        return f"{self.host}:{self.zk_port}{ZK_CHROOT}"

    @property
    def gateway_endpoint(self) -> str | None:
        gws = [r for r in self._records.values() if r.role == "gateway"]
        return gws[0].endpoint if gws else None

    @property
    def kafka_bootstrap_servers(self) -> str | None:
        """host:port of every gateway's PLAINTEXT Kafka listener, comma-separated (Kafka
        clients' bootstrap.servers), or None without gateways."""
        return self._kafka_bootstrap("PLAINTEXT")

    @property
    def kafka_sasl_ssl_bootstrap_servers(self) -> str | None:
        """host:port of every gateway's SASL_SSL Kafka listener (kafka-client.conf's)."""
        return self._kafka_bootstrap("SASL_SSL")

    def _kafka_bootstrap(self, protocol: str) -> str | None:
        out = [li.split("://", 1)[1] for r in self._records.values() if r.role == "gateway"
               for li in r.extra.get("kafka_listeners", ()) if li.startswith(f"{protocol}://")]
        return ",".join(out) or None

    def names(self) -> list[str]:
        return list(self._records)

    def process(self, name: str) -> ProcessRecord:
        try:
            return self._records[name]
        except KeyError:
            raise FleetError(f"no process named {name!r}; known: {', '.join(self._records)}") from None

    def _check_override_targets(self) -> None:
        names = {f"{spec.prefix}-{i}" for role, spec in ROLES.items()
                 for i in range(1, self.counts[role] + 1)}
        for target in self.config_overrides:
            if target not in names and target.replace("-", "_") not in ROLES:
                raise FleetError(f"config override for unknown role or process {target!r}")

    def _overrides_for(self, role: str, name: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for target, kv in self.config_overrides.items():
            if target.replace("-", "_") == role:
                out.update(kv)
        out.update(self.config_overrides.get(name, {}))
        return out

    def _command(self, role: str, config_path: pathlib.Path) -> list[str]:
        program = self.role_modules.get(role, ROLES[role].module)
        if program.endswith(".py"):
            return [self.python, str(pathlib.Path(program).resolve()), "--config", str(config_path)]
        return [self.python, "-m", program, "--config", str(config_path)]

    def _zk_server(self) -> ZooKeeperServer:
        return ZooKeeperServer(self.data_dir / "zookeeper", self.zk_port, host=self.host,
                               heap_mb=self.zk_heap_mb,
                               log_path=self.data_dir / "logs" / "zookeeper.log")

    def _plan(self) -> dict[str, ProcessRecord]:
        """The processes this fleet is made of, in start order (configs are not written yet)."""
        if not 1 <= self.base_port or self.base_port + PORT_SPAN > 65535:
            raise FleetError(f"base port {self.base_port} leaves no room for the port plan (P..P+399)")
        plan: dict[str, ProcessRecord] = {}
        zk = self._zk_server()
        try:
            zk_cmd = zk.command()
        except LaunchError:
            zk_cmd = []  # reported by up(); status/down still work without Java
        plan[ZK_NAME] = ProcessRecord(
            name=ZK_NAME, role=ZK_ROLE, id=None, port=self.zk_port,
            endpoint=f"{self.host}:{self.zk_port}", command=zk_cmd, config=str(zk.config_path),
            log=str(zk.log_path))
        for role, spec in ROLES.items():
            for i in range(1, self.counts[role] + 1):
                name = f"{spec.prefix}-{i}"
                ports = {k: self.base_port + off for k, off in spec.port_offsets(i).items()}
                ports["metrics.port"] = ports["port"] + METRICS_PORT_OFFSET
                workdir = self.data_dir / name
                cfg_path = workdir / f"{name}.properties"
                extra = {"ports": ports}
                if "pub.port" in ports:
                    extra["pub_endpoint"] = f"tcp://{self.host}:{ports['pub.port']}"
                if kafka_listeners(self.host, ports):
                    extra["kafka_listeners"] = kafka_listeners(self.host, ports)
                extra["metrics_endpoint"] = f"http://{self.host}:{ports['metrics.port']}/metrics"
                plan[name] = ProcessRecord(
                    name=name, role=role, id=i, port=ports["port"],
                    endpoint=f"tcp://{self.host}:{ports['port']}",
                    command=self._command(role, cfg_path), config=str(cfg_path),
                    log=str(self.data_dir / "logs" / f"{name}.log"), extra=extra)
        return plan

    def _config_for(self, rec: ProcessRecord) -> dict[str, str]:
        spec = ROLES[rec.role]
        ctx = ConfigContext(index=rec.id or 0, host=self.host, ports=rec.extra["ports"],
                            workdir=self.data_dir / rec.name, zk_connect=self.zk_connect,
                            role_counts=self.counts)
        props = spec.config(ctx)
        props.update(self.security.service_properties(rec.name))
        if "kafka.sasl_ssl.port" in ctx.ports:
            props.update(self.security.kafka_listener_properties(rec.name))
        props.update(self._overrides_for(rec.role, rec.name))
        return props

    def configs(self) -> dict[str, dict[str, str]]:
        """Each service's config (Kafka keys), as `up` writes it; ZooKeeper's is not included."""
        return {r.name: self._config_for(r) for r in self._records.values() if r.role != ZK_ROLE}

    def write_configs(self) -> None:
        (self.data_dir / "logs").mkdir(parents=True, exist_ok=True)
        for name, props in self.configs().items():
            rec = self._records[name]
            (self.data_dir / name).mkdir(parents=True, exist_ok=True)
            _write_properties(pathlib.Path(rec.config), props,
                              f"{name} ({rec.role}) of the fleet in {self.data_dir}")
        self.write_prometheus_config()

    @property
    def prometheus_config_path(self) -> pathlib.Path:
        return self.data_dir / "prometheus.yml"

    def write_prometheus_config(self) -> pathlib.Path:
        """D/prometheus.yml: every service's metrics endpoint, labelled by role, name, host."""
        targets = [target_of(r.name, r.role, r.extra["metrics_endpoint"], self.host)
                   for r in self._records.values() if r.extra.get("metrics_endpoint")]
        path = self.prometheus_config_path
        path.write_text(scrape_config(targets))
        return path

    def _load_or_plan(self) -> None:
        self._records = self._plan()
        # Keep PIDs of a fleet already running here so status/down/stop/start can find them.
        prev = self._read_state()
        if prev:
            for obj in prev.get("processes", []):
                old = ProcessRecord.from_json(obj)
                cur = self._records.get(old.name)
                if cur is not None and old.pid and is_ours(old.pid, old.command):
                    cur.pid = old.pid
                    cur.command = old.command

    def _read_state(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, json.JSONDecodeError) as e:
            raise FleetError(f"cannot read {self.state_path}: {e}") from None

    def save(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        _atomic_write_json(self.state_path, {
            "version": STATE_VERSION, "base_port": self.base_port, "host": self.host,
            "zk_connect": self.zk_connect, "gateway_endpoint": self.gateway_endpoint,
            "counts": self.counts, "security_protocol": self.security.protocol,
            "processes": [r.to_json() for r in self._records.values()]})

    @classmethod
    def from_state(cls, data_dir: str | os.PathLike, **kw) -> "Fleet":
        """The fleet recorded in `data_dir/fleet.json` (for down/status/stop/start)."""
        path = pathlib.Path(data_dir) / STATE_FILE
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError:
            raise FleetError(f"no fleet in {data_dir} (no {STATE_FILE}): start one with "
                             "`riverbed fleet up`") from None
        except (OSError, json.JSONDecodeError) as e:
            raise FleetError(f"cannot read {path}: {e}") from None
        counts = {k: v for k, v in state.get("counts", {}).items() if k in ROLES}
        fleet = cls(data_dir, state["base_port"], host=state.get("host", "127.0.0.1"),
                    storage_nodes=counts.pop("storage_node", 0),
                    controllers=counts.pop("controller", 0), gateways=counts.pop("gateway", 0),
                    counts=counts, **{"security_protocol": state.get("security_protocol", "NONE"),
                                      **kw})
        # The recorded layout wins over a fresh plan (commands may name other modules).
        fleet._records = {}
        for obj in state.get("processes", []):
            rec = ProcessRecord.from_json(obj)
            if rec.pid and not is_ours(rec.pid, rec.command):
                rec.pid = None
            fleet._records[rec.name] = rec
        return fleet

    # --- lifecycle ------------------------------------------------------------------------
    def is_up(self, name: str) -> bool:
        """The process is ours, alive, and answers on its port (`ruok` for ZooKeeper)."""
        rec = self.process(name)
        if not self._alive(rec):
            return False
        if rec.role == ZK_ROLE:
            return ruok(self.host, rec.port)
        return port_accepts(self.host, rec.port)

    def _alive(self, rec: ProcessRecord) -> bool:
        p = self._popen.get(rec.name)
        if p is not None and p.pid == rec.pid:
            return p.poll() is None
        return bool(rec.pid) and is_ours(rec.pid, rec.command)

    def running(self) -> list[str]:
        return [n for n, r in self._records.items() if self._alive(r)]

    def _check_ports_free(self, recs: Iterable[ProcessRecord]) -> None:
        for rec in recs:
            ports = rec.extra.get("ports", {"port": rec.port}) if rec.role != ZK_ROLE else {"port": rec.port}
            for key, port in ports.items():
                if port_accepts(self.host, port, 0.2):
                    raise FleetError(f"port {port} ({rec.name} {key}) is already in use on "
                                     f"{self.host}; choose another --base-port")

    def up(self, detach: bool = True, *, on_status: Callable[["Fleet"], None] | None = None) -> None:
        """Start ZooKeeper, then each role in ROLES order; return once all are ready.
        With detach=False, then block until SIGINT/SIGTERM and stop everything (see run())."""
        running = self.running()
        if running:
            raise FleetError(f"a fleet is already running in {self.data_dir} ({', '.join(running)}):"
                             " run `riverbed fleet down` first")
        zk = self._zk_server()
        self._records[ZK_NAME].command = zk.command()  # raises with "run `make install`"
        self._check_ports_free(self._records.values())
        self.security.ensure(self._service_endpoints())
        self.security.ensure_kafka_tls(self._kafka_tls_names())
        self.write_configs()
        self.save()
        # From here on this process's own clients (the live view, health, the grant below) use
        # this fleet's key, whatever RIVERBED_* it inherited (down() puts it back).
        self._client_env.export(self.security.client_env())
        try:
            self._spawn(self._records[ZK_NAME], zk=zk)
            self.wait_up(ZK_NAME)
            self._ensure_chroot()
            self._grant_operator()
            self._ensure_kafka_user()
            for role in ROLES:
                group = [r for r in self._records.values() if r.role == role]
                for rec in group:
                    self._spawn(rec)
                for rec in group:
                    self.wait_up(rec.name)
            if "gateway" not in self.role_modules:   # (a test's stand-in answers no METADATA)
                wait_gateways_know_each_other(self._records.values(), self.ready_timeout_s,
                                              alive=lambda: not self._check_still_alive())
            self._check_still_alive()
        except BaseException:
            self.down()
            raise
        if not detach:
            self.run(on_status=on_status)

    def _check_still_alive(self) -> None:
        """A process that answered on its port and died while later ones started (e.g. another
        of its ports was taken) fails up() too, with its log's tail, rather than leaving a
        fleet with a hole in it."""
        for rec in self._records.values():
            if rec.pid and not self._alive(rec):
                raise LaunchError(f"{rec.name} ({rec.role}, pid {rec.pid}) exited after it was "
                                  f"ready; last lines of {rec.log}:\n" + tail(pathlib.Path(rec.log)))

    def _service_endpoints(self) -> dict[str, list[str]]:
        """Each service's endpoints (its ROUTER, and its PUB if any): in its certificate."""
        return {r.name: [r.endpoint] + ([r.extra["pub_endpoint"]] if r.extra.get("pub_endpoint")
                                        else [])
                for r in self._records.values() if r.role != ZK_ROLE}

    def _spawn(self, rec: ProcessRecord, zk: ZooKeeperServer | None = None) -> None:
        if rec.role == ZK_ROLE:
            zk = zk or self._zk_server()
            zk.write_config()
        proc = spawn(rec.command, pathlib.Path(rec.log), cwd=self.data_dir / (
            "zookeeper" if rec.role == ZK_ROLE else rec.name))
        self._popen[rec.name] = proc
        rec.pid = proc.pid
        self.save()

    def wait_up(self, name: str, timeout_s: float | None = None) -> None:
        """Wait until `name` is up (LaunchError with its log's tail if it dies or times out)."""
        rec = self.process(name)
        wait_for(lambda: self.is_up(name), lambda: self._alive(rec),
                 timeout_s=timeout_s or self.ready_timeout_s,
                 what=f"{name} ({rec.role}, pid {rec.pid}, {rec.endpoint})",
                 log_path=pathlib.Path(rec.log))

    def stop(self, name: str, kill: bool = False) -> bool:
        """SIGTERM `name` (SIGKILL with kill=True) and wait until it is gone. False if it was
        not running."""
        rec = self.process(name)
        if not self._alive(rec):
            rec.pid = None
            self.save()
            return False
        stop_all([(rec.pid, self._popen.get(name))], grace_s=self.stop_grace_s, kill_only=kill)
        self._popen.pop(name, None)
        rec.pid = None
        self.save()
        return True

    def signal(self, name: str, sig: int) -> None:
        """Send any signal (e.g. SIGSTOP/SIGCONT for fault tests) to a running process."""
        rec = self.process(name)
        if not self._alive(rec):
            raise FleetError(f"{name} is not running")
        send_signal(rec.pid, sig)  # type: ignore[arg-type]

    def start(self, name: str, wait: bool = True) -> int:
        """(Re)start one process with its recorded command and config; returns its pid."""
        rec = self.process(name)
        if self._alive(rec):
            return rec.pid  # type: ignore[return-value]
        if not rec.command:
            raise FleetError(f"{name} has no recorded command")
        self._spawn(rec)
        if wait:
            self.wait_up(name)
        return rec.pid  # type: ignore[return-value]

    def down(self) -> list[str]:
        """Stop everything: gateways first, ..., controllers, then ZooKeeper. Returns the names
        that needed SIGKILL after the grace period."""
        if self._zk_view is not None:
            self._zk_view.close()
            self._zk_view = None
        self._client_env.restore()
        groups = [[r for r in self._records.values() if r.role == role] for role in reversed(ROLES)]
        groups.append([self._records[ZK_NAME]] if ZK_NAME in self._records else [])
        killed: list[str] = []
        for group in groups:
            live = [r for r in group if self._alive(r)]
            if live:
                pids = stop_all([(r.pid, self._popen.get(r.name)) for r in live],
                                grace_s=self.stop_grace_s)
                killed += [r.name for r in live if r.pid in pids]
            for r in group:
                self._popen.pop(r.name, None)
                r.pid = None
        if self.data_dir.exists():
            self.save()
        return killed

    # --- status ---------------------------------------------------------------------------
    def status(self, *, with_zk: bool = True) -> dict[str, Any]:
        """{"processes":[{name, role, id, pid, endpoint, up}], "controller": id|None,
        "partitions":[{topic, partition, leader, isr}]}"""
        procs = []
        for rec in self._records.values():
            alive = self._alive(rec)
            procs.append({"name": rec.name, "role": rec.role, "id": rec.id,
                          "pid": rec.pid if alive else None, "endpoint": rec.endpoint,
                          "metrics_endpoint": rec.extra.get("metrics_endpoint"),
                          "up": alive and self.is_up(rec.name)})
            if rec.role == "gateway":
                procs[-1]["kafka_listeners"] = rec.extra.get("kafka_listeners", [])
        controller, partitions = None, []
        zk_up = any(p["up"] for p in procs if p["role"] == ZK_ROLE)
        if with_zk and zk_up:
            if self._zk_view is None:
                self._zk_view = ClusterView(self.zk_connect)
            controller, partitions = self._zk_view.read()
        return {"processes": procs, "controller": controller, "partitions": partitions,
                "security": self.security.describe()}

    # --- foreground -----------------------------------------------------------------------
    def run(self, *, on_status: Callable[["Fleet"], None] | None = None,
            interval_s: float = 1.0) -> None:
        """Block until SIGINT or SIGTERM, calling `on_status(self)` every `interval_s`, then
        stop everything. The processes run in their own sessions, so the terminal's Ctrl-C
        reaches only this launcher, which then stops them once, in order. Also returns once
        no process of the fleet is alive any more (`fleet down` from another shell); one
        stopped with `fleet stop NAME` keeps the launcher watching the rest."""
        stop_requested = []

        def _on_term(signum, frame):
            stop_requested.append(signum)
            raise KeyboardInterrupt

        old_term = signal.signal(signal.SIGTERM, _on_term)
        try:
            while True:
                if on_status is not None:
                    on_status(self)
                if not self.running():
                    break
                time.sleep(interval_s)
        except KeyboardInterrupt:
            pass
        finally:
            # No second interrupt may leave processes behind: ignore both until all are gone.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            try:
                self.down()
            finally:
                signal.signal(signal.SIGTERM, old_term)
                signal.signal(signal.SIGINT, signal.default_int_handler)

    # --- context manager ------------------------------------------------------------------
    def __enter__(self) -> "Fleet":
        return self

    def __exit__(self, *exc) -> None:
        self.down()
