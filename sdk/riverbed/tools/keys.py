"""`riverbed keys`: CurveZMQ keypairs in zmq.auth's certificate format.

    riverbed keys generate NAME [--dir D] [--secret-dir S] [--kind client|service] [--endpoint E ...]
    riverbed keys list [--dir D]
    riverbed keys add CERT.key --trust-dir D

A keypair is two files: NAME.key (public: give it to the servers' trusted keys directory,
`curve.trusted.keys.dir`) and NAME.key_secret (secret, mode 0600: only its owner reads it; a
client names it in `curve_secret_key_file`, a service in `curve.secret.key.file`). The principal
of the key is `User:NAME`. A service's key carries its endpoints, by which clients find the
server's public key (`curve_server_keys_dir`).
"""
from __future__ import annotations

import argparse
import sys

from riverbed.wire import security as sec


def add_command(subparsers) -> None:
    p = subparsers.add_parser("keys", help="CurveZMQ keypairs: generate, list, add to a trust dir",
                              description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="keys_command", metavar="ACTION")
    sub.required = True
    g = sub.add_parser("generate", help="write NAME.key and NAME.key_secret")
    g.add_argument("name", help="the key's name; its principal is User:NAME")
    g.add_argument("--dir", default=".", help="where NAME.key goes (default: .)")
    g.add_argument("--secret-dir", default=None,
                   help="where NAME.key_secret goes (default: --dir); created 0700")
    g.add_argument("--kind", choices=("client", "service"), default="client",
                   help="service keys hold ClusterAction (inter-service APIs); default: client")
    g.add_argument("--endpoint", action="append", default=[], metavar="tcp://HOST:PORT",
                   help="an endpoint a service serves with this key (repeatable)")
    g.add_argument("--force", action="store_true", help="replace an existing key of that name")
    g.set_defaults(func=cmd_generate)
    ls = sub.add_parser("list", help="the public keys in a directory: name, kind, principal, key")
    ls.add_argument("--dir", default=".", help="default: .")
    ls.set_defaults(func=cmd_list)
    a = sub.add_parser("add", help="copy a public certificate into a trust directory (atomically)")
    a.add_argument("certificate", help="a NAME.key file")
    a.add_argument("--trust-dir", required=True,
                   help="the services' curve.trusted.keys.dir (re-read within "
                        "curve.trusted.keys.reload.ms, or on SIGHUP)")
    a.set_defaults(func=cmd_add)


def _fail(e: Exception) -> int:
    print(f"Error: {e}", file=sys.stderr)
    return 1


def cmd_generate(args: argparse.Namespace) -> int:
    try:
        pub, secret = sec.create_keypair(args.dir, args.name, kind=args.kind,
                                         endpoints=tuple(args.endpoint),
                                         secret_dir=args.secret_dir, overwrite=args.force)
    except (sec.SecurityConfigError, OSError) as e:
        return _fail(e)
    print(f"public key:  {pub}")
    print(f"secret key:  {secret}")
    print(f"principal:   User:{args.name}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    try:
        certs = sec.read_certificates(args.dir)
    except sec.SecurityConfigError as e:
        return _fail(e)
    print(f"{'NAME':<24} {'KIND':<8} {'PRINCIPAL':<30} PUBLIC KEY")
    for c in certs:
        eps = f"  {','.join(c.endpoints)}" if c.endpoints else ""
        print(f"{c.name:<24} {c.kind:<8} {c.principal:<30} {c.public_key.decode()}{eps}")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    try:
        dest = sec.add_public_key(args.trust_dir, args.certificate)
    except (sec.SecurityConfigError, OSError) as e:
        return _fail(e)
    print(f"added {dest}")
    return 0
