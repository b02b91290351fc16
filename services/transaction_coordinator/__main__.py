"""`python -m services.transaction_coordinator --config FILE [--override key=value ...]`
(riverbed-transaction-coordinator).

Arguments -> TransactionCoordinatorConfig -> TransactionCoordinatorService(core + shell).run(stop),
through services.common.service_main: a bad config is an error naming the key and exit code 2;
SIGTERM stops cleanly with exit code 0; a crash exits 1.
"""
from __future__ import annotations

import asyncio
import sys

from services.common.service_main import run_service
from services.transaction_coordinator.config import TransactionCoordinatorConfig
from services.transaction_coordinator.shell.service import TransactionCoordinatorService


async def _serve(cfg: TransactionCoordinatorConfig, stop: asyncio.Event) -> None:
    await TransactionCoordinatorService(cfg).run(stop)


def main(argv: list[str] | None = None) -> int:
    return run_service(argv, prog="riverbed-transaction-coordinator",
                       description="Riverbed transaction coordinator (transactional producers)",
                       config_class=TransactionCoordinatorConfig, serve=_serve,
                       logger_name="services.transaction_coordinator")


if __name__ == "__main__":
    sys.exit(main())
