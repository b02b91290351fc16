"""`python -m services.offset_manager --config FILE [--override key=value ...]`
(riverbed-offset-manager).

Arguments -> OffsetManagerConfig -> OffsetManagerService(core + shell).run(stop), through
services.common.service_main: a bad config is an error naming the key and exit code 2; SIGTERM
stops cleanly with exit code 0; a crash exits 1.
"""
from __future__ import annotations

import asyncio
import sys

from services.common.service_main import run_service
from services.offset_manager.config import OffsetManagerConfig
from services.offset_manager.shell.service import OffsetManagerService


async def _serve(cfg: OffsetManagerConfig, stop: asyncio.Event) -> None:
    await OffsetManagerService(cfg).run(stop)


def main(argv: list[str] | None = None) -> int:
    return run_service(argv, prog="riverbed-offset-manager",
                       description="Riverbed offset manager (committed offsets)",
                       config_class=OffsetManagerConfig, serve=_serve,
                       logger_name="services.offset_manager")


if __name__ == "__main__":
    sys.exit(main())
