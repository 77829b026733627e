#!/usr/bin/env bash
# Creates the committed sample archive, deterministically:
#
#   scripts/make-fixtures.sh [OUTDIR]        (default: fixtures/)
#
# OUTDIR/sample.tar.zst  a small archive shaped like a Solana/Agave ledger snapshot:
#                        `version`, `snapshots/<slot>/<slot>`, `snapshots/status_cache` and
#                        50 `accounts/<slot>.<id>` files from 3 bytes to ~300 KB.
# OUTDIR/sample.sha256   `sha256sum` lines (relative paths) of every file in it.
#
# Same bytes on every run: contents come from a fixed integer generator (awk, exact in
# doubles), the tar stream is GNU format with fixed owner, group, modes and mtime, sorted by
# name, and zstd runs single-threaded at a fixed level. (The .tar.zst bytes depend on the zstd
# version; the tar stream inside does not. tests/sample.rs checks the tar stream.)
# Needs: bash, awk, GNU tar, zstd, sha256sum (coreutils).
set -euo pipefail
export LC_ALL=C TZ=UTC
umask 022
cd "$(dirname "$0")/.."
out=${1:-fixtures}
mkdir -p "$out"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/sample
slot=123456789

# gen SEED SIZE FILE: SIZE bytes of snapshot-like text (account records), a pure function of
# SEED. Park-Miller: x * 16807 < 2^46, exact in awk's doubles on every awk.
gen() {
  awk -v seed="$1" -v size="$2" 'BEGIN {
    x = seed % 2147483646 + 1
    n = 0
    while (n < size) {
      x = (x * 16807) % 2147483647
      line = sprintf("%010d lamports=%012d owner=Vote111111111111111111111111111111111111111 rent_epoch=%d\n",
                     n, x % 1000000 * 1000, x % 400)
      printf "%s", line
      n += length(line)
    }
  }' >"$work/gen.tmp"
  head -c "$2" "$work/gen.tmp" >"$3"
}

mkdir -p "$root/snapshots/$slot" "$root/accounts"
printf '1.2.0\n' >"$root/version"
gen 1 120000 "$root/snapshots/$slot/$slot"
gen 2 15000 "$root/snapshots/status_cache"

# 50 account files: the block/page/direct-I/O edges, then generated sizes up to ~300 KB.
sizes=(3 17 100 511 512 513 4095 4096 4097 65535 65536 65537 300000)
x=7
while ((${#sizes[@]} < 50)); do
  x=$(((x * 16807) % 2147483647))
  sizes+=($((x % 3 == 0 ? x % 300000 : x % 20000)))
done
for i in "${!sizes[@]}"; do
  gen $((100 + i)) "${sizes[$i]}" "$root/accounts/$((slot - i % 7)).$((1000 + i))"
done

find "$root" -type d -exec chmod 0755 {} +
find "$root" -type f -exec chmod 0644 {} +

tar --format=gnu --owner=0 --group=0 --numeric-owner --mtime=@1700000000 --sort=name \
  -cf "$work/sample.tar" -C "$root" version snapshots accounts
zstd -q -19 --single-thread --no-progress -f -o "$out/sample.tar.zst" "$work/sample.tar"
(cd "$root" && find . -type f | sed 's|^\./||' | sort | xargs sha256sum) >"$out/sample.sha256"

echo "$out/sample.tar.zst: $(wc -c <"$out/sample.tar.zst") bytes ($(wc -c <"$work/sample.tar") of tar)," \
  "$(wc -l <"$out/sample.sha256") files"
