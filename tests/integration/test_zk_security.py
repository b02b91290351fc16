"""ZooKeeper digest auth and znode ACLs against a real ZooKeeper: the services' ACL (digest ALL +
world READ) and the migration tool (python -m services.common.zk_security) for znodes created
before zookeeper.set.acl was on."""
from __future__ import annotations

import pytest
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE

from services.common import zk as zkmod
from services.common import zk_security

pytestmark = pytest.mark.integration


@pytest.fixture
def creds(tmp_path):
    f = tmp_path / "zookeeper.credentials"
    f.write_text("riverbed:correct-horse\n")
    return f


def test_znodes_created_with_the_acl_are_read_only_to_others(zk_chroot, creds):
    auth = zkmod.ZkAuth.from_file(str(creds), set_acl=True)
    fleet = zkmod.connect(zk_chroot, timeout_s=10, auth=auth)
    anon = zkmod.connect(zk_chroot, timeout_s=10, create_chroot=False,
                         auth=zkmod.ZkAuth())
    stranger = zkmod.connect(zk_chroot, timeout_s=10, create_chroot=False,
                             auth=zkmod.ZkAuth("riverbed", "guess"))
    try:
        fleet.create("/controller", b'{"brokerid":1}', makepath=True)
        fleet.create("/brokers/topics/t/partitions/0/state", b"{}", makepath=True)
        for c in (anon, stranger):
            assert c.get("/controller")[0] == b'{"brokerid":1}'
            with pytest.raises(NoAuthError):
                c.set("/brokers/topics/t/partitions/0/state", b'{"leader":9}')
            with pytest.raises(NoAuthError):
                c.delete("/controller")
            with pytest.raises(NoAuthError):
                c.create("/brokers/topics/evil", b"")
        fleet.set("/brokers/topics/t/partitions/0/state", b'{"leader":1}')
    finally:
        zkmod.secure_tree(fleet, "/", acl=OPEN_ACL_UNSAFE)   # the fixture deletes the chroot
        for c in (fleet, anon, stranger):
            zkmod.close(c)


def test_migration_secures_and_unsecures_existing_znodes(zk_chroot, creds, capsys):
    anon = zkmod.connect(zk_chroot, timeout_s=10, auth=zkmod.ZkAuth())
    try:
        anon.create("/brokers/topics/old/partitions/0/state", b"{}", makepath=True)
        assert zk_security.main(["--zookeeper.connect", zk_chroot,
                                 "--credentials-file", str(creds)]) == 0
        assert "secured" in capsys.readouterr().out
        with pytest.raises(NoAuthError):
            anon.set("/brokers/topics/old/partitions/0/state", b"x")
        assert anon.get("/brokers/topics/old/partitions/0/state")[0] == b"{}"
        assert zk_security.main(["--zookeeper.connect", zk_chroot, "--credentials-file",
                                 str(creds), "--unsecure"]) == 0
        anon.set("/brokers/topics/old/partitions/0/state", b"x")
    finally:
        zkmod.close(anon)
