"""Set the fleet's ACL on every existing znode (Kafka's zookeeper-security-migration).

    python -m services.common.zk_security --zookeeper.connect HOST:PORT/riverbed \\
        --credentials-file zookeeper.credentials [--unsecure]

Secure (default): `digest:<user>` ALL + `world:anyone` READ on the chroot and everything under
it, so only sessions with the fleet's credentials may change them. `--unsecure`: back to
world:anyone ALL. Run once when turning `zookeeper.set.acl` on for a cluster that ran without it
(new znodes get the ACL from the services themselves).
"""
from __future__ import annotations

import argparse
import sys

from kazoo.exceptions import KazooException
from kazoo.security import OPEN_ACL_UNSAFE

from services.common import zk as zkmod


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m services.common.zk_security",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--zookeeper.connect", dest="connect", required=True,
                   help="the cluster's zookeeper.connect, chroot included")
    p.add_argument("--credentials-file", required=True,
                   help="the services' zookeeper.credentials.file (user:password)")
    p.add_argument("--unsecure", action="store_true", help="set world:anyone ALL instead")
    args = p.parse_args(argv)
    try:
        auth = zkmod.ZkAuth.from_file(args.credentials_file, set_acl=True)
        client = zkmod.connect(args.connect, timeout_s=15, auth=auth, create_chroot=False)
    except (OSError, ValueError, zkmod.ZkConnectError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    try:
        n = zkmod.secure_tree(client, "/", acl=OPEN_ACL_UNSAFE if args.unsecure else auth.acl)
    except KazooException as e:
        print(f"Error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        zkmod.close(client)
    print(f"{'opened' if args.unsecure else 'secured'} {n} znodes under {args.connect}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
