"""tests/deploy: the Ansible roles against real SSH hosts (see test_deploy_hosts.py)."""
from __future__ import annotations

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Remember a failed stage: the deployment tests run in order, each on the ones before."""
    outcome = yield
    rep = outcome.get_result()
    state = getattr(item.module, "State", None)
    if rep.when == "call" and rep.failed and state is not None:
        state.failed_stage = item.name
