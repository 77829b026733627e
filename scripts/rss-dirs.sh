#!/usr/bin/env bash
# Peak RSS of fastuntar (and GNU tar) extracting an archive of N directories, each holding one
# empty file (default N = 1,000,000), the shape that once grew fastuntar's memory with the
# member count (directory metadata kept to the end).
#
#   scripts/rss-dirs.sh [N] [--bin PATH] [--dest DIR] [--flags 'FLAGS'] [--no-gnu]
#
# --flags adds FLAGS to both tools' command lines (--delay-directory-restore: every
# directory's metadata waits for the end); --no-gnu runs fastuntar alone (GNU tar's delayed
# list costs time quadratic in the directories), and then the trees are not compared.
#
# The archive is streamed from scripts/gen-archives.py's writer into each tool's standard
# input (nothing stored); DEST defaults to a fresh tmpfs mounted for the run when root (~2 GB
# of RAM per million directories), else a directory under /tmp. Prints one table row per tool:
# peak RSS (/usr/bin/time %M), wall time, and whether the trees agree (modes and mtimes of
# every directory, compared with GNU tar's). See docs/PERFORMANCE.md.
set -euo pipefail
N=1000000
BIN=""
DEST=""
FLAGS=""
GNU=1
while (($#)); do
    case $1 in
    --bin) BIN=$2; shift 2 ;;
    --dest) DEST=$2; shift 2 ;;
    --flags) FLAGS=$2; shift 2 ;;
    --no-gnu) GNU=""; shift ;;
    [0-9]*) N=$1; shift ;;
    *) echo "rss-dirs.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
REPO=$(cd "$(dirname "$0")/.." && pwd)
if [[ -z $BIN ]]; then
    cargo build --release --quiet --manifest-path "$REPO/Cargo.toml"
    BIN=${CARGO_TARGET_DIR:-$REPO/target}/release/fastuntar
fi
command -v /usr/bin/time >/dev/null || { echo "rss-dirs.sh: needs /usr/bin/time (package time)" >&2; exit 2; }
MOUNTED=""
if [[ -z $DEST ]]; then
    DEST=$(mktemp -d /tmp/rss-dirs.XXXXXX)
    if [[ $(id -u) == 0 ]]; then
        mount -t tmpfs -o size=$((2 * N / 1000 + 1024))m,nr_inodes=$((5 * N + 1000)) tmpfs "$DEST"
        MOUNTED=$DEST
    fi
fi
cleanup() { [[ -n $MOUNTED ]] && umount "$MOUNTED"; rm -rf "$DEST"; }
trap cleanup EXIT

gen() {
    python3 - "$N" <<'PY'
import sys, tarfile
n = int(sys.argv[1])
out = tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.GNU_FORMAT)
for i in range(n):
    d = tarfile.TarInfo(f"d{i // 1000:04d}/{i % 1000:03d}")
    d.type, d.mode, d.mtime = tarfile.DIRTYPE, 0o750, 1_600_000_000 + i
    out.addfile(d)
    f = tarfile.TarInfo(f"d{i // 1000:04d}/{i % 1000:03d}/f")
    f.mode, f.mtime = 0o640, 1_600_000_000
    out.addfile(f)
out.close()
PY
}

printf '%-10s %12s %10s %8s\n' tool "peak RSS" "wall s" exit
run() { # label dir cmd...
    local label=$1 dir=$2; shift 2
    mkdir -p "$dir"
    local t0=$EPOCHREALTIME rc=0
    gen | /usr/bin/time -f %M -o "$DEST/$label.rss" "$@" -C "$dir" || rc=$?
    local t1=$EPOCHREALTIME
    printf '%-10s %9s KB %10.1f %8s\n' "$label" "$(tail -1 "$DEST/$label.rss")" \
        "$(echo "$t1 - $t0" | bc)" "$rc"
}
# shellcheck disable=SC2086 # FLAGS is split into words on purpose
run fastuntar "$DEST/fu" "$BIN" -x - -q $FLAGS
[[ -n $GNU ]] || exit 0
# shellcheck disable=SC2086
run gnutar "$DEST/gnu" tar -xf - $FLAGS
# Modes and mtimes of every member as GNU tar left them (the implied d* directories, not in
# the archive, have the time of the run).
a=$(cd "$DEST/fu" && find . -mindepth 2 -printf '%y %m %T@ %p\n' | sort | md5sum)
b=$(cd "$DEST/gnu" && find . -mindepth 2 -printf '%y %m %T@ %p\n' | sort | md5sum)
[[ $a == "$b" ]] && echo "trees agree (types, modes, mtimes of every path)" || { echo "TREES DIFFER"; exit 1; }
