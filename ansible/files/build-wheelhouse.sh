#!/bin/sh
# build-wheelhouse.sh PYTHON SOURCE_DIR OUT_DIR
# The control machine's build for hosts without internet access: the project's wheel plus every
# runtime dependency as wheels, pinned by requirements.lock (no [spark] or [dev] extra), and a
# requirements.txt naming each exactly, all of it also packed as wheelhouse.tar (what the hosts get). Hosts install it with `pip install --no-index`.
set -eu
py=$1; src=$2; out=$3
tmp="$out.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
"$py" -m pip wheel -q --constraint "$src/requirements.lock" --wheel-dir "$tmp" "$src"
(cd "$tmp" && for w in *.whl; do echo "$w"; done | sed -E 's/^([^-]+)-([^-]+)-.*$/\1==\2/' > requirements.txt)
# One file to ship (a copy per wheel costs a round trip each): wheels + requirements.txt.
(cd "$tmp" && tar -cf wheelhouse.tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner ./*.whl requirements.txt)
rm -rf "$out"
mv "$tmp" "$out"
echo "wheelhouse: $out ($(ls "$out"/*.whl | wc -l) wheels)"
