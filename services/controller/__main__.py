"""`python -m services.controller --config FILE [--override key=value ...]`

Arguments -> ControllerConfig -> ControllerService(core + shell).run(). A bad config is an
error naming the key and exit code 2; SIGTERM stops cleanly with exit code 0.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from services.common.config import ConfigError, build, load_properties, parse_overrides
from services.controller.config import ControllerConfig


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="riverbed-controller",
                                description="Riverbed controller (cluster metadata, elections)")
    p.add_argument("--config", help="a .properties file with Kafka controller keys")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="set one config key (repeatable); wins over --config")
    p.add_argument("--log-level", default="INFO")
    return p.parse_args(argv)


def load_config(args: argparse.Namespace) -> ControllerConfig:
    props = load_properties(args.config) if args.config else {}
    return build(ControllerConfig, props, parse_overrides(args.override))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.INFO),
                        stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    try:
        cfg = load_config(args)
    except (ConfigError, OSError) as e:
        print(f"riverbed-controller: bad config: {e}", file=sys.stderr)
        return 2
    from services.controller.shell.service import ControllerService
    return asyncio.run(ControllerService(cfg).run())


if __name__ == "__main__":
    sys.exit(main())
