"""`python -m services.storage_node --config FILE [--override key=value ...]`
(riverbed-storage-node).

Arguments -> StorageNodeConfig -> StorageNode(core + shell).run(stop), through
services.common.service_main: a bad config is an error naming the key and exit code 2; SIGTERM
stops cleanly with exit code 0.
"""
from __future__ import annotations

import asyncio
import sys

from services.common.service_main import run_service
from services.storage_node.config import StorageNodeConfig


async def _serve(cfg: StorageNodeConfig, stop: asyncio.Event) -> int:
    from services.storage_node.shell.node import StorageNode
    return await StorageNode(cfg).run(stop)


def main(argv: list[str] | None = None) -> int:
    return run_service(argv, prog="riverbed-storage-node",
                       description="Riverbed storage node (Kafka's broker role)",
                       config_help="a .properties file with Kafka broker keys",
                       config_class=StorageNodeConfig, serve=_serve,
                       logger_name="services.storage_node")


if __name__ == "__main__":
    sys.exit(main())
