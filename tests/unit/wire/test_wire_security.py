"""Key files and a client's security settings (riverbed.wire.security), the process's security
config (services.common.rpc.security) and ZooKeeper credentials: files in tmp_path; the ZAP
handler's tests use inproc sockets, and the one that could crash runs in a child process."""
import os
import stat
import subprocess
import sys

import pytest
import zmq
import zmq.auth
import zmq.utils.z85

from riverbed.wire import security as sec
from services.common import zk as zkmod
from services.common.rpc import security as rsec


def test_generated_keypair_is_a_zmq_auth_certificate_with_metadata(tmp_path):
    pub, secret = sec.create_keypair(tmp_path / "pub", "storage-1", kind="service",
                                     endpoints=("tcp://127.0.0.1:9101",),
                                     secret_dir=tmp_path / "priv")
    public_key, secret_key = zmq.auth.load_certificate(secret)     # pyzmq reads it
    assert zmq.auth.load_certificate(pub) == (public_key, None)
    c = sec.read_certificate(pub)
    assert (c.public_key, c.principal, c.kind, c.endpoints) == \
        (public_key, "User:storage-1", "service", ("tcp://127.0.0.1:9101",))
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
    with pytest.raises(sec.SecurityConfigError):
        sec.create_keypair(tmp_path / "pub", "storage-1", secret_dir=tmp_path / "priv")


def test_bad_names_and_files_are_typed_errors(tmp_path):
    with pytest.raises(sec.SecurityConfigError):
        sec.create_keypair(tmp_path, "../evil")
    (tmp_path / "junk.key").write_text("not a certificate")
    with pytest.raises(sec.SecurityConfigError):
        sec.read_certificate(tmp_path / "junk.key")
    assert sec.read_certificates(tmp_path) == []     # skipped, not fatal
    with pytest.raises(sec.SecurityConfigError):
        sec.check_protocol("SSL")


def test_add_public_key_refuses_a_secret_file(tmp_path):
    pub, secret = sec.create_keypair(tmp_path / "k", "alice")
    with pytest.raises(sec.SecurityConfigError):
        sec.add_public_key(tmp_path / "trust", secret)
    dest = sec.add_public_key(tmp_path / "trust", pub)
    assert sec.read_certificate(dest).principal == "User:alice"


def test_server_key_found_by_endpoint(tmp_path):
    pub, _ = sec.create_keypair(tmp_path, "gw", kind="service",
                                endpoints=("tcp://127.0.0.1:9092", "tcp://127.0.0.1:9093"))
    _, client = sec.create_keypair(tmp_path / "c", "client")
    cs = sec.client_security(security_protocol="curve", curve_secret_key_file=str(client),
                             curve_server_keys_dir=str(tmp_path), env={})
    key = sec.read_certificate(pub).public_key
    assert cs.server_key_for("tcp://localhost:9092") == key
    assert cs.server_key_for("tcp://127.0.0.1:9093") == key
    with pytest.raises(sec.SecurityConfigError):
        cs.server_key_for("tcp://127.0.0.1:1")


def test_client_settings_arguments_then_env_then_properties(tmp_path):
    _, a = sec.create_keypair(tmp_path, "a")
    _, b = sec.create_keypair(tmp_path, "b")
    props = tmp_path / "client.properties"
    props.write_text(f"security.protocol=CURVE\ncurve.secret.key.file={a}\n"
                     f"curve.server.keys.dir={tmp_path}\n")
    env = {sec.ENV_CLIENT_PROPERTIES: str(props)}
    assert sec.client_security(env=env).principal == "User:a"
    env[sec.ENV_SECRET_KEY_FILE] = str(b)
    assert sec.client_security(env=env).principal == "User:b"
    assert sec.client_security(security_protocol="NONE", env=env).protocol == "NONE"
    assert sec.client_security(env={}).protocol == "NONE"
    with pytest.raises(sec.SecurityConfigError):     # CURVE without a key
        sec.client_security(security_protocol="CURVE", env={})
    with pytest.raises(sec.SecurityConfigError):     # the public file is not a secret key
        sec.client_security(security_protocol="CURVE", curve_secret_key_file=str(tmp_path / "a.key"),
                            curve_server_keys_dir=str(tmp_path), env={})


def test_trust_store_reload_sees_added_and_removed_keys(tmp_path):
    sec.create_keypair(tmp_path / "t", "storage-1", kind="service", secret_dir=tmp_path / "p")
    pub, _ = sec.create_keypair(tmp_path / "t", "alice", secret_dir=tmp_path / "p")
    store = rsec.TrustStore(str(tmp_path / "t"))
    key = sec.read_certificate(pub).public_key
    assert store.principals[key] == "User:alice"
    assert store.service_principals == {"User:storage-1"}
    assert not store.reload()                        # nothing changed
    pub.unlink()
    assert store.reload()
    assert key not in store.principals


def test_security_keys_are_split_from_the_role_config():
    props = {"security.protocol": "CURVE", "port": "1", "super.users": "User:x",
             "curve.secret.key.file": "/k"}
    sec_props, rest = rsec.split_security_properties(props, {"port"})
    assert sec_props == {"security.protocol": "CURVE", "super.users": "User:x",
                         "curve.secret.key.file": "/k"}
    assert rest == {"port": "1"}
    _, rest = rsec.split_security_properties(props, {"port", "super_users"})
    assert rest == {"port": "1", "super.users": "User:x"}    # the authorizer reads it too


def test_security_config_validation():
    with pytest.raises(ValueError):
        rsec.SecurityConfig(security_protocol="CURVE")     # no key file
    with pytest.raises(ValueError):
        rsec.SecurityConfig(zookeeper_set_acl=True)
    assert rsec.SecurityConfig().security_protocol == "NONE"
    none = rsec.ServerSecurity()
    assert not none.curve and none.holds_cluster_action("User:ANONYMOUS")


def test_zookeeper_credentials_file(tmp_path):
    f = tmp_path / "zk"
    f.write_text("riverbed:s3cret\n")
    auth = zkmod.ZkAuth.from_file(str(f), set_acl=True)
    assert auth.auth_data == [("digest", "riverbed:s3cret")]
    perms = {(a.id.scheme, a.perms) for a in auth.acl}
    assert ("world", 1) in perms and ("digest", 31) in perms      # READ for all, ALL for us
    assert zkmod.ZkAuth.from_file("").acl is None
    f.write_text("nopassword\n")
    with pytest.raises(ValueError):
        zkmod.ZkAuth.from_file(str(f))


def test_connection_counter_per_ip():
    c = rsec.ConnectionCounter()
    c.accepted(1, 10, "10.0.0.1")
    c.accepted(1, 11, "10.0.0.1")
    c.accepted(2, 10, "10.0.0.2")          # same fd number on another socket
    assert not c.over("10.0.0.1", 2) and c.over("10.0.0.1", 1)
    c.closed(1, 10)
    c.closed(1, 10)                        # a second close event for the fd: no-op
    assert c.per_ip == {"10.0.0.1": 1, "10.0.0.2": 1}
    c.accepted(1, 11, "10.0.0.3")          # fd reused before its close was seen
    assert c.per_ip == {"10.0.0.3": 1, "10.0.0.2": 1}


def test_trust_store_listing_skips_a_key_removed_while_it_is_listed(tmp_path, monkeypatch):
    sec.create_keypair(tmp_path / "t", "alice", secret_dir=tmp_path / "p")
    store = rsec.TrustStore(str(tmp_path / "t"))
    real_scandir = os.scandir

    class Vanished:
        name = "bob.key"

        def stat(self):
            raise FileNotFoundError(2, "No such file or directory", "bob.key")

    monkeypatch.setattr(rsec.os, "scandir", lambda d: [*real_scandir(d), Vanished()])
    assert [name for name, _, _ in store._listing()] == ["alice.key"]
    assert not store.reload()                        # nothing changed, nothing raised


def test_zap_refuses_with_500_and_lives_on_when_a_request_fails(tmp_path, monkeypatch):
    """An error inside the ZAP handler (a bug, a file-system error) refuses that one handshake;
    the handler thread, which every later handshake of the process waits on, keeps answering."""
    _, server_secret = sec.create_keypair(tmp_path / "t", "gw", kind="service",
                                          secret_dir=tmp_path / "p")
    alice, _ = sec.create_keypair(tmp_path / "t", "alice", secret_dir=tmp_path / "p")
    security = rsec.ServerSecurity(rsec.SecurityConfig(
        "CURVE", str(server_secret), str(tmp_path / "t")))
    ctx = zmq.Context()
    req = ctx.socket(zmq.REQ)
    try:
        security._ensure_zap(ctx)
        req.connect("inproc://zeromq.zap.01")
        key = zmq.utils.z85.decode(sec.read_certificate(alice).public_key)

        def ask(request_id: bytes) -> list[bytes]:
            req.send_multipart([b"1.0", request_id, sec.ZAP_DOMAIN.encode(), b"127.0.0.1",
                                b"", b"CURVE", key])
            assert req.poll(5000), "the ZAP handler did not answer"
            return req.recv_multipart()

        assert ask(b"1")[2:5] == [b"200", b"OK", b"User:alice"]

        def failing_reload(force=False):
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(security.trust, "reload", failing_reload)
        assert ask(b"2")[1:4] == [b"2", b"500", b"internal error"]
        monkeypatch.undo()
        assert ask(b"3")[2:5] == [b"200", b"OK", b"User:alice"]
    finally:
        req.close(linger=0)
        ctx.destroy(linger=0)


_DESTROY_UNDER_ZAP = r'''
import pathlib, sys
import zmq, zmq.utils.z85
from riverbed.wire import security as sec
from services.common.rpc import security as rsec

tmp = pathlib.Path(sys.argv[1])
_, server_secret = sec.create_keypair(tmp / "t", "gw", kind="service", secret_dir=tmp / "p")
alice, _ = sec.create_keypair(tmp / "t", "alice", secret_dir=tmp / "p")
key = zmq.utils.z85.decode(sec.read_certificate(alice).public_key)
plain = rsec.ServerSecurity(rsec.SecurityConfig("CURVE", str(server_secret), str(tmp / "t")))
capped = rsec.ServerSecurity(rsec.SecurityConfig(
    "CURVE", str(server_secret), str(tmp / "t"), max_connections_per_ip=10))
for i in range(int(sys.argv[2])):
    security = capped if i % 2 else plain
    ctx = zmq.Context()
    server = ctx.socket(zmq.ROUTER)
    security.apply_server(server, ctx)          # the ZAP thread (capped: and a monitor it polls)
    server.bind("tcp://127.0.0.1:0")
    req = ctx.socket(zmq.REQ)
    req.connect("inproc://zeromq.zap.01")
    req.send_multipart([b"1.0", b"%d" % i, sec.ZAP_DOMAIN.encode(), b"127.0.0.1", b"", b"CURVE",
                        key])
    assert req.poll(5000) and req.recv_multipart()[2] == b"200"
    ctx.destroy(linger=0)                       # server and req still open: destroy closes them
    security._zap[id(ctx)].join(5)
    assert not security._zap[id(ctx)].is_alive(), "the ZAP thread outlived its context"
print("destroyed", i + 1)
'''


def test_context_destroy_in_another_thread_leaves_the_zap_threads_sockets_to_it(tmp_path):
    """A service's or a test's teardown calls Context.destroy(), which closes every socket on
    the context's list from its own thread. The ZAP thread's REP socket and monitors were on
    it, closed under the thread's poll: a segmentation fault within a few dozen rounds (the CI
    run of 22d042a died of it in this file). They are the thread's own now: destroy's term()
    ends its poll and it closes them. In a child process, so a crash fails this test only."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, "-c", _DESTROY_UNDER_ZAP, str(tmp_path), "300"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.split() == ["destroyed", "300"]
