"""`python -m services.controller --config FILE [--override key=value ...]` (riverbed-controller).

Arguments -> ControllerConfig -> ControllerService(core + shell).run(stop), through
services.common.service_main: a bad config is an error naming the key and exit code 2; SIGTERM
stops cleanly with exit code 0.
"""
from __future__ import annotations

import asyncio
import sys

from services.common.service_main import run_service
from services.controller.config import ControllerConfig


async def _serve(cfg: ControllerConfig, stop: asyncio.Event) -> int:
    from services.controller.shell.service import ControllerService
    return await ControllerService(cfg).run(stop)


def main(argv: list[str] | None = None) -> int:
    return run_service(argv, prog="riverbed-controller",
                       description="Riverbed controller (cluster metadata, elections)",
                       config_help="a .properties file with Kafka controller keys",
                       config_class=ControllerConfig, serve=_serve,
                       logger_name="services.controller")


if __name__ == "__main__":
    sys.exit(main())
