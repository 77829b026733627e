#!/usr/bin/env bash
# A/B of two fastuntar binaries (a change and the commit before it) on one archive, with the
# disk out of the way: every run extracts into a fresh ext4 on a loop device backed by a
# sparse file in /dev/shm, after `sync; echo 3 > /proc/sys/vm/drop_caches`, and is timed as
# extract + sync. Rounds interleave A and B and alternate who goes first (A B, B A, ...): drift
# on the host hits both, and so does the first run of a pair, which measured ~10 % slower
# whichever binary it was (docs/PERFORMANCE.md, the cost of resume points).
#
#   scripts/ab.sh [--rounds N] [--size BYTES] ARCHIVE BIN_A BIN_B [FASTUNTAR ARGS...]
#
# ARCHIVE may be a URL (a server the caller runs: `nginx` on 127.0.0.1 for the fast link of
# docs/PERFORMANCE.md); its server's page cache is dropped with everything else.
# Prints every run, then per binary the median and the range of extract+sync and of user+sys
# CPU seconds. Root only (losetup, mount, drop_caches). --size: the ext4 in bytes (default 4x
# the archive's size, at least 3 GiB, and 4 GiB for a URL; /dev/shm must hold what is
# extracted). For the tables of every tool, see scripts/bench.sh; this answers "did this
# change make it slower".
set -euo pipefail

rounds=5
size=
while [[ $# -gt 0 ]]; do
    case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) break ;;
    esac
done
if [[ $# -lt 3 ]]; then
    echo "usage: scripts/ab.sh [--rounds N] [--size BYTES] ARCHIVE BIN_A BIN_B [ARGS...]" >&2
    exit 2
fi
archive=$1 a=$2 b=$3
shift 3
if [[ $(id -u) != 0 ]]; then
    echo "ab.sh: needs root (loop devices, mount, drop_caches)" >&2
    exit 2
fi
url=false
[[ $archive =~ ^(https?|s3):// ]] && url=true
for f in "$archive" "$a" "$b"; do
    [[ $f == "$archive" && $url == true ]] && continue
    [[ -e $f ]] || { echo "ab.sh: $f: not found" >&2; exit 2; }
done
if [[ -z $size && $url == true ]]; then
    size=$((4 << 30))
elif [[ -z $size ]]; then
    # zstd -1 takes a tree of small files to about a third: 4x the archive holds that, with
    # ext4's own room (a /usr tarball of 2 GB needed more than 2.5x).
    size=$(($(stat -c %s "$archive") * 4))
    ((size >= 3 << 30)) || size=$((3 << 30))
fi
# Whole MiB: a loop device ignores a partial last sector.
size=$(((size + (1 << 20) - 1) >> 20 << 20))

img=/dev/shm/fastuntar-ab-$$.img
mnt=$(mktemp -d /tmp/fastuntar-ab.XXXXXX)
loop=
cleanup() {
    mountpoint -q "$mnt" && umount "$mnt"
    [[ -n $loop ]] && losetup -d "$loop" 2>/dev/null
    rm -f "$img"
    rmdir "$mnt" 2>/dev/null || true
}
trap cleanup EXIT INT TERM

# One run: prints "seconds cpu exit".
run() {
    local bin=$1
    shift
    truncate -s "$size" "$img"
    loop=$(losetup -f --show "$img")
    mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "$loop"
    mount "$loop" "$mnt"
    mkdir "$mnt/d"
    sync
    echo 3 >/proc/sys/vm/drop_caches
    local t0 t1 rc=0
    t0=$(date +%s.%N)
    /usr/bin/time -f '%U %S' -o "$mnt.cpu" "$bin" -xf "$archive" -C "$mnt/d" "$@" \
        >/dev/null 2>"$mnt.err" || rc=$?
    sync
    t1=$(date +%s.%N)
    umount "$mnt"
    losetup -d "$loop"
    loop=
    rm -f "$img"
    local cpu
    cpu=$(awk 'END { printf "%.2f", $1 + $2 }' "$mnt.cpu")
    rm -f "$mnt.cpu"
    if [[ $rc != 0 ]]; then
        echo "ab.sh: $bin exited $rc: $(head -c 300 "$mnt.err")" >&2
    fi
    rm -f "$mnt.err"
    awk -v a="$t0" -v b="$t1" -v c="$cpu" -v r="$rc" 'BEGIN { printf "%.2f %s %d\n", b - a, c, r }'
}

declare -A wall cpu
for ((i = 1; i <= rounds; i++)); do
    order="A B"
    ((i % 2)) || order="B A"
    for which in $order; do
        bin=$a
        [[ $which == B ]] && bin=$b
        read -r s c rc < <(run "$bin" "$@")
        printf 'round %d  %s  extract+sync %6.2f s  cpu %6.2f s  exit %d\n' "$i" "$which" "$s" "$c" "$rc"
        wall[$which]+="$s "
        cpu[$which]+="$c "
    done
done

# Median (and range) of a list of numbers.
stats() {
    tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{ v[NR] = $1 }
        END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
              printf "%.2f s (%.2f-%.2f)", m, v[1], v[NR] }'
}
echo
echo "| binary | extract+sync, median (range) | CPU user+sys, median (range) |"
echo "|---|---:|---:|"
echo "| A: $a | $(stats "${wall[A]}") | $(stats "${cpu[A]}") |"
echo "| B: $b | $(stats "${wall[B]}") | $(stats "${cpu[B]}") |"
