"""`python -m services.group_coordinator --config FILE [--override key=value ...]`
(riverbed-group-coordinator).

Arguments -> GroupCoordinatorConfig -> GroupCoordinatorService(core + shell).run(stop), through
services.common.service_main: a bad config is an error naming the key and exit code 2; SIGTERM
stops cleanly with exit code 0; a crash exits 1.
"""
from __future__ import annotations

import asyncio
import sys

from services.common.service_main import run_service
from services.group_coordinator.config import GroupCoordinatorConfig
from services.group_coordinator.shell.service import GroupCoordinatorService


async def _serve(cfg: GroupCoordinatorConfig, stop: asyncio.Event) -> None:
    await GroupCoordinatorService(cfg).run(stop)


def main(argv: list[str] | None = None) -> int:
    return run_service(argv, prog="riverbed-group-coordinator",
                       description="Riverbed group coordinator (consumer groups)",
                       config_class=GroupCoordinatorConfig, serve=_serve,
                       logger_name="services.group_coordinator")


if __name__ == "__main__":
    sys.exit(main())
