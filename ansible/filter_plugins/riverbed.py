"""Filters that turn the inventory into Riverbed's services, with the local fleet's own templates.

The `.properties` keys and values come from `deploy.fleet.ROLES[role].config(...)`, the very
functions `riverbed fleet up` writes its files with, so a host and a local fleet are configured
one way; the Prometheus scrape configuration comes from `deploy.prometheus.scrape_config`.
Ansible runs on the control machine from the project's virtualenv (the checkout is installed
there), so `deploy` is importable; the repository root is added to sys.path as a fallback.

    services = inventory_hostname | riverbed_host_services(hostvars, groups, settings)
    text = groups['all'] | riverbed_scrape_config(hostvars, groups, settings)
    plan = groups['all'] | riverbed_key_plan(hostvars, groups, settings)
    missing = acls_list_stdout | riverbed_missing_acl_grants(['User:operator', 'User:client'])
    bundle = inventory_hostname | riverbed_host_key_bundle(hostvars, groups, settings, keys_dir, 'operator')

`settings` is a dict of the shared variables (see roles/riverbed_common/defaults/main.yml):
ports, metrics_port_offset, data_dir, config_dir, log_dir, zookeeper_client_port,
zookeeper_chroot, config_overrides, config_omit (keys left out), venv, security_protocol (CURVE
unless NONE is asked for), keys_dir (a host's key directory) and kafka_listeners (the gateways' Kafka listeners by security
protocol, SASL_SSL unless told otherwise; their ports are riverbed_ports.gateway's kafka.port
for PLAINTEXT and kafka.sasl_ssl.port for SASL_SSL). The security keys of a service's
.properties come from the local fleet's deploy/fleet_security.py, rooted at keys_dir.
"""
from __future__ import annotations

import pathlib
import re
import sys
from collections.abc import Mapping
from typing import Any

try:
    from deploy.fleet import KAFKA_LISTENER_PORTS, ROLES, ConfigContext, kafka_listeners
    from deploy.fleet_security import CLIENT_GRANTS as FLEET_CLIENT_GRANTS
    from deploy.fleet_security import TLS_CA_CERT, FleetSecurity
    from deploy.prometheus import scrape_config, target_of
except ImportError:  # ansible-playbook run by a Python without the project installed
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    from deploy.fleet import KAFKA_LISTENER_PORTS, ROLES, ConfigContext, kafka_listeners
    from deploy.fleet_security import CLIENT_GRANTS as FLEET_CLIENT_GRANTS
    from deploy.fleet_security import TLS_CA_CERT, FleetSecurity
    from deploy.prometheus import scrape_config, target_of

# Start order on a host (the fleet's ROLES order); stop order is the reverse.
SERVICE_ROLES = tuple(ROLES)


class RiverbedInventoryError(ValueError):
    """The inventory cannot describe a fleet (a storage node without an id, ...)."""


def _hv(hostvars: Mapping, host: str) -> Mapping:
    return hostvars[host] if host in hostvars else {}


def host_address(hostvars: Mapping, host: str) -> str:
    return str(_hv(hostvars, host).get("ansible_host", host))


def zk_connect(hostvars: Mapping, groups: Mapping, settings: Mapping) -> str:
    zk_hosts = list(groups.get("zookeeper", []))
    if not zk_hosts:
        raise RiverbedInventoryError("the inventory has no host in group 'zookeeper'")
    port = int(settings.get("zookeeper_client_port", 2181))
    return ",".join(f"{host_address(hostvars, h)}:{port}" for h in zk_hosts) + str(
        settings.get("zookeeper_chroot", "/riverbed"))


def service_id(hostvars: Mapping, groups: Mapping, role: str, host: str) -> int:
    """The id of `role`'s process on `host` (a storage node's: its first instance's)."""
    if role == "storage_node":
        return int(storage_instances(hostvars, host, 0)[0]["node_id"])
    hv = _hv(hostvars, host)
    ids = hv.get("riverbed_ids") or {}
    if ids.get(role) is not None:
        return int(ids[role])
    return list(groups[role]).index(host) + 1


def storage_instances(hostvars: Mapping, host: str, base_port: int) -> list[dict[str, Any]]:
    """The storage-node processes `host` runs: [{node_id, port, mounts}], in start order.

    Without `riverbed_storage_instances`: one, with `riverbed_node_id` as broker.id, the role's
    port and every data disk of the host. With it (a host with many cores and disks runs one
    process per disk, each with its own broker.id, ports and log dirs): each entry names its
    `node_id`, the `data_disks` (mount points of `riverbed_data_disks`) that hold its log dirs
    (none: its work dir's logs/), and optionally its `port` (default: the role's port + its
    place in the list; its metrics port follows its port). A disk may serve one instance only."""
    hv = _hv(hostvars, host)
    disks = [str(d["mount"]).rstrip("/") for d in (hv.get("riverbed_data_disks") or [])]
    listed = hv.get("riverbed_storage_instances")
    if not listed:
        if hv.get("riverbed_node_id") is None:
            raise RiverbedInventoryError(f"storage node {host} has no riverbed_node_id (broker.id)")
        return [{"node_id": int(hv["riverbed_node_id"]), "port": int(base_port), "mounts": disks}]
    out: list[dict[str, Any]] = []
    taken: dict[str, int] = {}
    for i, inst in enumerate(listed):
        if not isinstance(inst, Mapping) or inst.get("node_id") is None:
            raise RiverbedInventoryError(
                f"{host}: riverbed_storage_instances[{i}] has no node_id (broker.id)")
        node_id = int(inst["node_id"])
        mounts = [str(m).rstrip("/") for m in (inst.get("data_disks") or [])]
        for m in mounts:
            if m not in disks:
                raise RiverbedInventoryError(
                    f"{host}: storage instance {node_id} names data disk {m}, which is not one "
                    f"of riverbed_data_disks ({', '.join(disks) or 'none'})")
            if m in taken:
                raise RiverbedInventoryError(
                    f"{host}: data disk {m} is named by storage instances {taken[m]} and "
                    f"{node_id}: give each instance its own disks")
            taken[m] = node_id
        out.append({"node_id": node_id, "port": int(inst.get("port") or int(base_port) + i),
                    "mounts": mounts})
    for what in ("node_id", "port"):
        values = [inst[what] for inst in out]
        if len(set(values)) != len(values):
            raise RiverbedInventoryError(f"{host}: two storage instances share a {what}: {values}")
    return out


def storage_node_ids(hosts: list[str], hostvars: Mapping) -> list[int]:
    """Every storage node id (broker.id) of `hosts` (e.g. groups['storage_node']), in order."""
    return [int(inst["node_id"]) for h in hosts for inst in storage_instances(hostvars, h, 0)]


def host_security(settings: Mapping) -> FleetSecurity:
    """The local fleet's key layout rooted at a host's key directory (settings keys_dir)."""
    keys_dir = pathlib.Path(str(settings.get("keys_dir") or f"{settings['config_dir']}/keys"))
    return FleetSecurity(keys_dir, str(settings.get("security_protocol") or "CURVE"), root=keys_dir)


def _kafka_protocols(settings: Mapping) -> list[str]:
    wanted = [str(p).upper() for p in (settings.get("kafka_listeners") or ["SASL_SSL"])]
    known = [proto for proto, _ in KAFKA_LISTENER_PORTS]
    for p in wanted:
        if p not in known:
            raise RiverbedInventoryError(f"riverbed_kafka_listeners: {p} is not one of "
                                         f"{', '.join(known)}")
    return wanted


def host_services(host: str, hostvars: Mapping, groups: Mapping, settings: Mapping) -> list[dict[str, Any]]:
    """The Riverbed processes `host` runs, in start order, each with its rendered properties."""
    ports_by_role = settings["ports"]
    security = host_security(settings)
    offset = int(settings.get("metrics_port_offset", 200))
    counts = {role: len(groups.get(role, [])) for role in SERVICE_ROLES}
    counts["storage_node"] = len(storage_node_ids(list(groups.get("storage_node", [])), hostvars))
    overrides = settings.get("config_overrides") or {}
    address = host_address(hostvars, host)
    connect = zk_connect(hostvars, groups, settings)
    out = []
    processes: list[tuple[str, int, dict[str, int], list[str] | None]] = []
    for role in SERVICE_ROLES:
        if host not in groups.get(role, []):
            continue
        base = {k: int(v) for k, v in ports_by_role[role].items()}
        if role == "storage_node":   # one process per instance (one per data disk, say)
            for inst in storage_instances(hostvars, host, base["port"]):
                processes.append((role, inst["node_id"], {**base, "port": inst["port"]},
                                  inst["mounts"]))
        else:
            processes.append((role, service_id(hostvars, groups, role, host), base, None))
    for role, index, ports, mounts in processes:
        spec = ROLES[role]
        name = f"{spec.prefix}-{index}"
        if role == "gateway":      # only the Kafka listeners asked for (SASL_SSL by default)
            for proto, key in KAFKA_LISTENER_PORTS:
                if proto not in _kafka_protocols(settings):
                    ports.pop(key, None)
        ports["metrics.port"] = ports["port"] + offset
        workdir = f"{settings['data_dir']}/{name}"
        ctx = ConfigContext(index=index, host=address, ports=ports, workdir=pathlib.Path(workdir),
                            zk_connect=connect, role_counts=counts)
        props = dict(spec.config(ctx))
        if role == "storage_node":
            props["log.dirs"] = ",".join([f"{m}/logs" for m in mounts or []] or [f"{workdir}/logs"])
            # the host is a failure domain: replicas of a partition go to distinct racks
            props["broker.rack"] = str(_hv(hostvars, host).get("riverbed_rack") or host)
        # as Fleet._config_for: the role's template, the security keys, then the overrides
        props.update(security.service_properties(name))
        if "kafka.sasl_ssl.port" in ports:
            props.update(security.kafka_listener_properties(name))
        for target, kv in overrides.items():
            if str(target).replace("-", "_") == role:
                props.update({str(k): str(v) for k, v in kv.items()})
        props.update({str(k): str(v) for k, v in (overrides.get(name) or {}).items()})
        for target, keys in (settings.get("config_omit") or {}).items():
            if str(target).replace("-", "_") == role or str(target) == name:
                for k in keys or ():
                    props.pop(str(k), None)
        out.append({
            "name": name, "role": role, "id": index, "module": spec.module, "host": address,
            "port": ports["port"], "metrics_port": ports["metrics.port"],
            "config": f"{settings['config_dir']}/{name}.properties", "workdir": workdir,
            # in its certificate: clients look a server's public key up by these (the fleet's
            # Fleet._service_endpoints: its ROUTER, and its metadata PUB if any)
            "endpoints": [f"tcp://{address}:{ports['port']}"]
                         + ([f"tcp://{address}:{ports['pub.port']}"] if "pub.port" in ports else []),
            "log": f"{settings['log_dir']}/{name}.log",
            "log_dirs": props.get("log.dirs", "").split(",") if role == "storage_node" else [],
            "kafka_listeners": kafka_listeners(address, ports) if role == "gateway" else [],
            # The local fleet's command (Fleet._command): python -m <module> --config FILE.
            "argv": [f"{settings.get('venv', '/opt/riverbed/venv')}/bin/python", "-m", spec.module,
                     "--config", f"{settings['config_dir']}/{name}.properties"],
            "properties": props})
    return out


def all_services(hosts: list[str], hostvars: Mapping, groups: Mapping, settings: Mapping) -> list[dict[str, Any]]:
    return [s for h in hosts for s in host_services(h, hostvars, groups, settings)]


def key_plan(hosts: list[str], hostvars: Mapping, groups: Mapping, settings: Mapping) -> dict[str, list[str]]:
    """{service name: its endpoints} for every service on `hosts`: the keypairs the control
    machine keeps (`python -m deploy.fleet_security ensure --services ...`). A name twice (two
    hosts claiming one id) is an inventory error: they would share a key."""
    plan: dict[str, list[str]] = {}
    for s in all_services(hosts, hostvars, groups, settings):
        if s["name"] in plan:
            raise RiverbedInventoryError(f"two hosts run {s['name']}: give each its own id")
        plan[s["name"]] = list(s["endpoints"])
    return plan


# `riverbed acls --list` prints a header per resource, then one line per entry.
_ACL_RESOURCE = re.compile(r"resourceType=(\w+), name=(.*), patternType=(\w+)\)")
_ACL_ENTRY = re.compile(r"\(principal=([^,]+), host=([^,]+), operation=([^,]+), permissionType=([^)]+)\)")
# What the local fleet grants its client key (deploy/fleet_security.py CLIENT_GRANTS: every
# operation on every topic, group and transactional id, and the cluster), with the
# `riverbed acls --add` flags naming each resource.
_ACL_FLAGS = {"Topic": "--topic", "Group": "--group", "TransactionalId": "--transactional-id"}
CLIENT_GRANTS = tuple((rtype, name, [_ACL_FLAGS[rtype], name] if rtype in _ACL_FLAGS else ["--cluster"])
                      for rtype, name in FLEET_CLIENT_GRANTS)


def kafka_tls_plan(hosts: list[str], hostvars: Mapping, groups: Mapping, settings: Mapping) -> dict[str, list[str]]:
    """{gateway name: [the address it advertises]} for every gateway with a SASL_SSL listener:
    the certificates the control machine keeps (`python -m deploy.fleet_security kafka-tls`)."""
    return {s["name"]: [s["host"]] for s in all_services(hosts, hostvars, groups, settings)
            if any(li.startswith("SASL_SSL://") for li in s["kafka_listeners"])}


def kafka_bootstrap(hosts: list[str], hostvars: Mapping, groups: Mapping, settings: Mapping,
                    protocol: str = "SASL_SSL") -> str:
    """host:port of every gateway's `protocol` Kafka listener (a client's bootstrap.servers)."""
    return ",".join(li.split("://", 1)[1] for s in all_services(hosts, hostvars, groups, settings)
                    for li in s["kafka_listeners"] if li.startswith(f"{protocol}://"))


def missing_acl_grants(acls_list_stdout: str, principals: list[str]) -> list[dict[str, Any]]:
    """The (principal, resource) grants of CLIENT_GRANTS (ALLOW All from any host, literal) that
    `riverbed acls --list` output does not show yet, each with the `riverbed acls --add` argv
    tail that adds it: so the grant step changes nothing once done."""
    have: set[tuple[str, str, str]] = set()
    resource = None
    for line in str(acls_list_stdout).splitlines():
        m = _ACL_RESOURCE.search(line)
        if m:
            resource = (m.group(1), m.group(2)) if m.group(3).upper() == "LITERAL" else None
            continue
        m = _ACL_ENTRY.search(line)
        if m and resource is not None and m.group(2) == "*" and m.group(3) == "All" \
                and m.group(4).upper() == "ALLOW":
            have.add((m.group(1), *resource))
    out = []
    for principal in principals:
        for rtype, name, flags in CLIENT_GRANTS:
            if (principal, rtype, name) not in have:
                out.append({"principal": principal, "resource": f"{rtype}:{name}",
                            "argv": ["--allow-principal", principal, "--operation", "All", *flags]})
    return out


def scrape_config_text(hosts: list[str], hostvars: Mapping, groups: Mapping, settings: Mapping) -> str:
    """The Prometheus scrape configuration for every service on `hosts` (deploy/prometheus.py)."""
    targets = [target_of(s["name"], s["role"], f"http://{s['host']}:{s['metrics_port']}/metrics", s["host"])
               for s in all_services(hosts, hostvars, groups, settings)]
    return scrape_config(targets)


def properties_text(service: Mapping[str, Any]) -> str:
    lines = [f"# {service['name']} ({service['role']}) -- managed by Ansible (roles/riverbed_service);",
             "# the same keys `riverbed fleet up` writes (deploy/fleet.py). Local edits are overwritten."]
    lines += [f"{k}={v}" for k, v in service["properties"].items()]
    return "\n".join(lines) + "\n"


def host_key_bundle(host: str, hostvars: Mapping, groups: Mapping, settings: Mapping,
                    keys_dir: str, operator_key: str, tools_properties: str = "tools.properties") -> dict[str, Any]:
    """`host`'s share of the control machine's key directory `keys_dir`, as the JSON
    `python -m deploy.fleet_security sync` installs on the host in one step: every public
    certificate, the secret keys of the host's own processes and of the operator key, the
    ZooKeeper credentials, and the tools' client properties (the operator key). Read on the
    control machine (filters run there)."""
    root = pathlib.Path(str(keys_dir))
    services = host_services(host, hostvars, groups, settings)
    # the TLS of its gateways' SASL_SSL listeners (whatever the security protocol)
    tls_gateways = [s["name"] for s in services
                    if any(li.startswith("SASL_SSL://") for li in s["kafka_listeners"])]
    keystores = {f"{n}.pem": (root / "private" / f"{n}.pem").read_text() for n in tls_gateways}
    ca = {TLS_CA_CERT: (root / TLS_CA_CERT).read_text()} if tls_gateways else {}
    if str(settings.get("security_protocol") or "CURVE") != "CURVE":
        return {"certificates": {}, "private": keystores, "files": ca}
    certs = {p.name: p.read_text() for p in sorted((root / "certificates").glob("*.key"))}
    names = [s["name"] for s in services] + [str(operator_key)]
    secrets = {f"{n}.key_secret": (root / "private" / f"{n}.key_secret").read_text() for n in names}
    files = {"zookeeper.credentials": (root / "zookeeper.credentials").read_text(),
             str(tools_properties): client_properties_text(settings, operator_key), **ca}
    return {"certificates": certs, "private": {**secrets, **keystores}, "files": files}


def client_properties_text(settings: Mapping, key_name: str) -> str:
    """A client properties file (`--command-config`, RIVERBED_CLIENT_PROPERTIES) for key
    `key_name` on a host: FleetSecurity.client_properties rooted at the host's key directory."""
    props = host_security(settings).client_properties(str(key_name))
    return (f"# the `riverbed` tools on this host, as User:{key_name} -- managed by Ansible\n"
            + "".join(f"{k}={v}\n" for k, v in props.items()))


def reassign_json_lines(stdout: str) -> list[dict]:
    """The JSON documents `riverbed partitions reassign --generate` prints (current, proposed)."""
    import json
    return [json.loads(line) for line in str(stdout).splitlines() if line.strip().startswith("{")]


def storage_racks(hosts: list[str], hostvars: Mapping) -> dict[int, str]:
    """node id -> broker.rack (the host's riverbed_rack, else its name) of every storage node."""
    return {int(inst["node_id"]): str(_hv(hostvars, h).get("riverbed_rack") or h)
            for h in hosts for inst in storage_instances(hostvars, h, 0)}


def decommission_plan(current: Mapping[str, Any], node_id: int | list[int],
                      remaining: list[int], racks: Mapping[int, str] | None = None) -> dict[str, Any]:
    """A reassignment (Kafka's JSON) that moves every replica off `node_id` (one id, or the
    list of a host's storage instances), each to the remaining storage node with the fewest
    replicas that does not already hold that partition, keeping each partition's replica count
    and the replica's place in the list (so a preferred leader stays preferred where it was not
    a node leaving). With `racks` (node -> broker.rack), a node in a rack that already holds a
    replica of the partition is taken only when no other is left. Only partitions that change
    are listed. Raises RiverbedInventoryError when a partition would fall below its replication
    factor."""
    leaving = sorted({int(n) for n in (node_id if isinstance(node_id, (list, tuple)) else [node_id])})
    nodes = sorted({int(n) for n in remaining} - set(leaving))
    parts = [(str(p["topic"]), int(p["partition"]), [int(r) for r in p["replicas"]])
             for p in current.get("partitions", [])]
    load = {n: 0 for n in nodes}
    for _, _, replicas in parts:
        for r in replicas:
            if r in load:
                load[r] += 1
    moves = []
    what = ("storage node " + str(leaving[0]) if len(leaving) == 1
            else "storage nodes " + ",".join(map(str, leaving)))
    for topic, partition, replicas in sorted(parts):
        if not set(leaving) & set(replicas):
            continue
        new = list(replicas)
        for i, r in enumerate(replicas):
            if r not in leaving:
                continue
            candidates = [n for n in nodes if n not in new]
            if racks:
                held = {racks.get(x) for x in new if x not in leaving}
                candidates = [n for n in candidates if racks.get(n) not in held] or candidates
            if not candidates:
                raise RiverbedInventoryError(
                    f"refusing to decommission {what}: {topic}-{partition} has replication "
                    f"factor {len(replicas)} and only {len(nodes)} other storage node(s) "
                    f"({','.join(map(str, nodes)) or 'none'}) remain")
            target = min(candidates, key=lambda n: (load[n], n))
            load[target] += 1
            new[i] = target
        moves.append({"topic": topic, "partition": partition, "replicas": new})
    return {"version": 1, "partitions": moves}


class FilterModule:
    def filters(self):
        return {"riverbed_host_services": host_services, "riverbed_all_services": all_services,
                "riverbed_zk_connect": zk_connect, "riverbed_scrape_config": scrape_config_text,
                "riverbed_properties_text": properties_text,
                "riverbed_reassign_json_lines": reassign_json_lines,
                "riverbed_decommission_plan": decommission_plan,
                "riverbed_storage_node_ids": storage_node_ids,
                "riverbed_storage_racks": storage_racks,
                "riverbed_key_plan": key_plan, "riverbed_client_properties_text": client_properties_text,
                "riverbed_host_key_bundle": host_key_bundle, "riverbed_missing_acl_grants": missing_acl_grants,
                "riverbed_kafka_tls_plan": kafka_tls_plan, "riverbed_kafka_bootstrap": kafka_bootstrap}
