"""Network faults between the test bed's hosts (deploy_testbed.py), each a context manager that
undoes itself on exit, also when the block fails. Only what this kernel offers (RECIPES.md):
blackhole routes inside a host's namespace, `tc ... tbf`, and nftables rules (the `nft` tool,
Debian's nftables, from `make system`); never netem, prio or tc's drop action.

    with isolate(bed, h):                  # h reaches nobody and nobody reaches h
    with cut(bed, [h4], [h3, h5]):         # both ways between each pair, everything else kept
    with one_way(bed, h5, h4):             # h5's packets to h4 are dropped; h4 -> h5 still flows
    with slow_link(bed, h5, "256kbit"):    # everything to and from h5 through a token bucket
    with ports_dropped(bed, h3, [2181, 2888, 3888]):   # one service of a host cut off (TCP ports)

A blackhole route drops what a host sends to one address; a cut is one each way. The client
namespace (the SDK clients, the ring's agent) counts as a peer of every host.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from deploy_testbed import CLIENT_ADDRESS, Host, TestBed, run


def _blackhole(ns: str, address: str, on: bool) -> None:
    r = run(["ip", "-n", ns, "route", "add" if on else "del", "blackhole", f"{address}/32"],
            check=False)
    if on and r.returncode != 0:
        raise RuntimeError(f"ip -n {ns} route add blackhole {address}: {r.stderr.strip()}")


@contextlib.contextmanager
def _routes(pairs: Sequence[tuple[str, str]]) -> Iterator[None]:
    """Blackhole routes (namespace, destination address); every one removed on exit."""
    done: list[tuple[str, str]] = []
    try:
        for ns, address in pairs:
            _blackhole(ns, address, True)
            done.append((ns, address))
        yield
    finally:
        for ns, address in reversed(done):
            _blackhole(ns, address, False)


def _peers(bed: TestBed, host: Host) -> list[tuple[str, str]]:
    """(namespace, address) of every other host and of the client namespace."""
    return [(h.netns, h.address) for h in bed.hosts if h is not host] + [(bed.client_ns, CLIENT_ADDRESS)]


@contextlib.contextmanager
def isolate(bed: TestBed, host: Host) -> Iterator[None]:
    """`host` cut off from every other host and from the clients, both ways."""
    pairs = []
    for ns, address in _peers(bed, host):
        pairs += [(host.netns, address), (ns, host.address)]
    with _routes(pairs):
        yield


@contextlib.contextmanager
def cut(bed: TestBed, side_a: Sequence[Host], side_b: Sequence[Host]) -> Iterator[None]:
    """Every host of side_a cut off from every host of side_b, both ways; all else flows."""
    pairs = []
    for a in side_a:
        for b in side_b:
            pairs += [(a.netns, b.address), (b.netns, a.address)]
    with _routes(pairs):
        yield


@contextlib.contextmanager
def one_way(bed: TestBed, src: Host, dst: Host) -> Iterator[None]:
    """What `src` sends to `dst` is dropped; `dst`'s packets still reach `src` (so no TCP
    connection between them works, but each side sees a different failure)."""
    with _routes([(src.netns, dst.address)]):
        yield


def _hub_veth(bed: TestBed, host: Host) -> str:
    """The hub's end of the host's veth pair: its egress is everything sent to the host."""
    return f"{bed.tag}v{bed.hosts.index(host) + 1}"


@contextlib.contextmanager
def slow_link(bed: TestBed, host: Host, rate: str = "256kbit", burst: str = "32kbit",
              latency: str = "400ms") -> Iterator[None]:
    """The host's link through a token bucket both ways: its eth0's egress (what it sends) and
    the hub's end of its veth (what it receives)."""
    devices = [(["ip", "netns", "exec", host.netns], "eth0"),
               (["ip", "netns", "exec", bed.hub], _hub_veth(bed, host))]
    done = []
    try:
        for prefix, dev in devices:
            run([*prefix, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate,
                 "burst", burst, "latency", latency])
            done.append((prefix, dev))
        yield
    finally:
        for prefix, dev in reversed(done):
            run([*prefix, "tc", "qdisc", "del", "dev", dev, "root"], check=False)


NFT_TABLE = "riverbed_fault"


@contextlib.contextmanager
def ports_dropped(bed: TestBed, host: Host, ports: Sequence[int]) -> Iterator[None]:
    """Every TCP packet into or out of `host` with one of `ports` at either end is dropped
    (nftables, in the host's namespace): the services listening there are cut off from
    everyone, the host's other services are not."""
    ns = ["ip", "netns", "exec", host.netns, "nft"]
    portset = "{ " + ", ".join(str(int(p)) for p in ports) + " }"
    run([*ns, "add", "table", "inet", NFT_TABLE])
    try:
        for chain, hook in (("in", "input"), ("out", "output")):
            run([*ns, "add", "chain", "inet", NFT_TABLE, chain,
                 f"{{ type filter hook {hook} priority 0 ; policy accept ; }}"])
            for end in ("sport", "dport"):
                run([*ns, "add", "rule", "inet", NFT_TABLE, chain, "tcp", end, portset, "drop"])
        yield
    finally:
        run([*ns, "delete", "table", "inet", NFT_TABLE], check=False)


def unavailable_reason() -> str | None:
    """Why ports_dropped cannot work here (None: it can)."""
    import shutil
    if shutil.which("nft") is None:
        return "nft is not installed (make system installs Debian's nftables)"
    return None
