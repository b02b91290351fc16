"""`python -m services.gateway --config FILE [--override key=value ...]` (riverbed-gateway).

Arguments -> GatewayConfig -> Gateway(core + shell).run(stop), through
services.common.service_main: a bad config is an error naming the key and exit code 2; SIGTERM
stops cleanly with exit code 0; a crash exits 1.
"""
from __future__ import annotations

import asyncio
import sys

from services.common.service_main import run_service
from services.gateway.config import GatewayConfig
from services.gateway.shell.gateway import Gateway


async def _serve(cfg: GatewayConfig, stop: asyncio.Event) -> None:
    await Gateway(cfg).run(stop)


def main(argv: list[str] | None = None) -> int:
    return run_service(argv, prog="riverbed-gateway",
                       description="Riverbed gateway (client-facing, stateless)",
                       config_class=GatewayConfig, serve=_serve, logger_name="services.gateway")


if __name__ == "__main__":
    sys.exit(main())
