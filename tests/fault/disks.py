"""Small real file systems for the storage-fault tests: a loop device per data disk, formatted
XFS or ext4 and mounted with the seeds' options, filled with a ballast file, or failed with
`xfs_io -x -c shutdown` (the file system then answers EIO to every read and write, as a dying
disk does). Everything made here is removed on exit — mount, loop device (only ours, by the path
losetup gave us) and image — also when the test fails.

    with loop_disk(tmp_path / "d1", size_mb=320, fstype="xfs") as disk:
        disk.path                       # the mount point: put log.dirs below it
        disk.fill(leave_bytes=8 << 20)  # ballast: leaves that much free
        disk.drain()                    # ballast gone
        disk.fail()                     # shutdown: EIO from now on
        disk.remount_read_only()        # ext4 with errors=remount-ro: an error makes it read-only
        disk.replace()                  # unmount + mount again (XFS replays its log)
"""
from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import subprocess
import time
from collections.abc import Iterator

# XFS refuses file systems of 300 MB or less.
MOUNT_OPTIONS = {"xfs": "noatime,inode64,logbsize=256k", "ext4": "noatime"}


def _run(*cmd: str) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise OSError(f"{' '.join(cmd)}: {r.stderr.strip() or r.returncode}")
    return r.stdout.strip()


def unavailable_reason() -> str | None:
    """Why loop-device file systems cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "needs root (loop devices and mounts)"
    for tool in ("losetup", "mkfs.xfs", "mkfs.ext4", "xfs_io", "fallocate"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make install installs xfsprogs)"
    if not pathlib.Path("/dev/loop-control").exists():
        return "no /dev/loop-control: loop devices are not available"
    return None


class Disk:
    def __init__(self, path: pathlib.Path, image: pathlib.Path, device: str, fstype: str,
                 options: str = ""):
        self.path = path
        self.image = image
        self.device = device
        self.fstype = fstype
        self.options = options or MOUNT_OPTIONS[fstype]
        self.ballast = path / "ballast"

    def free_bytes(self) -> int:
        return shutil.disk_usage(self.path).free

    def fill(self, leave_bytes: int) -> None:
        """Add a ballast file so that about `leave_bytes` stay free."""
        extra = self.free_bytes() - leave_bytes
        if extra > 0:
            size = (self.ballast.stat().st_size if self.ballast.exists() else 0) + extra
            _run("fallocate", "-l", str(size), str(self.ballast))

    def drain(self) -> None:
        self.ballast.unlink(missing_ok=True)

    def fail(self) -> None:
        """The file system shuts down: every read and write gets EIO from now on."""
        _run("xfs_io", "-x", "-c", "shutdown", str(self.path))

    def remount_read_only(self) -> None:
        """An ext4 error on a file system mounted errors=remount-ro (what a distribution's
        default does when the disk misbehaves): the kernel remounts it read-only, so every
        write from now on gets EROFS while reads still work."""
        if self.fstype != "ext4" or "errors=remount-ro" not in self.options:
            raise ValueError("remount_read_only needs an ext4 disk mounted errors=remount-ro")
        name = os.path.basename(os.path.realpath(self.device))
        with open(f"/sys/fs/ext4/{name}/trigger_fs_error", "w") as f:
            f.write("riverbed fault test\n")

    def replace(self) -> None:
        """The operator's fix: unmount the failed file system and mount it again."""
        _umount(self.path)
        if self.fstype == "ext4":     # clear the error state the way an operator would
            subprocess.run(["e2fsck", "-f", "-y", self.device], capture_output=True, timeout=120)
        _run("mount", "-t", self.fstype, "-o", self.options, self.device, str(self.path))


def _umount(path: pathlib.Path) -> None:
    for _ in range(20):
        r = subprocess.run(["umount", str(path)], capture_output=True, timeout=60)
        if r.returncode == 0 or not os.path.ismount(path):
            return
        time.sleep(0.25)              # a process of ours may still be closing its files
    subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=60)


@contextlib.contextmanager
def loop_disk(path: pathlib.Path, *, size_mb: int = 320, fstype: str = "xfs",
              options: str = "") -> Iterator[Disk]:
    path.mkdir(parents=True, exist_ok=True)
    image = path.with_name(path.name + ".img")
    device = None
    mounted = False
    try:
        with open(image, "wb") as f:
            f.truncate(size_mb << 20)
        device = _run("losetup", "--find", "--show", str(image))
        if fstype == "xfs":
            _run("mkfs.xfs", "-q", "-f", device)
        else:
            _run("mkfs.ext4", "-q", "-F", device)
        disk = Disk(path, image, device, fstype, options)
        _run("mount", "-t", fstype, "-o", disk.options, device, str(path))
        mounted = True
        yield disk
    finally:
        if mounted or os.path.ismount(path):
            _umount(path)
        if device is not None:
            subprocess.run(["losetup", "-d", device], capture_output=True, timeout=60)
        image.unlink(missing_ok=True)
