"""jobs.pack_env's archive: a zip Spark 4 unpacks with executable bits kept and no links out."""
import os
import stat
import zipfile

from jobs.pack_env import _zip


def test_zip_keeps_modes_follows_file_links_and_leaves_dir_links_out(tmp_path):
    outside = tmp_path / "python3.11"
    outside.write_bytes(b"ELF...")
    outside.chmod(0o755)
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    (env / "lib" / "site").mkdir(parents=True)
    (env / "lib" / "site" / "m.py").write_text("x = 1\n")
    (env / "lib" / "site" / "__pycache__").mkdir()
    (env / "lib" / "site" / "__pycache__" / "m.pyc").write_bytes(b"\0")
    os.symlink(outside, env / "bin" / "python")
    os.symlink("lib", env / "lib64")
    for store in (True, False):
        out = tmp_path / f"env-{store}.zip"
        _zip(env, out, store)
        with zipfile.ZipFile(out) as z:
            names = sorted(z.namelist())
            assert names == ["bin/python", "lib/site/m.py"]
            info = z.getinfo("bin/python")
            assert stat.S_IMODE(info.external_attr >> 16) == 0o755
            assert z.read("bin/python") == b"ELF..."
