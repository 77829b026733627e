#!/usr/bin/env bash
# Where direct IO starts to pay: Agave-shaped archives of several sizes (gen-archives.py
# `agave.tar.zst` at each --scales value: 32 MiB zstd frames, AppendVec-shaped files), each
# extracted into a fresh ext4 per run with every file buffered (--no-direct-io), with large
# files direct (--direct-io) and with the default flags, in interleaved rounds (the order
# rotates every round), after `sync; echo 3 > /proc/sys/vm/drop_caches`. Two figures per run:
# "return" (the command alone) and "durable" (the command, then `sync`).
#
#   scripts/direct-crossover.sh [--scales F[,F...]] [--fs ramext4,diskext4] [--rounds N]
#                               [--modes buffered,direct,default] [--base BIN] [--bin BIN]
#                               [--workdir DIR] [--kind agave|snapshot|smallfiles]
#
# --kind: which of gen-archives.py's archives (default agave). --modes also takes
# `portable` (--direct-io --io portable), `uring-buffered` (--no-direct-io --io uring) and
# `portable-buffered` (--no-direct-io --io portable), to tell the backend from the policy, and
# `pipe-default`, `pipe-direct`, `pipe-buffered`: the default, --direct-io, --no-direct-io
# with the archive on standard input (`cat ARCHIVE | fastuntar -xf -`: no size known ahead).
# --fs ramext4: ext4 on a loop device over a sparse file in /dev/shm (the disk out of the
# way); diskext4: ext4 on a direct-IO loop device over a preallocated file in WORKDIR (the
# virtio disk, a fresh filesystem every run), as scripts/bench.sh makes them.
# --base BIN adds the mode `base`: that binary with the default flags (the policy before a
# change). Prints every run, then per filesystem and size the medians, the ranges, the
# ratios direct / buffered and default / direct (each the median of the ratios of the runs
# paired round by round), the median CPU (user+sys) and the load average. Root only. Raw
# runs: WORKDIR/crossover-<timestamp>.tsv.
set -euo pipefail
export LC_ALL=C

SCALES=0.01,0.02,0.05,0.1,0.2,0.45
FSES=ramext4,diskext4
ROUNDS=3
MODES=buffered,direct,default
BASE=""
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$REPO/target/release/fastuntar
WORKDIR=${BENCH_DIR:-/work/bench}
KIND=agave
while (($#)); do
    case $1 in
    --scales) SCALES=$2; shift 2 ;;
    --fs) FSES=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --base) BASE=$(realpath -- "$2"); shift 2 ;;
    --bin) BIN=$(realpath -- "$2"); shift 2 ;;
    --workdir) WORKDIR=$2; shift 2 ;;
    --kind) KIND=$2; shift 2 ;;
    -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "direct-crossover.sh: unknown argument: $1" >&2; exit 2 ;;
    esac
done
die() { echo "direct-crossover.sh: $*" >&2; exit 2; }
[[ $(id -u) == 0 ]] || die "needs root (losetup, mkfs, mount, drop_caches)"
[[ -x $BIN ]] || die "$BIN: not built (cargo build --release)"
IFS=, read -r -a scales <<<"$SCALES"
IFS=, read -r -a fses <<<"$FSES"
IFS=, read -r -a modes <<<"$MODES"
[[ -n $BASE ]] && modes+=(base)
for f in "${fses[@]}"; do [[ $f == ramext4 || $f == diskext4 ]] || die "--fs: ramext4, diskext4"; done
mkdir -p "$WORKDIR"
WORKDIR=$(cd "$WORKDIR" && pwd)
TSV=$WORKDIR/crossover-$(date +%Y%m%d-%H%M%S).tsv
: >"$TSV"

img="" loop="" mnt=$(mktemp -d /tmp/fastuntar-crossover.XXXXXX)
disk_img=$WORKDIR/crossover-$$.img
down() {
    if mountpoint -q "$mnt"; then umount "$mnt"; fi
    if [[ -n $loop ]]; then losetup -d "$loop" 2>/dev/null || true; loop=""; fi
    if [[ -n $img && $img == /dev/shm/* ]]; then rm -f -- "$img"; fi
    img=""
}
# Free page reporting, as scripts/bench.sh (--keep-page-reporting there) handles it: off for
# the run (order 11, above the largest free block; restored on exit), and TOUCH_GIB of free
# memory touched once, so that the pages a buffered run writes into are backed by the host.
PR_ORDER=/sys/module/page_reporting/parameters/page_reporting_order
PR_SAVED=""
TOUCH_GIB=${TOUCH_GIB:-8}
cleanup() {
    down
    rm -f -- "$disk_img" "/dev/shm/fastuntar-crossover-$$.touch"
    rmdir "$mnt" 2>/dev/null || true
    if [[ -n $PR_SAVED ]]; then echo "$PR_SAVED" >"$PR_ORDER" 2>/dev/null || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A fresh ext4 of $2 bytes for filesystem kind $1, mounted on $mnt.
up() {
    down
    if [[ $1 == diskext4 ]]; then
        if [[ ! -f $disk_img ]] || (($(stat -c %s "$disk_img") < $2)); then
            rm -f -- "$disk_img"
            fallocate -l "$2" "$disk_img"
        fi
        img=$disk_img
        loop=$(losetup -f --show --direct-io=on "$img")
    else
        img=/dev/shm/fastuntar-crossover-$$.img
        truncate -s "$2" "$img"
        loop=$(losetup -f --show "$img")
    fi
    mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "$loop"
    mount "$loop" "$mnt"
    mkdir "$mnt/d"
}

args_of() {
    case $1 in
    buffered) echo "$BIN --no-direct-io" ;;
    direct) echo "$BIN --direct-io" ;;
    default) echo "$BIN" ;;
    portable) echo "$BIN --direct-io --io portable" ;;
    uring-buffered) echo "$BIN --no-direct-io --io uring" ;;
    portable-buffered) echo "$BIN --no-direct-io --io portable" ;;
    pipe-default) echo "$BIN" ;;
    pipe-direct) echo "$BIN --direct-io" ;;
    pipe-buffered) echo "$BIN --no-direct-io" ;;
    base) echo "$BASE" ;;
    *) die "unknown mode $1" ;;
    esac
}

if [[ -w $PR_ORDER ]]; then
    PR_SAVED=$(<"$PR_ORDER")
    echo 11 >"$PR_ORDER"
    dd if=/dev/zero of="/dev/shm/fastuntar-crossover-$$.touch" bs=1M count=$((TOUCH_GIB << 10)) status=none || true
    rm -f -- "/dev/shm/fastuntar-crossover-$$.touch"
    echo "free page reporting off for the run (order $PR_SAVED -> 11), $TOUCH_GIB GiB of free memory touched"
fi
now() { local t=${EPOCHREALTIME/./}; echo "$t"; }
echo "direct-crossover: $(date -u +%Y-%m-%dT%H:%M:%SZ) $(nproc) CPUs, $(uname -r), binary $BIN ($(sha256sum "$BIN" | cut -c1-12))"
echo "command: $0 $*"
for scale in "${scales[@]}"; do
    dir=$WORKDIR/scale-$scale
    python3 "$REPO/scripts/gen-archives.py" "$dir" --scale "$scale" --only "$KIND" >/dev/null
    archive=$dir/$KIND.tar.zst
    tar_bytes=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["stats"]["tar_bytes"])' "$archive.json")
    size=$((tar_bytes * 5 / 2))
    ((size > 1 << 30)) || size=$((1 << 30))
    size=$(((size + (1 << 20) - 1) >> 20 << 20))
    for fs in "${fses[@]}"; do
        for ((r = 0; r < ROUNDS; r++)); do
            n=${#modes[@]}
            for ((i = 0; i < n; i++)); do
                mode=${modes[$(((i + r) % n))]}
                read -r -a cmd <<<"$(args_of "$mode")"
                up "$fs" "$size"
                sync
                echo 3 >/proc/sys/vm/drop_caches
                load=$(cut -d' ' -f1 /proc/loadavg)
                t0=$(now)
                rc=0
                if [[ $mode == pipe-* ]]; then
                    /usr/bin/time -f '%U %S' -o "$mnt.cpu" bash -c 'cat -- "$1" | "${@:3}" -xf - -C "$2"' \
                        _ "$archive" "$mnt/d" "${cmd[@]}" >/dev/null 2>"$mnt.err" || rc=$?
                else
                    /usr/bin/time -f '%U %S' -o "$mnt.cpu" "${cmd[@]}" -xf "$archive" -C "$mnt/d" \
                        >/dev/null 2>"$mnt.err" || rc=$?
                fi
                t1=$(now)
                sync
                t2=$(now)
                cpu=$(awk 'END { printf "%.2f", $1 + $2 }' "$mnt.cpu")
                ((rc == 0)) || echo "  $mode exited $rc: $(head -c 300 "$mnt.err")" >&2
                rm -f "$mnt.cpu" "$mnt.err"
                printf '%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%d\n' "$fs" "$scale" "$tar_bytes" "$mode" \
                    $((t1 - t0)) $((t2 - t0)) "$cpu" "$load" "$rc" >>"$TSV"
                printf '%-8s %-5s tree %5d MB  %-8s round %d  return %6.2f s  durable %6.2f s  cpu %5s s  load %s\n' \
                    "$fs" "$scale" $((tar_bytes / 1000000)) "$mode" $((r + 1)) \
                    "$(awk -v u=$((t1 - t0)) 'BEGIN { print u / 1e6 }')" \
                    "$(awk -v u=$((t2 - t0)) 'BEGIN { print u / 1e6 }')" "$cpu" "$load"
            done
        done
        down
    done
done

python3 - "$TSV" "${modes[@]}" <<'PY'
import statistics as st, sys
tsv, modes = sys.argv[1], sys.argv[2:]
runs = {}
for line in open(tsv):
    fs, scale, tree, mode, ret, dur, cpu, load, rc = line.rstrip("\n").split("\t")
    runs.setdefault((fs, float(scale), int(tree)), {}).setdefault(mode, []).append(
        (int(ret) / 1e6, int(dur) / 1e6, float(cpu), float(load), int(rc)))
def med(xs): return st.median(xs) if xs else float("nan")
print()
head = ["fs", "tree MB"] + [f"{m} return / durable (s)" for m in modes] + [
    "direct/buffered return", "direct/buffered durable"] + (
    ["default/direct durable"] if "default" in modes and "direct" in modes else []) + (
    ["default/base durable"] if "base" in modes and "default" in modes else []) + [
    "CPU " + "/".join(modes) + " (s)", "load"]
print("| " + " | ".join(head) + " |")
print("|" + "|".join(["---"] * 2 + ["---:"] * (len(head) - 2)) + "|")
for (fs, scale, tree), by in sorted(runs.items()):
    cells = [fs, f"{tree / 1e6:.0f}"]
    m = {}
    for mode in modes:
        rs = [x for x in by.get(mode, []) if x[4] == 0]
        m[mode] = (med([x[0] for x in rs]), med([x[1] for x in rs]), med([x[2] for x in rs]))
        rng = lambda i: f"{min(x[i] for x in rs):.2f}-{max(x[i] for x in rs):.2f}" if rs else "-"
        cells.append(f"{m[mode][0]:.2f} ({rng(0)}) / {m[mode][1]:.2f} ({rng(1)})")
    # Ratios paired run by run (the k-th run of one mode with the k-th of the other: the
    # same round), then the median: drift on the host hits both of a pair.
    def paired(a, b, i):
        ra = [x for x in by.get(a, []) if x[4] == 0]
        rb = [x for x in by.get(b, []) if x[4] == 0]
        return f"{med([x[i] / y[i] for x, y in zip(ra, rb)]):.2f}"
    if "direct" in m and "buffered" in m:
        cells += [paired("direct", "buffered", 0), paired("direct", "buffered", 1)]
    else:
        cells += ["-", "-"]
    if "default" in modes and "direct" in modes:
        cells.append(paired("default", "direct", 1))
    if "base" in modes and "default" in modes:
        cells.append(paired("default", "base", 1))
    cells.append("/".join(f"{m[x][2]:.2f}" for x in modes))
    loads = [x[3] for v in by.values() for x in v]
    cells.append(f"{min(loads):.1f}-{max(loads):.1f}")
    print("| " + " | ".join(cells) + " |")
print(f"\nraw runs: {tsv}")
PY
