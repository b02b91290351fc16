"""`riverbed keys`: CurveZMQ keypairs in zmq.auth's certificate format, and TLS certificates for
the gateways' Kafka listeners.

    riverbed keys generate NAME [--dir D] [--secret-dir S] [--kind client|service] [--endpoint E ...]
    riverbed keys list [--dir D]
    riverbed keys add CERT.key --trust-dir D
    riverbed keys tls-ca [--dir D] [--secret-dir S]
    riverbed keys tls-cert NAME --san HOST [--san IP:ADDR ...] [--client] [--dir D] [--ca-dir D]

A keypair is two files: NAME.key (public: give it to the servers' trusted keys directory,
`curve.trusted.keys.dir`) and NAME.key_secret (secret, mode 0600: only its owner reads it; a
client names it in `curve_secret_key_file`, a service in `curve.secret.key.file`). The principal
of the key is `User:NAME`. A service's key carries its endpoints, by which clients find the
server's public key (`curve_server_keys_dir`).

TLS (SSL and SASL_SSL Kafka listeners): `tls-ca` writes a certificate authority (D/ca.pem, the
clients' ssl.ca.location; its key S/ca.key, 0600); `tls-cert NAME` writes NAME.pem (0600): a new
private key with its certificate signed by that CA and the chain, the gateway's
ssl.keystore.location (Kafka's PEM keystore). A server certificate names the hosts clients
connect to (--san: the advertised host of the listener, a DNS name or an IP address); a client
certificate (--client) is for ssl.client.auth, its principal `User:CN=NAME,O=Riverbed`.
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
    ca = sub.add_parser("tls-ca", help="a TLS certificate authority for the Kafka listeners "
                                       "(ca.pem, ca.key)")
    ca.add_argument("--dir", default=".", help="where ca.pem goes (default: .)")
    ca.add_argument("--secret-dir", default=None, help="where ca.key goes (default: --dir)")
    ca.add_argument("--days", type=int, default=3650, help="validity (default 3650)")
    ca.add_argument("--force", action="store_true",
                    help="replace an existing CA (its certificates stop being trusted)")
    ca.set_defaults(func=cmd_tls_ca)
    c = sub.add_parser("tls-cert", help="a TLS key and certificate signed by the CA (NAME.pem)")
    c.add_argument("name", help="file name and common name (CN)")
    c.add_argument("--dir", default=".", help="where NAME.pem goes (default: .); 0600")
    c.add_argument("--ca-dir", default=".", help="where ca.pem is (default: .)")
    c.add_argument("--ca-secret-dir", default=None, help="where ca.key is (default: --ca-dir)")
    c.add_argument("--san", action="append", default=[], metavar="DNS:NAME|IP:ADDR",
                   help="a name clients connect to (repeatable; needed for a server)")
    c.add_argument("--client", action="store_true",
                   help="a client certificate (mutual TLS, ssl.client.auth) instead of a server's")
    c.add_argument("--days", type=int, default=825, help="validity (default 825)")
    c.set_defaults(func=cmd_tls_cert)


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


def cmd_tls_ca(args: argparse.Namespace) -> int:
    from riverbed.tools import tls
    try:
        cert, key = tls.make_ca(args.dir, args.secret_dir, days=args.days, overwrite=args.force)
    except (tls.TlsError, OSError) as e:
        return _fail(e)
    print(f"CA certificate: {cert}   (clients' ssl.ca.location, gateways' ssl.truststore.location)")
    print(f"CA key:         {key}")
    return 0


def cmd_tls_cert(args: argparse.Namespace) -> int:
    from riverbed.tools import tls
    try:
        path = tls.make_certificate(args.name, args.dir, ca_dir=args.ca_dir,
                                    ca_secret_dir=args.ca_secret_dir, sans=tuple(args.san),
                                    client=args.client, days=args.days)
    except (tls.TlsError, OSError) as e:
        return _fail(e)
    print(f"key and certificate chain: {path}")
    if args.client:
        print(f"principal:  User:CN={args.name},O=Riverbed")
    else:
        print(f"names:      {', '.join(tls.certificate_sans(path))}   (ssl.keystore.location)")
    return 0
