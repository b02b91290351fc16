"""`python -m services.storage_node --config FILE [--override key=value ...]`

Arguments -> StorageNodeConfig -> StorageNode(core + shell).run(). A bad config is an error
naming the key and exit code 2; SIGTERM stops cleanly with exit code 0.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from services.common.config import ConfigError, build, load_properties, parse_overrides
from services.storage_node.config import StorageNodeConfig


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="riverbed-storage-node",
                                description="Riverbed storage node (Kafka's broker role)")
    p.add_argument("--config", help="a .properties file with Kafka broker keys")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="set one config key (repeatable); wins over --config")
    p.add_argument("--log-level", default="INFO")
    return p.parse_args(argv)


def load_config(args: argparse.Namespace) -> StorageNodeConfig:
    props = load_properties(args.config) if args.config else {}
    return build(StorageNodeConfig, props, parse_overrides(args.override))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.INFO),
                        stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        cfg = load_config(args)
    except (ConfigError, OSError) as e:
        print(f"riverbed-storage-node: bad config: {e}", file=sys.stderr)
        return 2
    from services.storage_node.shell.node import StorageNode
    return asyncio.run(StorageNode(cfg).run())


if __name__ == "__main__":
    sys.exit(main())
