"""Real SSH hosts on this machine for the Ansible roles: network namespaces on a bridge, one sshd
each in its own mount namespace, loop-device data disks.

    with TestBed(workdir, hosts=5) as bed:       # everything torn down on exit, pass or fail
        bed.hosts[0].address                       # 10.213.7.11
        bed.ansible("site.yml", inventory)         # ansible-playbook from the 'client' namespace
        bed.client_run([...])                      # any command in the client namespace
        bed.ssh(host, "cat /etc/riverbed/...")     # a command on a host, through its sshd

Layout (nothing outside it is a target; the machine's own interfaces are never touched):
- a hub namespace holding an address-less bridge; every other namespace joins it by a veth pair
  created inside the hub (so no interface ever appears in the machine's namespace);
- host namespaces h1..hN with 10.213.7.(10+i)/24, and a client namespace with 10.213.7.2 that
  runs ansible-playbook (the control machine) and the SDK clients;
- per host, `ip netns exec H unshare --mount --propagation private sh -c '<bind mounts>; exec
  sshd -D'`: private bind mounts (from WORKDIR/hosts/hI/) over the install prefix, /etc/riverbed,
  /var/lib/riverbed, /var/log/riverbed, /srv (disk mount points), /etc/sysctl.d,
  /etc/security/limits.d and /etc/fstab, so five hosts hold five installs; every session sshd
  spawns inherits that view and the mounts vanish with the host;
- key auth only: a client key and one host key per host, generated here, and a known_hosts file
  (host key checking stays on);
- loop devices over sparse image files for the data disks; formatted by the roles, not here.

Teardown (in this order, each step tolerant of the previous one failing): ask every persistent
ssh connection to exit, SIGKILL every process left in our namespaces (`ip netns pids`: only
processes we started live there), delete the namespaces (the bridge goes with the hub), detach
our loop devices (by the paths losetup gave us), remove the mount-point directories we created
if they are still empty.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

SUBNET = "10.213.7"   # private, used only inside the namespaces this module creates
CLIENT_ADDRESS = f"{SUBNET}.2"
REPO = pathlib.Path(__file__).resolve().parents[2]
ANSIBLE_DIR = REPO / "ansible"
COLLECTIONS_DIR = REPO / ".ansible-collections"
VENV_BIN = pathlib.Path(sys.executable).parent

# Directories each host gets privately (bind-mounted from WORKDIR/hosts/hI/<key>).
PRIVATE_DIRS = {
    "opt-riverbed": "/opt/riverbed",
    "etc-riverbed": "/etc/riverbed",
    "var-lib-riverbed": "/var/lib/riverbed",
    "var-log-riverbed": "/var/log/riverbed",
    "srv": "/srv",
    "etc-sysctl.d": "/etc/sysctl.d",
    "etc-limits.d": "/etc/security/limits.d",
}
PRIVATE_FILES = {"fstab": "/etc/fstab"}


def unavailable_reason() -> str | None:
    """Why the test bed cannot be built here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, mounts, loop devices)"
    for tool in ("ip", "unshare", "losetup", "mkfs.xfs", "mkfs.ext4", "ssh", "ssh-keygen",
                 "/usr/sbin/sshd", "java"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make system installs openssh-server, xfsprogs, e2fsprogs)"
    if not (VENV_BIN / "ansible-playbook").exists():
        return "ansible-playbook is not in the virtualenv (make venv installs ansible-core)"
    if not (COLLECTIONS_DIR / "ansible_collections" / "ansible" / "posix").exists():
        return "the ansible.posix/community.general collections are missing (make ansible-collections)"
    if not pathlib.Path("/dev/loop-control").exists():
        return "no /dev/loop-control: loop devices are not available"
    probe = subprocess.run(["unshare", "--net", "--mount", "true"], capture_output=True)
    if probe.returncode != 0:
        return f"cannot create network/mount namespaces: {probe.stderr.decode().strip()}"
    return None


def run(cmd: Sequence[str], *, check: bool = True, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r


@dataclasses.dataclass
class Disk:
    image: pathlib.Path
    device: str
    fstype: str
    mount: str


@dataclasses.dataclass
class Host:
    name: str           # h1..
    netns: str
    address: str
    root: pathlib.Path  # WORKDIR/hosts/<name>
    disks: list[Disk] = dataclasses.field(default_factory=list)
    sshd: subprocess.Popen | None = None

    def private(self, key: str) -> pathlib.Path:
        """The directory (or file) behind one of the host's private mounts, seen from outside."""
        return self.root / key


class TestBed:
    __test__ = False  # not a pytest class

    def __init__(self, workdir: pathlib.Path, hosts: int = 5, *, disk_mb: int = 512):
        self.workdir = pathlib.Path(workdir)
        self.n_hosts = hosts
        self.disk_mb = disk_mb
        tag = f"rbd{os.getpid() % 100000}"
        self.tag = tag
        self.hub = f"{tag}hub"
        self.client_ns = f"{tag}c"
        self.hosts: list[Host] = [
            Host(f"h{i}", f"{tag}h{i}", f"{SUBNET}.{10 + i}", self.workdir / "hosts" / f"h{i}")
            for i in range(1, hosts + 1)]
        self.namespaces: list[str] = []
        self.loop_devices: list[str] = []
        self.created_mountpoints: list[pathlib.Path] = []
        # Unix socket paths are short (108 bytes): ssh's control sockets live in /tmp.
        self.control_dir = pathlib.Path(f"/tmp/{tag}cp")
        self.key = self.workdir / "ssh" / "id_ed25519"
        self.known_hosts = self.workdir / "ssh" / "known_hosts"
        # The deployed fleet's client settings (CURVE): set by the test (see client_env).
        self.client_properties: pathlib.Path | None = None

    # --- building ---------------------------------------------------------------------------
    def __enter__(self) -> "TestBed":
        try:
            self._build()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    def _netns_add(self, name: str) -> None:
        run(["ip", "netns", "add", name])
        self.namespaces.append(name)
        run(["ip", "-n", name, "link", "set", "lo", "up"])

    def _join(self, ns: str, address: str, index: int) -> None:
        veth = f"{self.tag}v{index}"
        run(["ip", "-n", self.hub, "link", "add", veth, "type", "veth", "peer", "name", "eth0",
             "netns", ns])
        run(["ip", "-n", self.hub, "link", "set", veth, "master", "br0", "up"])
        run(["ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0"])
        run(["ip", "-n", ns, "link", "set", "eth0", "up"])

    def _build(self) -> None:
        (self.workdir / "ssh").mkdir(parents=True, exist_ok=True)
        self.control_dir.mkdir(mode=0o700, exist_ok=True)
        self._netns_add(self.hub)
        run(["ip", "-n", self.hub, "link", "add", "br0", "type", "bridge"])
        run(["ip", "-n", self.hub, "link", "set", "br0", "up"])
        self._netns_add(self.client_ns)
        self._join(self.client_ns, CLIENT_ADDRESS, 0)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "riverbed-testbed", "-f", str(self.key)])
        for target in PRIVATE_DIRS.values():
            p = pathlib.Path(target)
            if not p.exists():
                p.mkdir(parents=True)
                self.created_mountpoints.append(p)
        pathlib.Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
        known = []
        for i, host in enumerate(self.hosts, start=1):
            self._netns_add(host.netns)
            self._join(host.netns, host.address, i)
            known.append(self._start_sshd(host))
        self.known_hosts.write_text("".join(known))
        for host in self.hosts:
            self.wait_ssh(host)

    def _start_sshd(self, host: Host) -> str:
        for key in PRIVATE_DIRS:
            host.private(key).mkdir(parents=True, exist_ok=True)
        host.private("fstab").write_text("# the test host's private /etc/fstab\n")
        sshdir = host.root / "ssh"
        sshdir.mkdir(parents=True, exist_ok=True)
        hostkey = sshdir / "ssh_host_ed25519_key"
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(hostkey)])
        shutil.copy(f"{self.key}.pub", sshdir / "authorized_keys")
        cfg = sshdir / "sshd_config"
        cfg.write_text("\n".join([
            f"ListenAddress {host.address}", "Port 22", f"HostKey {hostkey}",
            f"PidFile {sshdir / 'sshd.pid'}", f"AuthorizedKeysFile {sshdir / 'authorized_keys'}",
            "PermitRootLogin prohibit-password", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no", "MaxSessions 50",
            "MaxStartups 50", "Subsystem sftp /usr/lib/openssh/sftp-server", ""]))
        mounts = [f"mount --bind {host.private(k)} {t}" for k, t in PRIVATE_DIRS.items()]
        mounts += [f"mount --bind {host.private(k)} {t}" for k, t in PRIVATE_FILES.items()]
        script = " && ".join(mounts + [f"exec /usr/sbin/sshd -D -e -f {cfg}"])
        log = open(host.root / "sshd.log", "ab")
        host.sshd = subprocess.Popen(
            ["ip", "netns", "exec", host.netns, "unshare", "--mount", "--propagation", "private",
             "sh", "-c", script], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        log.close()
        pub = pathlib.Path(f"{hostkey}.pub").read_text().split()
        return f"{host.address} {pub[0]} {pub[1]}\n"

    def add_disk(self, host: Host, fstype: str, mount: str) -> Disk:
        """A loop device over a sparse image (unformatted: the data_disks role formats it)."""
        image = self.workdir / "disks" / f"{host.name}-{len(host.disks) + 1}.img"
        image.parent.mkdir(parents=True, exist_ok=True)
        with open(image, "wb") as f:
            f.truncate(self.disk_mb << 20)
        device = run(["losetup", "--find", "--show", str(image)]).stdout.strip()
        self.loop_devices.append(device)
        disk = Disk(image, device, fstype, mount)
        host.disks.append(disk)
        return disk

    # --- using ------------------------------------------------------------------------------
    def ssh_args(self) -> list[str]:
        return ["-i", str(self.key), "-o", f"UserKnownHostsFile={self.known_hosts}",
                "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
                "-o", "ConnectTimeout=10", "-o", "ControlMaster=auto",
                "-o", f"ControlPath={self.control_dir}/%C", "-o", "ControlPersist=120s"]

    def ssh(self, host: Host, command: str, *, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        return run(["ip", "netns", "exec", self.client_ns, "ssh", *self.ssh_args(),
                    f"root@{host.address}", command], check=check, timeout=timeout)

    def wait_ssh(self, host: Host, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if host.sshd is not None and host.sshd.poll() is not None:
                raise RuntimeError(f"sshd of {host.name} exited: {(host.root / 'sshd.log').read_text()[-2000:]}")
            r = self.ssh(host, "true", check=False, timeout=15)
            if r.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"no ssh to {host.name} ({host.address}): {r.stderr}")
            time.sleep(0.3)

    def client_env(self) -> dict[str, str]:
        # A local fleet of another test may have exported its client key (RIVERBED_*): never
        # inherited. The deployed fleet runs CURVE (the roles' default): its clients use the
        # client.properties the control machine's key directory holds (`client_properties`,
        # set by the test once site.yml made it), else NONE.
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("RIVERBED_") or k == "RIVERBED_DEPLOY_PERF"}
        if self.client_properties is not None:
            env["RIVERBED_CLIENT_PROPERTIES"] = str(self.client_properties)
        else:
            env["RIVERBED_SECURITY_PROTOCOL"] = "NONE"
        env.update({
            "PATH": f"{VENV_BIN}:{env.get('PATH', '/usr/bin:/bin')}",
            "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"),
            "ANSIBLE_HOME": str(self.workdir / "ansible-home"),
            "ANSIBLE_LOCAL_TEMP": str(self.workdir / "ansible-home" / "tmp"),
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(self.control_dir),
            "ANSIBLE_SSH_ARGS": "-o ControlMaster=auto -o ControlPersist=120s",
            "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0",
            "PYTHONUNBUFFERED": "1",
            "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks",
        })
        return env

    def client_run(self, cmd: Sequence[str], *, check: bool = True, timeout: float = 600,
                   cwd: pathlib.Path | None = None) -> subprocess.CompletedProcess:
        return run(["ip", "netns", "exec", self.client_ns, *cmd], check=check, timeout=timeout,
                   env=self.client_env(), cwd=cwd)

    def client_popen(self, cmd: Sequence[str], log: pathlib.Path) -> subprocess.Popen:
        with open(log, "ab") as f:
            return subprocess.Popen(["ip", "netns", "exec", self.client_ns, *cmd], stdout=f,
                                    stderr=subprocess.STDOUT, env=self.client_env(),
                                    start_new_session=True)

    def client_popen_pipes(self, cmd: Sequence[str], log: pathlib.Path) -> subprocess.Popen:
        """A process in the client namespace talking over its stdin/stdout (text lines); its
        stderr goes to `log`."""
        with open(log, "ab") as f:
            return subprocess.Popen(["ip", "netns", "exec", self.client_ns, *cmd],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=f,
                                    text=True, env=self.client_env(), start_new_session=True)

    def ansible(self, playbook: str, inventory: pathlib.Path, *extra: str, check: bool = True,
                timeout: float = 900) -> "PlaybookRun":
        """ansible-playbook from the client namespace (the control machine), output kept."""
        logs = self.workdir / "ansible-logs"
        logs.mkdir(exist_ok=True)
        log = logs / f"{len(list(logs.iterdir())) + 1:02d}-{playbook}.log"
        started = time.monotonic()
        with open(log, "w") as f:   # streamed, so a slow run can be watched (and kept on timeout)
            p = subprocess.Popen(["ip", "netns", "exec", self.client_ns, str(VENV_BIN / "ansible-playbook"),
                                  "-i", str(inventory), str(ANSIBLE_DIR / playbook), *extra],
                                 stdout=f, stderr=subprocess.STDOUT, env=self.client_env(), cwd=ANSIBLE_DIR,
                                 start_new_session=True)
            try:
                rc = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                raise AssertionError(f"{playbook} did not finish within {timeout:.0f} s; see {log}") from None
        elapsed = time.monotonic() - started
        text = log.read_text()
        out = PlaybookRun(playbook, rc, text, "", elapsed)
        if check and rc != 0:
            raise AssertionError(f"{playbook} failed (rc {rc}); last output:\n{text[-6000:]}")
        return out

    def host_pids(self, host: Host) -> list[int]:
        r = run(["ip", "netns", "pids", host.netns], check=False)
        return [int(p) for p in r.stdout.split()]

    # --- teardown -----------------------------------------------------------------------------
    def teardown(self) -> None:
        errors: list[str] = []
        for host in self.hosts:   # persistent ssh connections first (they live in the client ns)
            if self.client_ns in self.namespaces and self.control_dir.exists():
                try:
                    run(["ip", "netns", "exec", self.client_ns, "ssh", *self.ssh_args(), "-O", "exit",
                         f"root@{host.address}"], check=False, timeout=10)
                except Exception as e:  # noqa: BLE001 - keep tearing down
                    errors.append(f"ssh -O exit {host.name}: {e}")
        for ns in reversed(self.namespaces):
            self._kill_namespace(ns)
        for host in self.hosts:
            if host.sshd is not None:
                try:
                    host.sshd.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    errors.append(f"sshd of {host.name} did not exit")
        for ns in reversed(self.namespaces):
            r = run(["ip", "netns", "delete", ns], check=False)
            if r.returncode != 0:
                errors.append(f"ip netns delete {ns}: {r.stderr.strip()}")
        self.namespaces.clear()
        for dev in self.loop_devices:
            for _ in range(50):   # the private mounts go with their namespace, a moment later
                r = run(["losetup", "-d", dev], check=False)
                if r.returncode == 0 or "No such device" in r.stderr:
                    break
                time.sleep(0.2)
            else:
                errors.append(f"losetup -d {dev}: {r.stderr.strip()}")
        self.loop_devices.clear()
        for p in reversed(self.created_mountpoints):
            try:
                p.rmdir()
            except OSError as e:
                errors.append(f"rmdir {p}: {e}")
        self.created_mountpoints.clear()
        shutil.rmtree(self.control_dir, ignore_errors=True)
        if errors:
            print("test bed teardown: " + "; ".join(errors), file=sys.stderr)

    def _kill_namespace(self, ns: str) -> None:
        for _ in range(50):
            r = run(["ip", "netns", "pids", ns], check=False)
            pids = [int(p) for p in r.stdout.split()] if r.returncode == 0 else []
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)


@dataclasses.dataclass
class PlaybookRun:
    playbook: str
    rc: int
    stdout: str
    stderr: str
    elapsed_s: float

    def recap(self) -> dict[str, dict[str, int]]:
        """PLAY RECAP per host: {"h1": {"ok": 10, "changed": 0, "failed": 0, ...}}."""
        out: dict[str, dict[str, int]] = {}
        text = self.stdout.split("PLAY RECAP", 1)[-1]
        for line in text.splitlines():
            m = re.match(r"^(\S+)\s+:\s+(.*)$", line.strip())
            counts = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))} if m else {}
            if "ok" in counts and "changed" in counts:   # not profile_tasks' "role : task --- 1s"
                out[m.group(1)] = counts
        return out

    def changed(self) -> int:
        return sum(h.get("changed", 0) for h in self.recap().values())
