"""tests/deploy: the Ansible roles against real SSH hosts (see test_deploy_hosts.py) and the
network-fault ring on the same deployment (test_netfault_ring.py).

`deployment` is one test bed for the whole session (deployment.py): built at its first use, the
fleet deployed by test_deploy_hosts.py's first stage (or by the ring when it runs alone), and
torn down as soon as no test of tests/deploy follows, so the rest of the run does not share the
machine with eighteen idle services. Set RIVERBED_DEPLOY_REPO=DIR to deploy another source tree
(e.g. `git archive <commit> | tar -x -C DIR`): the "before" figures of the ring.
"""
from __future__ import annotations

import json
import os
import pathlib

import pytest

HERE = pathlib.Path(__file__).resolve().parent
_OPEN: list = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Remember a failed stage: the deployment tests run in order, each on the ones before."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and HERE in pathlib.Path(str(item.fspath)).parents:
        for d in _OPEN:
            d.failed = True
    state = getattr(item.module, "State", None)
    if rep.when == "call" and rep.failed and state is not None:
        state.failed_stage = item.name


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    if _OPEN and (nextitem is None or HERE not in pathlib.Path(str(nextitem.fspath)).parents):
        while _OPEN:
            _OPEN.pop().close()


def pytest_terminal_summary(terminalreporter):
    """The network-fault ring's figures per case (test_netfault_ring.py), when it ran."""
    import sys
    ring = sys.modules.get("test_netfault_ring")
    rows = getattr(ring, "RESULTS", None)
    if not rows:
        return
    tr = terminalreporter
    tr.section("netfault ring")
    tr.write_line(f"{'case':28} {'acked':>6} {'lost':>4} {'dup':>3} {'ooo':>3} {'gap s':>6} "
                  f"{'p-gap s':>7} {'min ISR':>7} {'full ISR after heal s':>21}")
    for r in rows:
        full = "-" if r["full_isr_after_heal_s"] is None else f"{r['full_isr_after_heal_s']:.2f}"
        tr.write_line(f"{r['case']:28} {r['acked']:6d} {r['lost']:4d} {r['duplicates']:3d} "
                      f"{r['out_of_order']:3d} {r['longest_ack_gap_s']:6.2f} "
                      f"{r['longest_partition_ack_gap_s']:7.2f} {str(r['min_isr_during']):>7} {full:>21}")


@pytest.fixture(scope="session")
def deployment():
    from deploy_testbed import REPO, unavailable_reason
    from deployment import Deployment

    reason = unavailable_reason()
    if reason:
        pytest.skip(f"deployment test bed unavailable: {reason}")
    # RIVERBED_DEPLOY_VARS: JSON inventory variables on top (e.g. '{"riverbed_config_omit":
    # {"gateway": ["listeners"]}}' for a build from before the Kafka listener)
    d = Deployment(repo=pathlib.Path(os.environ.get("RIVERBED_DEPLOY_REPO") or REPO),
                   extra_vars=json.loads(os.environ.get("RIVERBED_DEPLOY_VARS") or "{}"))
    _OPEN.append(d)
    try:
        d.build()
        yield d
    finally:
        if d in _OPEN:
            _OPEN.remove(d)
        d.close()
