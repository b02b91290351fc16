"""`riverbed fleet ...`: the command line over deploy.fleet.Fleet.

sdk/riverbed/cli.py imports this module lazily and calls `add_fleet_commands(subparsers)`.
Building the parser imports nothing heavy; each command imports deploy.fleet when it runs.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import Any

DEFAULT_DATA_DIR = os.environ.get("RIVERBED_FLEET_DIR", "run")
DEFAULT_BASE_PORT = 9092


def add_fleet_commands(subparsers: "argparse._SubParsersAction") -> argparse.ArgumentParser:
    fleet = subparsers.add_parser(
        "fleet", help="run a local fleet: ZooKeeper, controllers, storage nodes, gateways",
        description="Start, inspect and stop a local Riverbed fleet whose state lives in one "
                    "directory (fleet.json, configs, data, logs/<name>.log).")
    fleet.set_defaults(func=lambda args: (fleet.print_help(), 2)[1])
    sub = fleet.add_subparsers(dest="fleet_command", metavar="COMMAND")

    def data_dir(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, metavar="D",
                       help="the fleet's state directory (default: %(default)s; "
                            "env RIVERBED_FLEET_DIR)")

    up = sub.add_parser(
        "up", help="start the fleet (foreground with a live status view, or --detach)",
        description="Start ZooKeeper, then controllers, storage nodes and gateways; each is "
                    "ready when its port accepts connections. Reuses the data in D (a restart). "
                    "In the foreground, Ctrl-C or SIGTERM stops everything in order. Ports: "
                    "gateway-1 P, ZooKeeper P+1, controller-i P+9+i (PUB P+19+i), "
                    "group-coordinator-i P+29+i, offset-manager-i P+39+i, transaction-coordinator-i "
                    "P+69+i, storage-i P+100+i; gateway-i's Kafka listeners PLAINTEXT P+49+i and "
                    "SASL_SSL P+59+i (SCRAM over TLS: the user kafka-client, whose librdkafka "
                    "properties `up` writes to D/security/kafka-client.conf for `kcat -F`).")
    data_dir(up)
    up.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT, metavar="P",
                    help="first port of the port plan (default: %(default)s)")
    up.add_argument("--detach", action="store_true",
                    help="return once everything is ready; stop later with `fleet down`")
    up.add_argument("--storage-nodes", type=int, default=3, metavar="N", help="default: 3")
    up.add_argument("--controllers", type=int, default=2, metavar="N", help="default: 2")
    up.add_argument("--gateways", type=int, default=1, metavar="N", help="default: 1")
    up.add_argument("--config-override", action="append", default=[], metavar="ROLE:KEY=VALUE",
                    help="add or replace a config key for a role (storage_node, controller, "
                         "gateway) or one process (storage-2); repeatable")
    up.add_argument("--role-module", action="append", default=[], metavar="ROLE=MODULE",
                    help="run ROLE with another module or .py script (for tests); repeatable")
    up.add_argument("--security-protocol", choices=("CURVE", "NONE"), default="CURVE",
                    type=str.upper,
                    help="CURVE (default): every socket encrypted and authenticated, a keypair "
                         "per service and a client keypair under D/security, ZooKeeper digest "
                         "credentials and znode ACLs; `riverbed fleet status --json` names the "
                         "client's key files. NONE: plaintext, anyone may connect")
    up.add_argument("--ready-timeout", type=float, default=30.0, metavar="S",
                    help="seconds each process gets to become ready (default: %(default)s)")
    up.set_defaults(func=cmd_up)

    down = sub.add_parser("down", help="stop a fleet (gateways first, ZooKeeper last)",
                          description="Stop every process recorded in D/fleet.json that is "
                                      "still the process the launcher started.")
    data_dir(down)
    down.set_defaults(func=cmd_down)

    status = sub.add_parser("status", help="show processes, the active controller and leaders",
                            description="Each process (name, role, id, pid, endpoint, up; a "
                                        "gateway's kafka_listeners) and, "
                                        "when ZooKeeper is up, the active controller and the "
                                        "leader and ISR of every partition.")
    data_dir(status)
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    status.set_defaults(func=cmd_status)

    stop = sub.add_parser("stop", help="stop one process (SIGTERM, or SIGKILL with --kill)",
                          description="Stop one process of a running fleet by name "
                                      "(e.g. storage-2) and wait until it is gone.")
    stop.add_argument("name")
    data_dir(stop)
    stop.add_argument("--kill", action="store_true", help="SIGKILL instead of SIGTERM")
    stop.set_defaults(func=cmd_stop)

    start = sub.add_parser("start", help="start one stopped process again",
                           description="Restart one process with its recorded command and "
                                       "config, wait until it is ready, record its new pid.")
    start.add_argument("name")
    data_dir(start)
    start.set_defaults(func=cmd_start)
    return fleet


def _quiet_kazoo(verbose: bool = False) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not verbose:
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)


def _fail(msg: str) -> int:
    print(f"riverbed fleet: {msg}", file=sys.stderr)
    return 1


def cmd_up(args: argparse.Namespace) -> int:
    from deploy.fleet import Fleet, parse_config_overrides
    from deploy.process import LaunchError
    _quiet_kazoo()
    try:
        role_modules = {}
        for item in args.role_module:
            role, eq, module = item.partition("=")
            if not eq:
                return _fail(f"--role-module {item!r} is not ROLE=MODULE")
            role_modules[role.strip().replace("-", "_")] = module.strip()
        fleet = Fleet(args.data_dir, args.base_port, storage_nodes=args.storage_nodes,
                      controllers=args.controllers, gateways=args.gateways,
                      config_overrides=parse_config_overrides(args.config_override),
                      role_modules=role_modules, ready_timeout_s=args.ready_timeout,
                      security_protocol=args.security_protocol)
        print(f"starting the fleet in {fleet.data_dir} (ZooKeeper {fleet.zk_connect})",
              file=sys.stderr, flush=True)
        fleet.up(detach=True)
    except LaunchError as e:
        return _fail(str(e))
    except KeyboardInterrupt:
        return _fail("interrupted while starting; everything started was stopped")
    if args.detach:
        # People read stderr; scripts take the endpoint from stdout: GW=$(riverbed fleet up ...)
        print(f"fleet is up (state in {fleet.data_dir}; stop with `riverbed fleet down "
              f"--data-dir {args.data_dir}`); gateway:", file=sys.stderr, flush=True)
        print(fleet.gateway_endpoint or "", flush=True)
        _print_client_settings(fleet)
        return 0
    print(f"fleet is up; gateway: {fleet.gateway_endpoint}; Ctrl-C stops it", file=sys.stderr,
          flush=True)
    _print_client_settings(fleet)
    if sys.stdout.isatty():
        _run_live(fleet)
    else:
        _run_plain(fleet)
    print("fleet stopped", file=sys.stderr, flush=True)
    return 0


def _print_client_settings(fleet) -> None:
    """How to point clients at the fleet (stderr: people; the env lines are sourceable): Kafka
    clients at the gateways' PLAINTEXT listeners or, with kafka-client.conf, their SASL_SSL
    ones; SDK clients of a CURVE fleet at its keys."""
    kafka = fleet.kafka_bootstrap_servers
    if kafka:
        print(f"Kafka clients: bootstrap.servers={kafka} (e.g. kcat -b {kafka} -L); see "
              "docs/kafka-protocol.md", file=sys.stderr, flush=True)
    if fleet.kafka_sasl_ssl_bootstrap_servers and fleet.security.kafka_client_conf.exists():
        print(f"Kafka clients over SASL_SSL: {fleet.kafka_sasl_ssl_bootstrap_servers} as user "
              f"kafka-client (kcat -F {fleet.security.kafka_client_conf} -L)", file=sys.stderr,
              flush=True)
    if not fleet.security.curve:
        return
    print("clients: export these (or use --command-config "
          f"{fleet.security.client_properties_file}):", file=sys.stderr)
    for k, v in fleet.security.client_env().items():
        print(f"  export {k}={v}", file=sys.stderr)
    sys.stderr.flush()


def _run_live(fleet) -> None:
    from rich.console import Console, Group
    from rich.live import Live
    from rich.table import Table

    console = Console()

    def render():
        st = fleet.status()
        procs = Table(title=f"Riverbed fleet — {fleet.data_dir}", expand=False)
        for col in ("name", "role", "id", "pid", "endpoint", "state"):
            procs.add_column(col)
        for p in st["processes"]:
            procs.add_row(p["name"], p["role"], "" if p["id"] is None else str(p["id"]),
                          "" if p["pid"] is None else str(p["pid"]), p["endpoint"],
                          "[green]up[/]" if p["up"] else "[red]down[/]")
        parts = Table(title=f"active controller: {st['controller'] if st['controller'] is not None else '—'}")
        for col in ("topic", "partition", "leader", "isr"):
            parts.add_column(col)
        for p in st["partitions"]:
            parts.add_row(p["topic"], str(p["partition"]),
                          "none" if p["leader"] is None else str(p["leader"]),
                          ",".join(map(str, p["isr"])))
        kafka = fleet.kafka_bootstrap_servers
        return Group(procs, parts, f"gateway {fleet.gateway_endpoint}"
                     + (f", Kafka clients: {kafka}" if kafka else "") + " — Ctrl-C stops the fleet")

    with Live(render(), console=console, refresh_per_second=1, transient=False) as live:
        fleet.run(on_status=lambda f: live.update(render()), interval_s=1.0)


def _run_plain(fleet) -> None:
    last: dict[str, Any] = {}

    def report(f) -> None:
        st = f.status()
        now = time.strftime("%H:%M:%S")
        for p in st["processes"]:
            state = "up" if p["up"] else "down"
            if last.get(p["name"]) != state:
                print(f"{now} {p['name']:<14} {p['role']:<13} pid={p['pid']} "
                      f"{p['endpoint']} {state}", flush=True)
                last[p["name"]] = state
        if last.get("controller", "unset") != st["controller"]:
            print(f"{now} active controller: {st['controller']}", flush=True)
            last["controller"] = st["controller"]
        leaders = {(p["topic"], p["partition"]): p["leader"] for p in st["partitions"]}
        for (topic, part), leader in sorted(leaders.items()):
            key = f"leader:{topic}-{part}"
            if last.get(key, "unset") != leader:
                print(f"{now} {topic}-{part} leader: {leader}", flush=True)
                last[key] = leader

    fleet.run(on_status=report, interval_s=1.0)


def _load(args):
    from deploy.fleet import Fleet
    _quiet_kazoo()
    return Fleet.from_state(args.data_dir)


def cmd_down(args: argparse.Namespace) -> int:
    from deploy.process import LaunchError
    try:
        fleet = _load(args)
        running = fleet.running()
        killed = fleet.down()
    except LaunchError as e:
        return _fail(str(e))
    print(f"stopped {len(running)} process(es)" + (f"; SIGKILLed after the grace period: "
                                                   f"{', '.join(killed)}" if killed else ""))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from deploy.process import LaunchError
    try:
        fleet = _load(args)
        st = fleet.status()
        if fleet._zk_view is not None:
            fleet._zk_view.close()
    except LaunchError as e:
        return _fail(str(e))
    if args.json:
        print(json.dumps(st, indent=2))
        return 0
    print(f"{'NAME':<20} {'ROLE':<14} {'ID':>3} {'PID':>8}  {'ENDPOINT':<24} STATE")
    for p in st["processes"]:
        print(f"{p['name']:<20} {p['role']:<14} {'' if p['id'] is None else p['id']:>3} "
              f"{'' if p['pid'] is None else p['pid']:>8}  {p['endpoint']:<24} "
              f"{'up' if p['up'] else 'down'}")
    print(f"active controller: {st['controller'] if st['controller'] is not None else 'none'}")
    sec = st.get("security", {})
    print(f"security.protocol: {sec.get('security_protocol', 'NONE')}"
          + (f"; client settings: {sec['client_properties']}" if sec.get("client_properties") else ""))
    for p in st["partitions"]:
        print(f"  {p['topic']}-{p['partition']}: leader {p['leader']} isr {p['isr']}")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    from deploy.process import LaunchError
    try:
        fleet = _load(args)
        was = fleet.stop(args.name, kill=args.kill)
    except LaunchError as e:
        return _fail(str(e))
    print(f"{args.name} {'killed' if args.kill else 'stopped'}" if was
          else f"{args.name} was not running")
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    from deploy.process import LaunchError
    try:
        fleet = _load(args)
        pid = fleet.start(args.name)
    except LaunchError as e:
        return _fail(str(e))
    print(f"{args.name} up, pid {pid}")
    return 0
