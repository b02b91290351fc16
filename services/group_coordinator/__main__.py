"""`python -m services.group_coordinator --config FILE [--override key=value ...]`
(riverbed-group-coordinator)."""
from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from services.common.config import ConfigError, build, load_properties, parse_overrides
from services.group_coordinator.config import GroupCoordinatorConfig
from services.group_coordinator.shell.service import GroupCoordinatorService


def parse_config(argv: list[str] | None) -> GroupCoordinatorConfig:
    parser = argparse.ArgumentParser(prog="riverbed-group-coordinator",
                                     description="Riverbed group coordinator (consumer groups)")
    parser.add_argument("--config", help="a .properties file")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    props = load_properties(args.config) if args.config else {}
    return build(GroupCoordinatorConfig, props, parse_overrides(args.override))


async def _run(cfg: GroupCoordinatorConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await GroupCoordinatorService(cfg).run(stop)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    try:
        cfg = parse_config(argv)
    except (ConfigError, OSError) as e:
        print(f"riverbed-group-coordinator: bad config: {e}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_run(cfg))
    except Exception:
        logging.getLogger("services.group_coordinator").exception("group coordinator failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
