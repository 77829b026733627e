#!/usr/bin/env bash
# Benchmark fastuntar against GNU tar, bsdtar and the decoding floor.
#
#   scripts/bench.sh [--rounds N] [--scale F] [--workdir DIR] [--only KEY[,KEY...]]
#                    [--fs disk|diskext4|ramext4[,...]] [--threads N[,N...]] [--bin PATH] [--no-build]
#                    [--no-dd] [--timeout SEC] [--quiet-wait SEC] [--keep-trees]
#                    [--keep-page-reporting] [--read-back] [--contestants KEY[,KEY...]]
#
# KEY: snapshot, smallfiles, agave (= agave, agave-1frame and agave-lz4: the multi-frame
# agave.tar.zst, the single-frame agave-1frame.tar.zst and agave.tar.lz4), or one of those
# three alone (agave-frames: the multi-frame agave.tar.zst alone), or agave-mid (the
# multi-frame archive at 0.45x the scale, in WORKDIR/scale-<0.45 x F>: at scale 1 615 MB of
# 55 zstd frames that unpack to 1.8 GB, under the 1 GiB of compressed archive that once kept
# the default buffered, over it unpacked: issue 40); default: all.
# `--only url` runs the time-to-ready table of a restore from a URL instead
# (scripts/bench-url.sh: nginx with a per-connection cap on 127.0.0.1, fastuntar -x URL,
# curl | fastuntar, curl | tar, aria2c then extract, a local extraction; its own options).
# `--only chart` runs it for the README's chart (docs/time-to-restore.svg): fastuntar, GNU
# tar, bsdtar and the tar crate from a local file, and fastuntar -x URL, aria2c then
# fastuntar or GNU tar, curl | fastuntar or GNU tar from nginx; the table as summary.md and
# summary.tsv, drawn by scripts/plot-chart.py.
# --fs disk (default) extracts into WORKDIR on its disk; --fs ramext4 into a fresh ext4 made
# for every run on a loop device backed by a file in /dev/shm (2.5x the tar size, at least
# 2 GiB; torn down after the run and on exit or Ctrl-C), so that the disk is out of the way and
# CPU-bound effects show (its write rates are printed: on a 2-vCPU VM the loop device's copy
# competes for the CPUs, and buffered writeback through it can be slower than the real disk).
# --fs diskext4 into a fresh journaled ext4 made for every run on a loop device with direct IO
# over a preallocated file in WORKDIR: the virtio disk, but every run starts from a new
# filesystem (WORKDIR's own ext4 here has no journal and, after a tree is deleted, every
# extractor's inode allocation slows 2-3x: see --keep-trees), as a user's disk would be.
# Archives always stay in WORKDIR.  A list runs every archive on each filesystem.
# --threads (default: 1 and the CPU count) is the sweep for the agave zstd archives: rows
# `fastuntar -t --threads N` (list only, output to /dev/null) and `fastuntar -x --direct-io
# --threads N`.  If fastuntar has no --threads, N=1 runs without the flag (the single decoder)
# and the other rows are skipped with the reason.
# --bin PATH benchmarks that fastuntar binary instead of building one (implies --no-build).
# --keep-trees (disk): every run extracts into a new directory and the trees are deleted only
# when the script ends. This machine's root ext4 has no journal, and there ext4's inode
# allocator checks every free inode it considers for a recent deletion (`recently_deleted`,
# reading the inode table): right after `rm -rf` of a 100k-file tree, small-files runs took
# 2-3x longer and 2 writer threads 3x longer than 1 (perf: find_get_block_common,
# recently_deleted, find_inode_bit). Needs free space for every tree (~1.1 GB per smallfiles
# run).
# --read-back: after each extraction (and its sync, and the untimed page-cache count), time
# reading every file back: `find DEST -type f -print0 | xargs -0 sha256sum`, caches NOT dropped
# in between, as the program that reads the tree next would. Buffered extractors leave the
# tree in the page cache, direct IO does not (the trade-off Agave met: their index build after
# a direct untar took 51.0 s instead of 42.8 s). The tables then add "read back" and
# "extract+sync+read back" columns.
# --contestants KEY[,KEY...]: only these rows (fu_default, fu_nodirect, fu_direct, fu_portable,
# fu_w1, fu_list_tN, fu_direct_tN, gnutar, bsdtar, zstd, lz4), where the archive has them.
# --keep-page-reporting: leave the VM's free page reporting as it is. By default (root, and a
# kernel with virtio-balloon free page reporting, /sys/module/page_reporting) it is switched
# off for the run (page_reporting_order 11, above the largest free block; restored on exit) and
# free memory is touched once: a reported page is handed back to the host, and the next write
# into it faults in the hypervisor. Every `drop_caches` freed gigabytes that were then reported,
# and the next run that wrote buffered paid for them: 20 GB written to /dev/shm took 48 s the
# first time and 8 s the second; buffered extractions of snapshot.tar.zst took 2.1-2.6 s or
# 5.3-7.4 s (11.7 s of system time, in copy_folio_from_iter_atomic) depending on that alone.
#
# Builds fastuntar (cargo build --release), generates the archives with
# scripts/gen-archives.py (reused when up to date), measures raw disk rates with dd, then runs
# every contestant on every archive in interleaved rounds (round 1: A B C D E F, round 2: ...),
# each into a fresh empty destination, each preceded by `sync; echo 3 > /proc/sys/vm/drop_caches`
# (root only).  Figures per run:
#   extract+sync  wall clock of `CMD; sync` (the data is on disk when the clock stops)
#   extract only  wall clock of CMD alone
#   peak RSS      /usr/bin/time -f %M around CMD (for GNU tar: max of tar and its zstd child)
#   CPU           user+sys of CMD and the children it waited for (/usr/bin/time %U + %S)
#   cache growth  `Cached:` minus `Shmem:` of /proc/meminfo after CMD minus before CMD (before
#                 the sync; Shmem is taken out so the ramext4 backing file does not count)
# Other processes' CPU use during a run is recorded; before each run the script waits up to
# --quiet-wait seconds (default 60, 0 = off) for the machine to be idle.  A failing or missing
# fastuntar (it is under development) marks its rows failed instead of aborting.
# Results go to WORKDIR/results/<timestamp>/ (raw TSV, logs, summary.txt, summary.md).
# See docs/PERFORMANCE.md.
set -euo pipefail
export LC_ALL=C # EPOCHREALTIME must use '.' as its decimal separator
for a in "$@"; do
    [[ $a == url || $a == --only=url || $a == chart || $a == --only=chart ]] &&
        exec "$(dirname "$0")/bench-url.sh" "$@"
done

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

ROUNDS=3
SCALE=1
WORKDIR=${BENCH_DIR:-/work/bench}
ONLY=""
FS_ARG=disk
THREADS_ARG=""
BIN_ARG=""
BUILD=1
DD=1
KEEP_TREES=0
KEEP_REPORTING=0
READ_BACK=0
ONLY_ROWS=""
RUN_SEQ=0
TIMEOUT=1800
QUIET_WAIT=60
ORIG_ARGS=("$@")

while (($#)); do
    case $1 in
    --rounds) ROUNDS=${2:?--rounds needs a value}; shift 2 ;;
    --scale) SCALE=${2:?--scale needs a value}; shift 2 ;;
    --workdir) WORKDIR=${2:?--workdir needs a value}; shift 2 ;;
    --only) ONLY=${2:?--only needs a value}; shift 2 ;;
    --fs) FS_ARG=${2:?--fs needs a value}; shift 2 ;;
    --threads) THREADS_ARG=${2:?--threads needs a value}; shift 2 ;;
    --bin) BIN_ARG=${2:?--bin needs a value}; BUILD=0; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --no-dd) DD=0; shift ;;
    --keep-trees) KEEP_TREES=1; shift ;;
    --keep-page-reporting) KEEP_REPORTING=1; shift ;;
    --read-back) READ_BACK=1; shift ;;
    --contestants) ONLY_ROWS=${2:?--contestants needs a value}; shift 2 ;;
    --timeout) TIMEOUT=${2:?--timeout needs a value}; shift 2 ;;
    --quiet-wait) QUIET_WAIT=${2:?--quiet-wait needs a value}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "bench.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
done
die() { echo "bench.sh: $*" >&2; exit 2; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer"
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "--timeout must be a positive integer"
[[ $QUIET_WAIT =~ ^[0-9]+$ ]] || die "--quiet-wait must be a non-negative integer"
((BASH_VERSINFO[0] >= 5)) || die "needs bash >= 5 (EPOCHREALTIME)"
NPROC=$(nproc)
# Archive keys: each is one archive file; `agave` on the command line means all three agave files.
KEYS=()
GEN_KINDS=()
IFS=, read -r -a only_list <<<"${ONLY:-snapshot,smallfiles,agave,agave-mid}"
for k in "${only_list[@]}"; do
    case $k in
    snapshot | smallfiles) KEYS+=("$k"); GEN_KINDS+=("$k") ;;
    agave) KEYS+=(agave agave-1frame agave-lz4); GEN_KINDS+=(agave) ;;
    agave-1frame | agave-lz4) KEYS+=("$k"); GEN_KINDS+=(agave) ;;
    agave-frames) KEYS+=(agave); GEN_KINDS+=(agave) ;;
    agave-mid) KEYS+=(agave-mid) ;;
    *) die "--only: unknown archive '$k' (snapshot, smallfiles, agave, agave-frames, agave-1frame, agave-lz4, agave-mid)" ;;
    esac
done
# Deduplicate, keeping the first occurrence.
dedup() { local -A seen=(); local x; for x in "$@"; do [[ -n ${seen[$x]:-} ]] || { seen[$x]=1; printf '%s\n' "$x"; }; done; }
mapfile -t KEYS < <(dedup "${KEYS[@]}")
mapfile -t GEN_KINDS < <(dedup "${GEN_KINDS[@]}")
IFS=, read -r -a FS_LIST <<<"$FS_ARG"
for f in "${FS_LIST[@]}"; do
    [[ $f == disk || $f == diskext4 || $f == ramext4 ]] ||
        die "--fs: disk, diskext4 or ramext4 (or a list: disk,ramext4), not '$f'"
done
mapfile -t FS_LIST < <(dedup "${FS_LIST[@]}")
IFS=, read -r -a THREADS <<<"${THREADS_ARG:-1,$NPROC}"
for t in "${THREADS[@]}"; do [[ $t =~ ^[1-9][0-9]*$ ]] || die "--threads: positive integers, e.g. 1,2 (got '$t')"; done
mapfile -t THREADS < <(dedup "${THREADS[@]}")

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Where cargo puts the release binary: honours CARGO_TARGET_DIR and cargo's config.
TARGET_DIR=$(cd "$REPO" && cargo metadata --format-version 1 --no-deps 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])' 2>/dev/null || true)
BIN=${TARGET_DIR:-$REPO/target}/release/fastuntar
if [[ -n $BIN_ARG ]]; then BIN=$(realpath -- "$BIN_ARG"); fi
mkdir -p "$WORKDIR"
WORKDIR=$(cd "$WORKDIR" && pwd)
# Scale 1 archives live in WORKDIR itself; other scales get their own directory so a quick
# smoke run never overwrites the full-size archives.
if [[ $SCALE == 1 || $SCALE == 1.0 ]]; then ARCHDIR=$WORKDIR; else ARCHDIR=$WORKDIR/scale-$SCALE; fi
# agave-mid: the agave archives at 0.45x the scale, in a directory of their own.
MID_SCALE=$(awk -v s="$SCALE" 'BEGIN { printf "%g", 0.45 * s }')
MID_DIR=$WORKDIR/scale-$MID_SCALE
RESULTS=$WORKDIR/results/$(date +%Y%m%d-%H%M%S)
mkdir -p "$RESULTS/logs"
TSV=$RESULTS/runs.tsv
META=$RESULTS/meta.tsv
: >"$TSV"
: >"$META"
DISK_DEST=$WORKDIR/dest
DEST=$DISK_DEST
REFTMP=$WORKDIR/ref.tmp
DDFILE=$WORKDIR/dd.tmp
# --fs ramext4 / diskext4: the backing file (named after this process, so two benches never
# share one), its loop device and the mount point.
RAM_IMG=/dev/shm/fastuntar-bench-$$.img
DISK_IMG=$WORKDIR/diskext4-$$.img
RAM_MNT=$WORKDIR/ramext4.mnt
RAM_LOOP=""
RAM_MOUNTED=0

say() { printf '%s\n' "$*"; }
hr() { say "------------------------------------------------------------------------------"; }

# Unmounts and frees the ramext4 filesystem, if this process made one (idempotent).
ram_down() {
    local i
    if ((RAM_MOUNTED)); then
        for i in 1 2 3 4 5; do
            umount "$RAM_MNT" 2>/dev/null && break
            sleep 1 # a killed extractor may still hold it for a moment
        done
        mountpoint -q "$RAM_MNT" && umount -l "$RAM_MNT"
        RAM_MOUNTED=0
    fi
    if [[ -n $RAM_LOOP ]]; then
        losetup -d "$RAM_LOOP" 2>/dev/null || true
        RAM_LOOP=""
    fi
    rm -f -- "$RAM_IMG" # the diskext4 image stays allocated until cleanup
}
# Makes a fresh ext4 of $1 bytes on a loop device and mounts it: ramext4 over a sparse file in
# /dev/shm, diskext4 over a file in WORKDIR preallocated once (fallocate) and read and written
# with O_DIRECT by the loop device, so the data goes to the disk without a second page cache.
# lazy_itable_init=0/lazy_journal_init=0: no ext4lazyinit thread zeroing inode tables during
# the timed run (mkfs does it up front: ~0.1 s for 10 GB on tmpfs); nodiscard: the file is new
# (or, on diskext4, stays allocated: a discard would punch holes into it).
ram_up() {
    ram_down
    if [[ $FS == diskext4 ]]; then
        if [[ ! -f $DISK_IMG ]] || (($(stat -c %s "$DISK_IMG") < $1)); then
            rm -f -- "$DISK_IMG"
            fallocate -l "$1" "$DISK_IMG"
        fi
        RAM_LOOP=$(losetup -f --show --direct-io=on "$DISK_IMG")
    else
        truncate -s "$1" "$RAM_IMG"
        RAM_LOOP=$(losetup -f --show "$RAM_IMG")
    fi
    mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "$RAM_LOOP"
    mkdir -p "$RAM_MNT"
    mount "$RAM_LOOP" "$RAM_MNT"
    RAM_MOUNTED=1
}

# Free page reporting: the order it had before this run ("" = not changed).
PR_ORDER=/sys/module/page_reporting/parameters/page_reporting_order
PR_SAVED=""
cleanup() {
    if [[ -n $PR_SAVED ]]; then echo "$PR_SAVED" >"$PR_ORDER" 2>/dev/null || true; PR_SAVED=""; fi
    rm -f -- "/dev/shm/fastuntar-bench-$$.touch"
    rm -rf -- "$DISK_DEST" "$REFTMP" "$DDFILE"
    ram_down
    rm -f -- "$DISK_IMG"
    rmdir "$RAM_MNT" 2>/dev/null || true
}
trap cleanup EXIT
trap 'echo "bench.sh: interrupted" >&2; exit 130' INT TERM
cleanup # leftovers of an interrupted run
# Backing files of earlier benches that died without their trap (kill -9): remove those whose
# process is gone and that no loop device uses any more.
for img in /dev/shm/fastuntar-bench-*.img; do
    [[ -e $img ]] || continue
    pid=${img##*/fastuntar-bench-}
    pid=${pid%.img}
    if [[ $pid =~ ^[0-9]+$ ]] && ! kill -0 "$pid" 2>/dev/null && [[ -z $(losetup -j "$img" 2>/dev/null) ]]; then
        say "removing stale $img"
        rm -f -- "$img"
    fi
done

IS_ROOT=0
[[ $(id -u) == 0 ]] && IS_ROOT=1
for f in "${FS_LIST[@]}"; do
    if [[ $f == ramext4 || $f == diskext4 ]]; then
        ((IS_ROOT)) || die "--fs $f needs root (losetup, mkfs, mount)"
        for tool in losetup mkfs.ext4 mount umount truncate fallocate; do
            command -v $tool >/dev/null || die "--fs $f needs $tool"
        done
    fi
done
# See --keep-page-reporting. The touch writes a tmpfs file over all but 2 GiB of free memory
# and deletes it; with reporting off, what it freed stays backed.
if ((IS_ROOT && !KEEP_REPORTING)) && [[ -w $PR_ORDER ]]; then
    PR_SAVED=$(<"$PR_ORDER")
    echo 11 >"$PR_ORDER"
    touch_mib=$(($(awk '/^MemFree:/ {print $2}' /proc/meminfo) / 1024 - 2048))
    shm_mib=$(($(df -B1M --output=avail /dev/shm | tail -n1 | tr -d ' ') - 256))
    ((touch_mib < shm_mib)) || touch_mib=$shm_mib
    if ((touch_mib > 0)); then
        t0=$EPOCHREALTIME
        dd if=/dev/zero of="/dev/shm/fastuntar-bench-$$.touch" bs=1M count=$touch_mib status=none || true
        rm -f -- "/dev/shm/fastuntar-bench-$$.touch"
        PR_NOTE="free page reporting off for the run (order $PR_SAVED -> 11); $touch_mib MiB of free memory touched in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}') s"
    else
        PR_NOTE="free page reporting off for the run (order $PR_SAVED -> 11)"
    fi
elif [[ -e $PR_ORDER ]]; then
    PR_NOTE="free page reporting left on (order $(<"$PR_ORDER")): buffered runs may pay the hypervisor for freed memory"
else
    PR_NOTE="no free page reporting"
fi
FS=disk # the filesystem of the current run
# Settles the filesystem before a timed run: the previous run's `rm -rf` of a 100k-file tree
# leaves discards (ext4 here is mounted with `discard`) and freed-inode work that made the
# next extraction, whoever ran it, 2-2.5x slower (measured: 11 s instead of 4.3-5 s on
# smallfiles). fstrim issues the pending discards now, outside the timed region.  On ramext4
# every run gets a new filesystem, so there is nothing to trim (the archive's disk is only read).
drop_caches() {
    sync
    if [[ $FS == disk ]] && ((IS_ROOT)) && command -v fstrim >/dev/null; then
        fstrim "$(df --output=target "$WORKDIR" | tail -n 1)" 2>/dev/null || true
    fi
    if ((IS_ROOT)); then echo 3 >/proc/sys/vm/drop_caches; fi
}
# Sets CACHED_KB to Cached: minus Shmem: of /proc/meminfo without forking (it runs inside the
# timed region).  Shmem (tmpfs, /dev/shm) is part of Cached:; taking it out keeps the ramext4
# backing file, which grows by every byte written, out of the page-cache figure.
read_cached() {
    local k v _u cached=0 shmem=0
    while read -r k v _u; do
        case $k in
        Cached:) cached=$v ;;
        Shmem:) shmem=$v; break ;;
        esac
    done </proc/meminfo
    CACHED_KB=$((cached - shmem))
}
now_us() { NOW_US=${EPOCHREALTIME/./}; }
# Sets USER_TICKS to the system-wide user+nice CPU time (USER_HZ ticks) without forking.
read_user_ticks() {
    local _cpu user nice _rest
    read -r _cpu user nice _rest </proc/stat
    USER_TICKS=$((user + nice))
}
fmt_s() { printf '%d.%03d' $(($1 / 1000000)) $(($1 / 1000 % 1000)); }
meminfo_kb() { awk -v k="$1:" '$1 == k { print $2 }' /proc/meminfo; }

# Before each run, wait up to QUIET_WAIT seconds until other processes use < 10% of one CPU
# (user time over 1 s), so that e.g. a concurrent cargo build does not pollute the figures.
wait_quiet() {
    local waited=0 u0 busy
    ((QUIET_WAIT > 0)) || return 0
    while :; do
        read_user_ticks; u0=$USER_TICKS
        sleep 1
        read_user_ticks; busy=$((USER_TICKS - u0))
        ((busy < 10)) && return 0
        waited=$((waited + 1))
        if ((waited >= QUIET_WAIT)); then
            say "    note: machine still busy (other processes at ${busy}% CPU) after ${QUIET_WAIT}s; running anyway"
            return 0
        fi
    done
}

# ---------------------------------------------------------------------------- machine facts
hr
say "fastuntar benchmark  $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say "command:  $(printf '%q ' "$0" "${ORIG_ARGS[@]}")"
say "workdir:  $WORKDIR   results: $RESULTS"
FS_SRC=$(findmnt -no SOURCE -T "$WORKDIR")
FS_LINE=$(findmnt -no SOURCE,FSTYPE,OPTIONS -T "$WORKDIR")
DISK=$(lsblk -no PKNAME "$FS_SRC" 2>/dev/null | head -n1 || true)
[[ -n $DISK ]] || DISK=$(basename "$FS_SRC")
DISK_LINE=$(lsblk -dno NAME,SIZE,ROTA,LOG-SEC,PHY-SEC "/dev/$DISK" 2>/dev/null | tr -s ' ' || true)
DISK_MODEL=$(lsblk -dno MODEL "/dev/$DISK" 2>/dev/null | sed 's/ *$//' || true)
DISK_DRIVER=$(basename "$(readlink "/sys/block/$DISK/device/driver" 2>/dev/null || echo '?')")
SCHED=$(cat "/sys/block/$DISK/queue/scheduler" 2>/dev/null || echo "?")
{
    say "cpu:      $NPROC x $(lscpu | sed -n 's/^Model name: *//p' | head -n1)"
    say "memory:   $(awk '/^MemTotal:/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo), available now $(awk '/^MemAvailable:/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo); /dev/shm: $(df -h --output=used,size /dev/shm | tail -n1 | tr -s ' ') used/size"
    say "load:     $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min)"
    say "kernel:   $(uname -sr)"
    say "memory:   $PR_NOTE"
    say "fs:       $FS_LINE (archives; destination for --fs disk)"
    say "disk:     $DISK_LINE (name size rota log-sec phy-sec), model '${DISK_MODEL:-none reported}', driver $DISK_DRIVER, scheduler $SCHED"
    say "dest fs:  ${FS_LIST[*]}$([[ " ${FS_LIST[*]} " == *" ramext4 "* ]] && echo " (ramext4: ext4, mkfs per run, on a loop device over $RAM_IMG)")$([[ " ${FS_LIST[*]} " == *" diskext4 "* ]] && echo " (diskext4: ext4, mkfs per run, on a direct-IO loop device over $DISK_IMG)")"
    say "dirty:    vm.dirty_ratio=$(cat /proc/sys/vm/dirty_ratio) vm.dirty_background_ratio=$(cat /proc/sys/vm/dirty_background_ratio)"
    say "tools:    $(tar --version | head -n1); $(zstd --version 2>&1 | head -n1); $(lz4 --version 2>&1 | head -n1); $(python3 --version)"
} | tee "$RESULTS/machine.txt"
if ((IS_ROOT)); then
    say "caches:   dropped before every run (sync; fstrim on disk; echo 3 > /proc/sys/vm/drop_caches)"
else
    say "caches:   NOT dropped (not root) - every run may start with the archive in the page cache"
    printf 'flag\tnodrop\n' >>"$META"
fi

# ---------------------------------------------------------------------------- build
FU_REASON=""
if ((BUILD)); then
    hr
    say "building fastuntar (cargo build --release) ..."
    if ! (cd "$REPO" && cargo build --release) >"$RESULTS/logs/build.log" 2>&1; then
        say "WARNING: cargo build --release failed; fastuntar rows will say failed (not built). Tail of the log:"
        tail -n 15 "$RESULTS/logs/build.log" | sed 's/^/    /'
        FU_REASON="build failed"
    fi
fi
if [[ -z $FU_REASON && ! -x $BIN ]]; then FU_REASON="binary missing: $BIN"; fi
HAVE_THREADS=0
THREADS_REASON=""
NODIRECT_REASON=""
if [[ -z $FU_REASON ]]; then
    say "fastuntar: $BIN ($("$BIN" --version 2>&1 | head -n1 || true)), built $(date -u -r "$BIN" +%Y-%m-%dT%H:%M:%SZ), sha256 $(sha256sum "$BIN" | cut -c1-16)" |
        tee -a "$RESULTS/machine.txt"
    if ! "$BIN" --help 2>&1 | grep -q -- '--no-direct-io'; then
        NODIRECT_REASON="fastuntar --help has no --no-direct-io (before issue 31 the default was buffered: see the default row)"
    fi
    if "$BIN" --help 2>&1 | grep -q -- '--threads'; then
        HAVE_THREADS=1
    else
        THREADS_REASON="fastuntar --help has no --threads"
        say "fastuntar: no --threads option yet: the --threads 1 rows run without it (the single decoder), rows for other counts are skipped"
    fi
else
    say "fastuntar: unavailable ($FU_REASON)"
fi

# ---------------------------------------------------------------------------- bsdtar
BSD_REASON=""
if ! command -v bsdtar >/dev/null; then
    if ((IS_ROOT)) && command -v apt-get >/dev/null; then
        say "bsdtar missing: installing libarchive-tools with apt-get ..."
        if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libarchive-tools; } \
            >"$RESULTS/logs/apt.log" 2>&1; then
            BSD_REASON="apt-get install libarchive-tools failed (see logs/apt.log)"
        fi
    elif ((IS_ROOT)); then
        BSD_REASON="bsdtar not installed and no apt-get"
    else
        BSD_REASON="bsdtar not installed and not root (apt-get install libarchive-tools)"
    fi
fi
if [[ -z $BSD_REASON ]] && ! command -v bsdtar >/dev/null; then BSD_REASON="bsdtar still missing after install"; fi
if [[ -z $BSD_REASON ]]; then say "bsdtar:   $(bsdtar --version | head -n1)" | tee -a "$RESULTS/machine.txt"; else say "bsdtar:   skipped: $BSD_REASON"; fi

# ---------------------------------------------------------------------------- archives
hr
say "generating archives (scale $SCALE) into $ARCHDIR ..."
now_us
G0=$NOW_US
if ((${#GEN_KINDS[@]})); then
    python3 "$REPO/scripts/gen-archives.py" "$ARCHDIR" --scale "$SCALE" --only "$(IFS=,; echo "${GEN_KINDS[*]}")" | tee "$RESULTS/archives.txt"
fi
if [[ " ${KEYS[*]} " == *" agave-mid "* ]]; then
    say "agave-mid: scale $MID_SCALE into $MID_DIR"
    python3 "$REPO/scripts/gen-archives.py" "$MID_DIR" --scale "$MID_SCALE" --only agave | sed 's/^/agave-mid: /' | tee -a "$RESULTS/archives.txt"
fi
now_us
say "archives ready in $(fmt_s $((NOW_US - G0))) s"

# Per archive key: its file, the tree it holds (the agave files share one reference listing),
# its compression, and its contestants in run order.
declare -A AFILE=([snapshot]=snapshot.tar.zst [smallfiles]=smallfiles.tar.zst [agave]=agave.tar.zst
    [agave-1frame]=agave-1frame.tar.zst [agave-lz4]=agave.tar.lz4 [agave-mid]=agave.tar.zst)
declare -A TREE=([snapshot]=snapshot [smallfiles]=smallfiles [agave]=agave [agave-1frame]=agave [agave-lz4]=agave
    [agave-mid]=agave)
declare -A COMP=([snapshot]=zstd [smallfiles]=zstd [agave]=zstd [agave-1frame]=zstd [agave-lz4]=lz4 [agave-mid]=zstd)
# Where each archive (and its reference listing) lives.
declare -A ADIR=()
for key in "${KEYS[@]}"; do ADIR[$key]=$ARCHDIR; done
ADIR[agave-mid]=$MID_DIR
declare -A LABEL=(
    [fu_direct]="fastuntar --direct-io" [fu_default]="fastuntar (default flags)"
    [fu_nodirect]="fastuntar --no-direct-io"
    [fu_portable]="fastuntar portable" [fu_w1]="fastuntar --writer-threads 1"
    [gnutar]="GNU tar" [bsdtar]="bsdtar"
    [zstd]="zstd -dc (floor)" [lz4]="lz4 -dc (floor)"
)
declare -A CONTS=()
# fu_default: no options (since issue 31 direct IO where it wins, `auto`); fu_nodirect: every
# file buffered (the default before issue 31).
CONTS[snapshot]="fu_direct fu_default fu_nodirect fu_portable gnutar bsdtar zstd"
# fu_w1: one writer thread (the writer before issue 12), for the small-files scaling figure.
CONTS[smallfiles]="fu_direct fu_default fu_nodirect fu_portable fu_w1 gnutar bsdtar zstd"
sweep=""
for t in "${THREADS[@]}"; do sweep+=" fu_list_t$t"; done
for t in "${THREADS[@]}"; do sweep+=" fu_direct_t$t"; done
CONTS[agave]="${sweep# } fu_direct fu_default fu_nodirect gnutar bsdtar zstd"
CONTS[agave-1frame]=${CONTS[agave]}
CONTS[agave-lz4]="fu_direct fu_default gnutar lz4"
# The default against --direct-io on a tree over 1 GiB from an archive under it (issue 40).
CONTS[agave-mid]="fu_direct fu_default fu_nodirect gnutar bsdtar zstd"
if [[ -n $ONLY_ROWS ]]; then
    IFS=, read -r -a rows_list <<<"$ONLY_ROWS"
    for key in "${!CONTS[@]}"; do
        kept=""
        for c in ${CONTS[$key]}; do
            for w in "${rows_list[@]}"; do [[ $c == "$w" ]] && kept+=" $c"; done
        done
        CONTS[$key]=${kept# }
    done
fi
for t in "${THREADS[@]}"; do
    if ((HAVE_THREADS)) || [[ -n $FU_REASON ]]; then
        LABEL[fu_list_t$t]="fastuntar -t --threads $t"
        LABEL[fu_direct_t$t]="fastuntar -x --direct-io --threads $t"
    elif ((t == 1)); then
        LABEL[fu_list_t$t]="fastuntar -t (no --threads yet)"
        LABEL[fu_direct_t$t]="fastuntar -x --direct-io (no --threads yet)"
    else
        LABEL[fu_list_t$t]="fastuntar -t --threads $t"
        LABEL[fu_direct_t$t]="fastuntar -x --direct-io --threads $t"
    fi
done
for f in "${FS_LIST[@]}"; do printf 'fs\t%s\n' "$f" >>"$META"; done
for key in "${KEYS[@]}"; do
    printf 'order\t%s\t%s\t%s\n' "$key" "${CONTS[$key]}" "${COMP[$key]}" >>"$META"
    for c in ${CONTS[$key]}; do printf 'label\t%s\t%s\n' "$c" "${LABEL[$c]}" >>"$META"; done
done

declare -A EXPECT_FILES=() TAR_BYTES=()
for key in "${KEYS[@]}"; do
    a=${ADIR[$key]}/${AFILE[$key]}
    read -r files fbytes zbytes tbytes < <(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["stats"]
print(s["files"], s["file_bytes"], s.get("compressed_bytes", s["zst_bytes"]), s["tar_bytes"])' "$a.json")
    EXPECT_FILES[$key]=$files
    TAR_BYTES[$key]=$tbytes
    name=${AFILE[$key]}
    [[ $key == agave-mid ]] && name="$name of scale $MID_SCALE (agave-mid)"
    printf 'archive\t%s\t%s\t%s\t%s\t%s\t%s\n' "$key" "$files" "$fbytes" "$zbytes" "$tbytes" "$name" >>"$META"
done

# ramext4 size for an archive: 2.5x its tar stream, at least 2 GiB, in whole MiB.
ram_size() {
    local b=$((TAR_BYTES[$1] * 5 / 2)) min=$((2 << 30))
    ((b > min)) || b=$min
    echo $(((b + 1048575) / 1048576 * 1048576))
}
# Checks that /dev/shm can hold the image and that memory can hold what a run writes into it;
# sets RAM_REASON when not.
# $1: image size, $2: bytes a run writes into it.
RAM_REASON=""
ram_check() {
    local size=$1 need_kb avail_shm avail_mem avail_disk
    RAM_REASON=""
    if [[ $FS == diskext4 ]]; then
        avail_disk=$(df -B1 --output=avail "$WORKDIR" | tail -n1 | tr -d ' ')
        [[ -f $DISK_IMG ]] && avail_disk=$((avail_disk + $(stat -c %s "$DISK_IMG")))
        if ((avail_disk < size + (2 << 30))); then
            RAM_REASON="$WORKDIR has $((avail_disk >> 20)) MiB free, the image needs $((size >> 20)) MiB and 2 GiB stay free"
        fi
        return
    fi
    avail_shm=$(df -B1 --output=avail /dev/shm | tail -n1 | tr -d ' ')
    avail_mem=$(meminfo_kb MemAvailable)
    # A run fills the image with about the tar size plus ext4 metadata, and 1 GiB stays free
    # for everything else (buffered writers also hold the data in the page cache until the
    # sync, but that is reclaimable).
    need_kb=$(($2 / 1024 * 11 / 10 + 1048576))
    RAM_REASON=""
    if ((avail_shm < size)); then
        RAM_REASON="/dev/shm has $((avail_shm >> 20)) MiB free, the image needs $((size >> 20)) MiB"
    elif ((avail_mem < need_kb)); then
        RAM_REASON="MemAvailable $((avail_mem >> 10)) MiB < $((need_kb >> 10)) MiB a run may write into /dev/shm"
    fi
}

# ---------------------------------------------------------------------------- raw disk rates
dd_run() { # label, mib, dd args...
    local label=$1 t0 t1 bytes=$(($2 * 1048576)) last
    shift 2
    rm -f -- "$DDFILE"
    wait_quiet
    drop_caches
    now_us; t0=$NOW_US
    dd "$@" 2>"$RESULTS/logs/dd.err"
    sync
    now_us; t1=$NOW_US
    last=$(tail -n1 "$RESULTS/logs/dd.err")
    printf '  %-48s %7s s  %6.0f MB/s   (dd says: %s)\n' "$label" "$(fmt_s $((t1 - t0)))" \
        "$(awk -v b="$bytes" -v us=$((t1 - t0)) 'BEGIN {print b / us}')" "$last" | tee -a "$RESULTS/disk.txt"
}
if ((DD)); then
    hr
    say "raw rates (each preceded by a cache drop; write times include the final sync)"
    for FS in "${FS_LIST[@]}"; do
        if [[ $FS == disk ]]; then
            DDFILE=$WORKDIR/dd.tmp
            dd_run "disk: dd write 4 GiB oflag=direct + sync" 4096 if=/dev/zero of="$DDFILE" bs=1M count=4096 oflag=direct
            dd_run "disk: dd write 4 GiB buffered + sync" 4096 if=/dev/zero of="$DDFILE" bs=1M count=4096
            rm -f -- "$DDFILE"
        else
            # 2 GiB into a 5 GiB ramext4/diskext4 (what a bench run on it needs anyway at scale 1).
            ram_check $((5 << 30)) $((2 << 30))
            if [[ -n $RAM_REASON ]]; then
                say "  $FS: dd skipped: $RAM_REASON"
                continue
            fi
            now_us; t0=$NOW_US
            ram_up $((5 << 30))
            now_us
            say "  $FS: losetup + mkfs.ext4 + mount of 5 GiB took $(fmt_s $((NOW_US - t0))) s" | tee -a "$RESULTS/disk.txt"
            DDFILE=$RAM_MNT/dd.tmp
            dd_run "$FS: dd write 2 GiB oflag=direct + sync" 2048 if=/dev/zero of="$DDFILE" bs=1M count=2048 oflag=direct
            rm -f -- "$DDFILE"
            dd_run "$FS: dd write 2 GiB buffered + sync" 2048 if=/dev/zero of="$DDFILE" bs=1M count=2048
            ram_down
            DDFILE=$WORKDIR/dd.tmp
        fi
    done
    FS=disk
    for key in "${KEYS[@]}"; do
        a=${ADIR[$key]}/${AFILE[$key]}
        wait_quiet
        drop_caches
        now_us; t0=$NOW_US
        dd if="$a" of=/dev/null bs=1M iflag=direct 2>"$RESULTS/logs/dd.err"
        now_us; t1=$NOW_US
        printf '  %-48s %7s s  %6.0f MB/s\n' "disk: dd read ${AFILE[$key]} iflag=direct" "$(fmt_s $((t1 - t0)))" \
            "$(awk -v b="$(stat -c %s "$a")" -v us=$((t1 - t0)) 'BEGIN {print b / us}')" | tee -a "$RESULTS/disk.txt"
    done
fi

# ---------------------------------------------------------------------------- contestants
# Sets CMD for contestant $1, archive key $2, archive $3, destination $4.
set_cmd() {
    local gnu_filter=zstd
    if [[ ${COMP[$2]} == lz4 ]]; then gnu_filter=lz4; fi
    case $1 in
    fu_direct) CMD=("$BIN" -x "$3" -C "$4" --direct-io) ;;
    fu_default) CMD=("$BIN" -x "$3" -C "$4") ;;
    fu_nodirect) CMD=("$BIN" -x "$3" -C "$4" --no-direct-io) ;;
    fu_portable) CMD=("$BIN" -x "$3" -C "$4" --io portable) ;;
    fu_w1) CMD=("$BIN" -x "$3" -C "$4" --writer-threads 1) ;;
    fu_list_t*)
        CMD=("$BIN" -t -f "$3")
        if ((HAVE_THREADS)); then CMD+=(--threads "${1#fu_list_t}"); fi
        ;;
    fu_direct_t*)
        CMD=("$BIN" -x "$3" -C "$4" --direct-io)
        if ((HAVE_THREADS)); then CMD+=(--threads "${1#fu_direct_t}"); fi
        ;;
    gnutar) CMD=(tar -I "$gnu_filter" -xf "$3" -C "$4") ;;
    bsdtar) CMD=(bsdtar -xf "$3" -C "$4") ;;
    zstd) CMD=(zstd -dc "$3") ;;
    lz4) CMD=(lz4 -dc "$3") ;;
    esac
}
# Contestants that extract nothing: their output goes to /dev/null and there is no tree to check.
no_tree() { [[ $1 == zstd || $1 == lz4 || $1 == fu_list_t* ]]; }
skip_reason() {
    case $1 in
    fu_*)
        if [[ -n $FU_REASON ]]; then
            echo "$FU_REASON"
        elif [[ ! -x $BIN ]]; then
            echo "binary missing"
        elif [[ $1 == fu_list_t* || $1 == fu_direct_t* ]] && ((!HAVE_THREADS)) && [[ ${1##*_t} != 1 ]]; then
            echo "$THREADS_REASON"
        elif [[ $1 == fu_nodirect ]]; then
            echo "$NODIRECT_REASON"
        fi
        ;;
    bsdtar) echo "$BSD_REASON" ;;
    esac
}

# Canonical listing of a tree: type, mode, size (files), mtime, path; then md5 of every file.
# Directories the archive does not hold (created implicitly, e.g. Agave's accounts/) get the
# extraction time as mtime, so their mtime is shown as "implied" (file $2 lists the archive's
# own directories).
manifest() {
    (
        cd "$1"
        find . -mindepth 1 \( -type d -printf 'd %m - %Ts %P\n' \) -o -printf '%y %m %s %Ts %P -> %l\n' |
            awk -v dirs="$2" 'BEGIN { while ((getline l < dirs) > 0) member[l] = 1 }
                $1 == "d" { p = $0; sub(/^d [^ ]* - [^ ]* /, "", p); if (!(p in member)) $4 = "implied" }
                { print }' |
            sort -k5
        find . -type f -print0 | xargs -0 -r -n 512 -P "$NPROC" stdbuf -oL md5sum | sort -k2 # -oL: whole lines, no interleaving
    )
}
# Reference listing from GNU tar, cached next to the archive (keyed by the archive's size+mtime),
# with the list of the archive's own directories beside it.
ref_manifest() {
    local key=$1 tree=${TREE[$1]} a m id
    a=${ADIR[$key]}/${AFILE[$tree]}
    m=${ADIR[$key]}/$tree.manifest
    id="archive $(stat -c '%s %Y' "$a") v2"
    if [[ -f $m && -f $m.dirs && $(head -n1 "$m") == "$id" ]]; then return; fi
    say "building the reference listing of ${AFILE[$tree]} with GNU tar (untimed) ..."
    tar -I zstd -tvf "$a" | awk '$1 ~ /^d/ { p = $NF; sub(/\/$/, "", p); print p }' | sort >"$m.dirs"
    rm -rf -- "$REFTMP"
    mkdir -p "$REFTMP"
    tar -I zstd -xf "$a" -C "$REFTMP"
    { echo "$id"; manifest "$REFTMP" "$m.dirs"; } >"$m.tmp"
    mv "$m.tmp" "$m"
    rm -rf -- "$REFTMP"
}
declare -A VERIFIED=()
HAVE_FINCORE=0
command -v fincore >/dev/null && HAVE_FINCORE=1
# Bytes of the regular files under $1 (a file or a tree) that are resident in the page cache.
resident_bytes() {
    # (printf %.0f, not %d: mawk's %d saturates at 2^31-1)
    find "$1" -type f -print0 | xargs -0 -r fincore -b -n -o RES | awk '{ s += $1 } END { printf "%.0f", s }'
}
mb() { if [[ -n $1 ]]; then echo $(($1 / 1048576)); else echo -; fi; }
# Centiseconds from /usr/bin/time's "S.cc".
csec() { [[ $1 =~ ^([0-9]+)\.([0-9]+)$ ]] && echo $((10#${BASH_REMATCH[1]} * 100 + 10#${BASH_REMATCH[2]})) || echo 0; }

# Prepares the destination of the next run: a fresh empty directory on disk, or a fresh ramext4.
RAM_CYCLE_SHOWN=0
prepare_dest() { # key
    local t0
    if [[ $FS == disk ]] && ((KEEP_TREES)); then
        RUN_SEQ=$((RUN_SEQ + 1))
        DEST=$DISK_DEST/run-$RUN_SEQ
        mkdir -p "$DEST"
    elif [[ $FS == disk ]]; then
        DEST=$DISK_DEST
        rm -rf -- "$DEST"
        mkdir -p "$DEST"
    else
        now_us; t0=$NOW_US
        ram_up "$(ram_size "$1")"
        DEST=$RAM_MNT/dest
        mkdir -p "$DEST"
        now_us
        if ((!RAM_CYCLE_SHOWN)); then
            say "  ($FS of $(($(ram_size "$1") >> 20)) MiB: teardown + losetup + mkfs.ext4 + mount took $(fmt_s $((NOW_US - t0))) s, untimed)"
            RAM_CYCLE_SHOWN=1
        fi
    fi
}
release_dest() {
    if [[ $FS == disk ]]; then ((KEEP_TREES)) || rm -rf -- "$DEST"; else ram_down; fi
}

run_one() { # key archive contestant round
    local key=$1 a=$2 c=$3 r=$4 log=$RESULTS/logs/$FS.$1.$3.r$4 reason rc t0 t1 t2 c0 c1 rss status n
    local u0 u1 ucmd scmd other tline resf="" resa=""
    reason=$(skip_reason "$c")
    if [[ -n $reason ]]; then
        # fastuntar is expected to exist: its absence is a failure; a missing bsdtar or an
        # option fastuntar does not have yet is a skip.
        status=skipped
        [[ $c == fu_* && $reason != "$THREADS_REASON" && $reason != "$NODIRECT_REASON" ]] && status="failed (not built)"
        printf '%s\t%s\t%s\t%s\t%s\t\t\t\t\t\t\t\t\t\n' "$FS" "$key" "$c" "$r" "$status" >>"$TSV"
        printf 'skip\t%s\t%s\t%s\n' "$key" "$c" "$reason" >>"$META"
        printf '  %-40s %s (%s)\n' "${LABEL[$c]}" "$status" "$reason"
        return
    fi
    prepare_dest "$key"
    set_cmd "$c" "$key" "$a" "$DEST"
    if ! command -v "${CMD[0]}" >/dev/null; then
        printf '%s\t%s\t%s\t%s\tmissing\t\t\t\t\t\t\t\t\t\n' "$FS" "$key" "$c" "$r" >>"$TSV"
        printf '  %-40s missing (%s not found)\n' "${LABEL[$c]}" "${CMD[0]}"
        release_dest
        return
    fi
    local out=$log.out
    no_tree "$c" && out=/dev/null
    wait_quiet
    drop_caches
    read_user_ticks; u0=$USER_TICKS
    read_cached; c0=$CACHED_KB
    now_us; t0=$NOW_US
    set +e
    /usr/bin/time -f '%M %U %S' -o "$log.time" timeout -k 10 "$TIMEOUT" "${CMD[@]}" >"$out" 2>"$log.err"
    rc=$?
    now_us; t1=$NOW_US
    read_cached; c1=$CACHED_KB
    sync
    now_us; t2=$NOW_US
    read_user_ticks; u1=$USER_TICKS
    set -e
    # Last line of the -o file (GNU time puts "Command exited with ..." above it on failure).
    tline=$(tail -n1 "$log.time" 2>/dev/null || true)
    rss="" ucmd=0 scmd=0
    if [[ $tline =~ ^([0-9]+)\ ([0-9.]+)\ ([0-9.]+)$ ]]; then
        rss=${BASH_REMATCH[1]}
        ucmd=$(csec "${BASH_REMATCH[2]}") # centiseconds
        scmd=$(csec "${BASH_REMATCH[3]}")
    fi
    # User CPU burnt by *other* processes during the run (ticks are 1/100 s): a concurrent
    # build or similar shows up here and makes the run suspect.
    other=$((u1 - u0 - ucmd))
    ((other >= 0)) || other=0
    status=ok
    if ((rc == 124 || rc == 137)); then
        status=timeout
    elif ((rc != 0)); then
        status=failed
    elif ! no_tree "$c"; then
        n=$(find "$DEST" -type f | wc -l)
        if [[ $n != "${EXPECT_FILES[$key]}" ]]; then
            status=incomplete
            echo "bench.sh: extracted $n regular files, archive has ${EXPECT_FILES[$key]}" >>"$log.err"
        fi
    fi
    # What the run left in the page cache, per file (sync cleans pages but does not evict
    # them), so unlike the Cached: delta this is immune to other processes' activity.
    if [[ $status == ok ]] && ((HAVE_FINCORE)); then
        resa=$(resident_bytes "$a")
        no_tree "$c" || resf=$(resident_bytes "$DEST")
    fi
    # --read-back: every file read back right after, caches not dropped (see the header).
    local rb=""
    if [[ $status == ok ]] && ((READ_BACK)) && ! no_tree "$c"; then
        now_us; t3=$NOW_US
        find "$DEST" -type f -print0 | xargs -0 -r sha256sum >/dev/null
        now_us; rb=$((NOW_US - t3))
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$FS" "$key" "$c" "$r" "$status" $((t2 - t0)) \
        $((t1 - t0)) "$rss" $((c1 - c0)) $((other * 10000)) "$resf" "$resa" $(((ucmd + scmd) * 10000)) "$rb" >>"$TSV"
    printf '  %-40s %-10s extract+sync %8s s  extract %8s s  cpu %s+%s s  rss %5s MB  Cached %+6d MB  resident files/archive %s/%s MB  other-procs cpu %s s%s\n' \
        "${LABEL[$c]}" "$status" "$(fmt_s $((t2 - t0)))" "$(fmt_s $((t1 - t0)))" \
        "$(fmt_s $((ucmd * 10000)))" "$(fmt_s $((scmd * 10000)))" \
        "$((${rss:-0} / 1024))" $(((c1 - c0) / 1024)) "$(mb "$resf")" "$(mb "$resa")" "$(fmt_s $((other * 10000)))" \
        "$([[ -n $rb ]] && echo "  read back $(fmt_s "$rb") s")"
    if [[ $status != ok ]]; then
        say "    exit code $rc; stderr tail ($log.err):"
        tail -n 8 "$log.err" | sed 's/^/      /'
    elif ! no_tree "$c" && [[ $c != gnutar ]] && [[ -z ${VERIFIED[$FS.$key.$c]:-} ]]; then
        # Correctness: the first successful run of each extractor on each archive and
        # filesystem is compared with GNU tar's tree.
        VERIFIED[$FS.$key.$c]=1
        local m=${ADIR[$key]}/${TREE[$key]}.manifest
        if diff <(tail -n +2 "$m") <(manifest "$DEST" "$m.dirs") >"$log.diff"; then
            say "    verify: tree identical to GNU tar's (types, modes, sizes, mtimes, md5)"
            printf 'verify\t%s\t%s\t%s\tok\n' "$FS" "$key" "$c" >>"$META"
        else
            say "    WARNING: tree differs from GNU tar's ($(grep -c '^[<>]' "$log.diff") lines, $log.diff):"
            head -n 12 "$log.diff" | sed 's/^/      /'
            printf 'verify\t%s\t%s\t%s\tdiffers\n' "$FS" "$key" "$c" >>"$META"
        fi
    fi
    release_dest
}

for key in "${KEYS[@]}"; do ref_manifest "$key"; done
for FS in "${FS_LIST[@]}"; do
    for key in "${KEYS[@]}"; do
        a=${ADIR[$key]}/${AFILE[$key]}
        hr
        say "[$FS] archive ${AFILE[$key]}: ${EXPECT_FILES[$key]} files, $(awk -F'\t' -v k="$key" '$1 == "archive" && $2 == k { printf "%d MB of file data, %d MB compressed", $4 / 1e6, $5 / 1e6 }' "$META")"
        if [[ $FS == ramext4 || $FS == diskext4 ]]; then
            ram_check "$(ram_size "$key")" "${TAR_BYTES[$key]}"
            if [[ -n $RAM_REASON ]]; then
                say "  skipped on $FS: $RAM_REASON"
                printf 'fsskip\t%s\t%s\t%s\n' "$FS" "$key" "$RAM_REASON" >>"$META"
                continue
            fi
        fi
        for ((r = 1; r <= ROUNDS; r++)); do
            say "[$FS $key] round $r/$ROUNDS"
            now_us; R0=$NOW_US
            for c in ${CONTS[$key]}; do
                run_one "$key" "$a" "$c" "$r"
            done
            now_us
            say "  (round took $(fmt_s $((NOW_US - R0))) s including cache drops, deletes and checks)"
        done
    done
done
FS=disk
DEST=$DISK_DEST

# ---------------------------------------------------------------------------- summary
hr
python3 - "$TSV" "$META" "$RESULTS" "$(printf '%q ' "$0" "${ORIG_ARGS[@]}")" <<'PY'
import statistics as st
import sys

tsv, meta, results, cmdline = sys.argv[1:5]
labels, archives, verify, skips, fsskips, nodrop = {}, {}, {}, {}, {}, False
orders, comp, fss = {}, {}, []
for line in open(meta):
    f = line.rstrip("\n").split("\t")
    if f[0] == "label":
        labels[f[1]] = f[2]
    elif f[0] == "order":
        orders[f[1]] = f[2].split()
        comp[f[1]] = f[3]
    elif f[0] == "fs":
        fss.append(f[1])
    elif f[0] == "archive":
        archives[f[1]] = dict(files=int(f[2]), file_bytes=int(f[3]), zst=int(f[4]), tar=int(f[5]), file=f[6])
    elif f[0] == "verify":
        verify[(f[1], f[2], f[3])] = f[4]
    elif f[0] == "skip":
        skips[(f[1], f[2])] = f[3]
    elif f[0] == "fsskip":
        fsskips[(f[1], f[2])] = f[3]
    elif f[0] == "flag" and f[1] == "nodrop":
        nodrop = True
runs = {}
for line in open(tsv):
    fs, key, c, r, status, tot, cmd, rss, cache, other, resf, resa, cpu, rb = line.rstrip("\n").split("\t")
    runs.setdefault((fs, key, c), []).append((status, tot, cmd, rss, cache, other, resf, resa, cpu, rb))
read_back = any(x[9] for v in runs.values() for x in v)
FSNAME = {"disk": "disk", "ramext4": "ramext4 (ext4 on a tmpfs-backed loop device)",
          "diskext4": "diskext4 (a fresh journaled ext4 per run on the virtio disk, via a direct-IO loop device)"}
out_txt, out_md = [], []
for fs in fss:
    for key, info in archives.items():
        if (fs, key) in fsskips:
            msg = f"[{FSNAME[fs]}] {info['file']}: not run ({fsskips[(fs, key)]})"
            out_txt += [msg, ""]
            out_md += [f"**{msg}**", ""]
            continue
        order = orders[key]
        floor = comp[key]  # the floor contestant is named after the compressor
        per_file = key == "smallfiles"
        head = ["contestant", "median extract+sync (s)", "min", "max", "median extract only (s)",
                "median CPU user+sys (s)"] + (["CPU per file (us)"] if per_file else []) + [
                "peak RSS (MB)", "page-cache growth (MB, % of bytes)",
                "left resident: files / archive (MB)", "vs GNU tar", f"vs {floor} floor"] + (
                ["median read back (s)", "median extract+sync+read back (s)"] if read_back else [])
        med = {}
        rows = []
        for c in order:
            ok = [x for x in runs.get((fs, key, c), []) if x[0] == "ok"]
            if ok:
                med[c] = st.median(int(x[1]) for x in ok) / 1e6
        for c in order:
            rr = runs.get((fs, key, c), [])
            ok = [x for x in rr if x[0] == "ok"]
            name = labels[c]
            v = verify.get((fs, key, c))
            if v == "differs":
                name += " [OUTPUT DIFFERS]"
            if not ok:
                states = sorted({x[0] for x in rr}) or ["not run"]
                rows.append([name, "/".join(states)] + ["-"] * (len(head) - 2))
                continue
            tot = [int(x[1]) / 1e6 for x in ok]
            cmd = [int(x[2]) / 1e6 for x in ok]
            rss = [int(x[3]) / 1024 for x in ok if x[3]]
            cache = st.median(int(x[4]) for x in ok) / 1024
            resf = [int(x[6]) / 1048576 for x in ok if x[6]]
            resa = [int(x[7]) / 1048576 for x in ok if x[7]]
            cpu = st.median(int(x[8]) for x in ok if x[8]) / 1e6 if any(x[8] for x in ok) else None
            resident = (f"{st.median(resf):.0f}" if resf else "-") + " / " + (f"{st.median(resa):.0f}" if resa else "-")
            m = st.median(tot)
            note = "" if len(ok) == len(rr) else f" ({len(ok)}/{len(rr)} ok)"
            row = [name + note, f"{m:.2f}", f"{min(tot):.2f}", f"{max(tot):.2f}", f"{st.median(cmd):.2f}",
                   f"{cpu:.2f}" if cpu is not None else "?"]
            if per_file:
                row.append(f"{cpu * 1e6 / info['files']:.0f}" if cpu is not None else "?")
            row += [
                f"{max(rss):.0f}" if rss else "?",
                f"{cache:.0f} ({100 * cache * 1048576 / info['file_bytes']:.0f}%)",
                resident,
                f"{med['gnutar'] / m:.2f}x" if "gnutar" in med else "-",
                f"{m / med[floor]:.2f}x" if floor in med else "-",
            ]
            if read_back:
                rb = [int(x[9]) / 1e6 for x in ok if x[9]]
                both = [int(x[1]) / 1e6 + int(x[9]) / 1e6 for x in ok if x[9]]
                row += [f"{st.median(rb):.2f}" if rb else "-", f"{st.median(both):.2f}" if both else "-"]
            rows.append(row)
        nrounds = max((len(v) for (f, k, _), v in runs.items() if f == fs and k == key), default=0)
        title = (f"[{FSNAME[fs]}] {info['file']}: {info['files']} files, {info['file_bytes'] / 1e6:.0f} MB of file data, "
                 f"{info['zst'] / 1e6:.0f} MB compressed; rounds: {nrounds}")
        if nodrop:
            title += "; PAGE CACHE NOT DROPPED (not root)"
        # Runs during which other processes used > 10% of one CPU (user time, and at least
        # 0.2 s of it) are suspect.
        noisy = [f"{labels[c]} r{i + 1} ({int(x[5]) / 1e6:.1f} s)"
                 for c in order for i, x in enumerate(runs.get((fs, key, c), []))
                 if x[0] == "ok" and x[5] and int(x[5]) > max(200_000, 0.10 * int(x[1]))]
        widths = [max(len(head[i]), *(len(r[i]) for r in rows)) for i in range(len(head))]
        fmt = lambda r: "  ".join(x.ljust(widths[i]) if i == 0 else x.rjust(widths[i]) for i, x in enumerate(r))
        notes = []
        if noisy:
            notes.append("WARNING: other processes were busy (user CPU) during: " + ", ".join(noisy))
        for c in order:
            if (key, c) in skips and not any(x[0] == "ok" for x in runs.get((fs, key, c), [])):
                notes.append(f"skipped: {labels[c]}: {skips[(key, c)]}")
        out_txt += [title, fmt(head), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]
        out_txt += notes + [""]
        out_md += [f"**{title}**", "", "| " + " | ".join(head) + " |",
                   "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
        out_md += ["| " + " | ".join(r) + " |" for r in rows] + ([""] + notes if notes else []) + [""]
legend = ("vs GNU tar = GNU tar's median / this median (>1 is faster than GNU tar); "
          "vs zstd/lz4 floor = this median / the median of `zstd -dc` / `lz4 -dc` to /dev/null (1.00 = as fast as "
          "decoding alone). CPU = user+sys of the command and the children it waited for "
          "(GNU tar's zstd included), from /usr/bin/time; kernel threads that are not the "
          "process's own (writeback, the loop device's workers) are not in it. CPU per file = "
          "median CPU / regular files. Page-cache growth = Cached: minus Shmem: in /proc/meminfo after the "
          "command minus before it, system-wide: it includes the archive read through the cache "
          "(see the floor row), the programs' own binaries, and anything other processes did "
          "meanwhile. 'Left resident' is measured per file with fincore after the sync (medians): "
          "extracted files / the archive itself." + (
          " Read back (--read-back) = `find DEST -type f -print0 | xargs -0 sha256sum` right after the sync, "
          "caches not dropped in between." if read_back else ""))
out_txt += [legend, f"command: {cmdline}"]
out_md += [legend, "", f"Command: `{cmdline.strip()}`"]
open(f"{results}/summary.txt", "w").write("\n".join(out_txt) + "\n")
open(f"{results}/summary.md", "w").write("\n".join(out_md) + "\n")
print("\n".join(out_txt))
print()
print("Markdown:")
print()
print("\n".join(out_md))
PY
say ""
say "raw runs: $TSV; logs: $RESULTS/logs"
