"""`python -m services.offset_manager --config FILE [--override key=value ...]`
(riverbed-offset-manager)."""
from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from services.common.config import ConfigError, build, load_properties, parse_overrides
from services.offset_manager.config import OffsetManagerConfig
from services.offset_manager.shell.service import OffsetManagerService


def parse_config(argv: list[str] | None) -> OffsetManagerConfig:
    parser = argparse.ArgumentParser(prog="riverbed-offset-manager",
                                     description="Riverbed offset manager (committed offsets)")
    parser.add_argument("--config", help="a .properties file")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    props = load_properties(args.config) if args.config else {}
    return build(OffsetManagerConfig, props, parse_overrides(args.override))


async def _run(cfg: OffsetManagerConfig) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await OffsetManagerService(cfg).run(stop)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    try:
        cfg = parse_config(argv)
    except (ConfigError, OSError) as e:
        print(f"riverbed-offset-manager: bad config: {e}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_run(cfg))
    except Exception:
        logging.getLogger("services.offset_manager").exception("offset manager failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
