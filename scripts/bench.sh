#!/usr/bin/env bash
# Benchmark fastuntar against GNU tar, bsdtar and the zstd decoding floor.
#
#   scripts/bench.sh [--rounds N] [--scale F] [--workdir DIR] [--only snapshot|smallfiles]
#                    [--no-build] [--no-dd] [--timeout SEC] [--quiet-wait SEC]
#
# Builds fastuntar (cargo build --release), generates the archives with
# scripts/gen-archives.py (reused when up to date), measures raw disk rates with dd, then runs
# every contestant on every archive in interleaved rounds (round 1: A B C D E F, round 2: ...),
# each into a fresh empty destination inside the work directory, each preceded by
# `sync; echo 3 > /proc/sys/vm/drop_caches` (root only).  Figures per run:
#   extract+sync  wall clock of `CMD; sync` (the data is on disk when the clock stops)
#   extract only  wall clock of CMD alone
#   peak RSS      /usr/bin/time -f %M around CMD (for GNU tar: max of tar and its zstd child)
#   cache growth  `Cached:` of /proc/meminfo after CMD minus before CMD (before the sync)
# Other processes' CPU use during a run is recorded; before each run the script waits up to
# --quiet-wait seconds (default 60, 0 = off) for the machine to be idle.  A failing or missing
# fastuntar (it is under development) marks its rows failed instead of aborting.
# Results go to WORKDIR/results/<timestamp>/ (raw TSV, logs, summary.txt, summary.md).
# See docs/PERFORMANCE.md.
set -euo pipefail
export LC_ALL=C # EPOCHREALTIME must use '.' as its decimal separator

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

ROUNDS=3
SCALE=1
WORKDIR=${BENCH_DIR:-/work/bench}
ONLY=""
BUILD=1
DD=1
TIMEOUT=1800
QUIET_WAIT=60
ORIG_ARGS=("$@")

while (($#)); do
    case $1 in
    --rounds) ROUNDS=${2:?--rounds needs a value}; shift 2 ;;
    --scale) SCALE=${2:?--scale needs a value}; shift 2 ;;
    --workdir) WORKDIR=${2:?--workdir needs a value}; shift 2 ;;
    --only) ONLY=${2:?--only needs a value}; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --no-dd) DD=0; shift ;;
    --timeout) TIMEOUT=${2:?--timeout needs a value}; shift 2 ;;
    --quiet-wait) QUIET_WAIT=${2:?--quiet-wait needs a value}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "bench.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: --rounds must be a positive integer" >&2; exit 2; }
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: --timeout must be a positive integer" >&2; exit 2; }
[[ $QUIET_WAIT =~ ^[0-9]+$ ]] || { echo "bench.sh: --quiet-wait must be a non-negative integer" >&2; exit 2; }
case $ONLY in "" | snapshot | smallfiles) ;; *) echo "bench.sh: --only snapshot|smallfiles" >&2; exit 2 ;; esac
((BASH_VERSINFO[0] >= 5)) || { echo "bench.sh: needs bash >= 5 (EPOCHREALTIME)" >&2; exit 2; }

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$REPO/target/release/fastuntar
NPROC=$(nproc)
mkdir -p "$WORKDIR"
WORKDIR=$(cd "$WORKDIR" && pwd)
# Scale 1 archives live in WORKDIR itself; other scales get their own directory so a quick
# smoke run never overwrites the full-size archives.
if [[ $SCALE == 1 || $SCALE == 1.0 ]]; then ARCHDIR=$WORKDIR; else ARCHDIR=$WORKDIR/scale-$SCALE; fi
RESULTS=$WORKDIR/results/$(date +%Y%m%d-%H%M%S)
mkdir -p "$RESULTS/logs"
TSV=$RESULTS/runs.tsv
META=$RESULTS/meta.tsv
: >"$TSV"
: >"$META"
DEST=$WORKDIR/dest
REFTMP=$WORKDIR/ref.tmp
DDFILE=$WORKDIR/dd.tmp

cleanup() {
    rm -rf -- "$DEST" "$REFTMP" "$DDFILE"
}
trap cleanup EXIT
trap 'echo "bench.sh: interrupted" >&2; exit 130' INT TERM
cleanup # leftovers of an interrupted run

say() { printf '%s\n' "$*"; }
hr() { say "------------------------------------------------------------------------------"; }

IS_ROOT=0
[[ $(id -u) == 0 ]] && IS_ROOT=1
# Settles the filesystem before a timed run: the previous run's `rm -rf` of a 100k-file tree
# leaves discards (ext4 here is mounted with `discard`) and freed-inode work that made the
# next extraction, whoever ran it, 2-2.5x slower (measured: 11 s instead of 4.3-5 s on
# smallfiles). fstrim issues the pending discards now, outside the timed region.
drop_caches() {
    sync
    if ((IS_ROOT)) && command -v fstrim >/dev/null; then
        fstrim "$(df --output=target "$WORKDIR" | tail -n 1)" 2>/dev/null || true
    fi
    if ((IS_ROOT)); then echo 3 >/proc/sys/vm/drop_caches; fi
}
# Sets CACHED_KB from /proc/meminfo without forking (it runs inside the timed region).
read_cached() {
    local k v _u
    while read -r k v _u; do
        if [[ $k == Cached: ]]; then CACHED_KB=$v; return; fi
    done </proc/meminfo
}
now_us() { NOW_US=${EPOCHREALTIME/./}; }
# Sets USER_TICKS to the system-wide user+nice CPU time (USER_HZ ticks) without forking.
read_user_ticks() {
    local _cpu user nice _rest
    read -r _cpu user nice _rest </proc/stat
    USER_TICKS=$((user + nice))
}
fmt_s() { printf '%d.%03d' $(($1 / 1000000)) $(($1 / 1000 % 1000)); }

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
    say "memory:   $(awk '/^MemTotal:/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
    say "kernel:   $(uname -sr)"
    say "fs:       $FS_LINE"
    say "disk:     $DISK_LINE (name size rota log-sec phy-sec), model '${DISK_MODEL:-none reported}', driver $DISK_DRIVER, scheduler $SCHED"
    say "dirty:    vm.dirty_ratio=$(cat /proc/sys/vm/dirty_ratio) vm.dirty_background_ratio=$(cat /proc/sys/vm/dirty_background_ratio)"
    say "tools:    $(tar --version | head -n1); $(zstd --version 2>&1 | head -n1); $(python3 --version)"
} | tee "$RESULTS/machine.txt"
if ((IS_ROOT)); then
    say "caches:   dropped before every run (sync; fstrim; echo 3 > /proc/sys/vm/drop_caches)"
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
if [[ -z $FU_REASON ]]; then
    say "fastuntar: $BIN ($("$BIN" --version 2>&1 | head -n1 || true)), built $(date -u -r "$BIN" +%Y-%m-%dT%H:%M:%SZ), sha256 $(sha256sum "$BIN" | cut -c1-16)" |
        tee -a "$RESULTS/machine.txt"
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
python3 "$REPO/scripts/gen-archives.py" "$ARCHDIR" --scale "$SCALE" ${ONLY:+--only "$ONLY"} | tee "$RESULTS/archives.txt"
now_us
say "archives ready in $(fmt_s $((NOW_US - G0))) s"
if [[ -n $ONLY ]]; then KEYS=("$ONLY"); else KEYS=(snapshot smallfiles); fi

# ---------------------------------------------------------------------------- raw disk rates
if ((DD)); then
    hr
    say "raw disk rates (4 GiB, each preceded by a cache drop; times include the final sync)"
    dd_run() { # label, dd args...
        local label=$1 t0 t1 bytes=$((4096 * 1048576)) last
        shift
        rm -f -- "$DDFILE"
        wait_quiet
        drop_caches
        now_us; t0=$NOW_US
        dd "$@" 2>"$RESULTS/logs/dd.err"
        sync
        now_us; t1=$NOW_US
        last=$(tail -n1 "$RESULTS/logs/dd.err")
        printf '  %-40s %7s s  %6.0f MB/s   (dd says: %s)\n' "$label" "$(fmt_s $((t1 - t0)))" \
            "$(awk -v b="$bytes" -v us=$((t1 - t0)) 'BEGIN {print b / us}')" "$last" | tee -a "$RESULTS/disk.txt"
    }
    dd_run "dd write oflag=direct + sync" if=/dev/zero of="$DDFILE" bs=1M count=4096 oflag=direct
    dd_run "dd write buffered + sync" if=/dev/zero of="$DDFILE" bs=1M count=4096
    rm -f -- "$DDFILE"
    for key in "${KEYS[@]}"; do
        a=$ARCHDIR/$key.tar.zst
        wait_quiet
        drop_caches
        now_us; t0=$NOW_US
        dd if="$a" of=/dev/null bs=1M iflag=direct 2>"$RESULTS/logs/dd.err"
        now_us; t1=$NOW_US
        printf '  %-40s %7s s  %6.0f MB/s\n' "dd read $key.tar.zst iflag=direct" "$(fmt_s $((t1 - t0)))" \
            "$(awk -v b="$(stat -c %s "$a")" -v us=$((t1 - t0)) 'BEGIN {print b / us}')" | tee -a "$RESULTS/disk.txt"
    done
fi

# ---------------------------------------------------------------------------- contestants
CONTESTANTS=(fu_direct fu_buffered fu_portable gnutar bsdtar zstd)
declare -A LABEL=(
    [fu_direct]="fastuntar --direct-io" [fu_buffered]="fastuntar buffered"
    [fu_portable]="fastuntar portable" [gnutar]="GNU tar" [bsdtar]="bsdtar"
    [zstd]="zstd -dc (floor)"
)
for c in "${CONTESTANTS[@]}"; do printf 'label\t%s\t%s\n' "$c" "${LABEL[$c]}" >>"$META"; done

# Sets CMD for contestant $1, archive $2, destination $3.
set_cmd() {
    case $1 in
    fu_direct) CMD=("$BIN" -x "$2" -C "$3" --direct-io) ;;
    fu_buffered) CMD=("$BIN" -x "$2" -C "$3") ;;
    fu_portable) CMD=("$BIN" -x "$2" -C "$3" --io portable) ;;
    gnutar) CMD=(tar -I zstd -xf "$2" -C "$3") ;;
    bsdtar) CMD=(bsdtar -xf "$2" -C "$3") ;;
    zstd) CMD=(zstd -dc "$2") ;;
    esac
}
skip_reason() {
    case $1 in
    fu_*) if [[ -n $FU_REASON ]]; then echo "$FU_REASON"; elif [[ ! -x $BIN ]]; then echo "binary missing"; fi ;;
    bsdtar) echo "$BSD_REASON" ;;
    esac
}

# Canonical listing of a tree: type, mode, size (files), mtime, path; then md5 of every file.
manifest() {
    (
        cd "$1"
        find . -mindepth 1 \( -type d -printf 'd %m - %Ts %P\n' \) -o -printf '%y %m %s %Ts %P -> %l\n' |
            sort -k5
        find . -type f -print0 | xargs -0 -r -n 512 -P "$NPROC" stdbuf -oL md5sum | sort -k2 # -oL: whole lines, no interleaving
    )
}
# Reference listing from GNU tar, cached next to the archive (keyed by the archive's size+mtime).
ref_manifest() {
    local key=$1 a=$ARCHDIR/$1.tar.zst m=$ARCHDIR/$1.manifest id
    id="archive $(stat -c '%s %Y' "$a")"
    if [[ -f $m && $(head -n1 "$m") == "$id" ]]; then return; fi
    say "building the reference listing of $key.tar.zst with GNU tar (untimed) ..."
    rm -rf -- "$REFTMP"
    mkdir -p "$REFTMP"
    tar -I zstd -xf "$a" -C "$REFTMP"
    { echo "$id"; manifest "$REFTMP"; } >"$m.tmp"
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

run_one() { # key archive contestant round
    local key=$1 a=$2 c=$3 r=$4 log=$RESULTS/logs/$1.$3.r$4 reason rc t0 t1 t2 c0 c1 rss status n
    local u0 u1 ucmd other tline resf="" resa=""
    reason=$(skip_reason "$c")
    if [[ -n $reason ]]; then
        # fastuntar is expected to exist: its absence is a failure; a missing bsdtar a skip.
        status=skipped
        [[ $c == fu_* ]] && status="failed (not built)"
        printf '%s\t%s\t%s\t%s\t\t\t\t\t\t\t\n' "$key" "$c" "$r" "$status" >>"$TSV"
        printf '  %-24s %s (%s)\n' "${LABEL[$c]}" "$status" "$reason"
        return
    fi
    set_cmd "$c" "$a" "$DEST"
    if ! command -v "${CMD[0]}" >/dev/null; then
        printf '%s\t%s\t%s\tmissing\t\t\t\t\t\t\t\n' "$key" "$c" "$r" >>"$TSV"
        printf '  %-24s missing (%s not found)\n' "${LABEL[$c]}" "${CMD[0]}"
        return
    fi
    rm -rf -- "$DEST"
    mkdir -p "$DEST"
    local out=$log.out
    [[ $c == zstd ]] && out=/dev/null
    wait_quiet
    drop_caches
    read_user_ticks; u0=$USER_TICKS
    read_cached; c0=$CACHED_KB
    now_us; t0=$NOW_US
    set +e
    /usr/bin/time -f '%M %U' -o "$log.time" timeout -k 10 "$TIMEOUT" "${CMD[@]}" >"$out" 2>"$log.err"
    rc=$?
    now_us; t1=$NOW_US
    read_cached; c1=$CACHED_KB
    sync
    now_us; t2=$NOW_US
    read_user_ticks; u1=$USER_TICKS
    set -e
    # Last line of the -o file (GNU time puts "Command exited with ..." above it on failure).
    tline=$(tail -n1 "$log.time" 2>/dev/null || true)
    rss="" ucmd=0
    if [[ $tline =~ ^([0-9]+)\ ([0-9]+)\.([0-9]+)$ ]]; then
        rss=${BASH_REMATCH[1]}
        ucmd=$((10#${BASH_REMATCH[2]} * 100 + 10#${BASH_REMATCH[3]})) # centiseconds
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
    elif [[ $c != zstd ]]; then
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
        [[ $c == zstd ]] || resf=$(resident_bytes "$DEST")
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$key" "$c" "$r" "$status" $((t2 - t0)) \
        $((t1 - t0)) "$rss" $((c1 - c0)) $((other * 10000)) "$resf" "$resa" >>"$TSV"
    printf '  %-24s %-10s extract+sync %8s s  extract %8s s  rss %5s MB  Cached %+6d MB  resident files/archive %s/%s MB  other-procs cpu %s s\n' \
        "${LABEL[$c]}" "$status" "$(fmt_s $((t2 - t0)))" "$(fmt_s $((t1 - t0)))" \
        "$((${rss:-0} / 1024))" $(((c1 - c0) / 1024)) "$(mb "$resf")" "$(mb "$resa")" "$(fmt_s $((other * 10000)))"
    if [[ $status != ok ]]; then
        say "    exit code $rc; stderr tail ($log.err):"
        tail -n 8 "$log.err" | sed 's/^/      /'
    elif [[ $c == fu_* || $c == bsdtar ]] && [[ -z ${VERIFIED[$key.$c]:-} ]]; then
        # Correctness: the first successful run of each extractor is compared with GNU tar.
        VERIFIED[$key.$c]=1
        if diff <(tail -n +2 "$ARCHDIR/$key.manifest") <(manifest "$DEST") >"$log.diff"; then
            say "    verify: tree identical to GNU tar's (types, modes, sizes, mtimes, md5)"
            printf 'verify\t%s\t%s\tok\n' "$key" "$c" >>"$META"
        else
            say "    WARNING: tree differs from GNU tar's ($(grep -c '^[<>]' "$log.diff") lines, $log.diff):"
            head -n 12 "$log.diff" | sed 's/^/      /'
            printf 'verify\t%s\t%s\tdiffers\n' "$key" "$c" >>"$META"
        fi
    fi
    rm -rf -- "$DEST"
}

declare -A EXPECT_FILES=()
for key in "${KEYS[@]}"; do
    a=$ARCHDIR/$key.tar.zst
    read -r files fbytes zbytes tbytes < <(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["stats"]
print(s["files"], s["file_bytes"], s["zst_bytes"], s["tar_bytes"])' "$a.json")
    EXPECT_FILES[$key]=$files
    printf 'archive\t%s\t%s\t%s\t%s\t%s\n' "$key" "$files" "$fbytes" "$zbytes" "$tbytes" >>"$META"
    hr
    say "archive $key.tar.zst: $files files, $((fbytes / 1000000)) MB of file data, $((zbytes / 1000000)) MB compressed"
    ref_manifest "$key"
    for ((r = 1; r <= ROUNDS; r++)); do
        say "[$key] round $r/$ROUNDS"
        now_us; R0=$NOW_US
        for c in "${CONTESTANTS[@]}"; do
            run_one "$key" "$a" "$c" "$r"
        done
        now_us
        say "  (round took $(fmt_s $((NOW_US - R0))) s including cache drops, deletes and checks)"
    done
done

# ---------------------------------------------------------------------------- summary
hr
python3 - "$TSV" "$META" "$RESULTS" "$(printf '%q ' "$0" "${ORIG_ARGS[@]}")" <<'PY'
import statistics as st
import sys

tsv, meta, results, cmdline = sys.argv[1:5]
labels, archives, verify, nodrop = {}, {}, {}, False
order = []
for line in open(meta):
    f = line.rstrip("\n").split("\t")
    if f[0] == "label":
        labels[f[1]] = f[2]
        order.append(f[1])
    elif f[0] == "archive":
        archives[f[1]] = dict(files=int(f[2]), file_bytes=int(f[3]), zst=int(f[4]), tar=int(f[5]))
    elif f[0] == "verify":
        verify[(f[1], f[2])] = f[3]
    elif f[0] == "flag" and f[1] == "nodrop":
        nodrop = True
runs = {}
for line in open(tsv):
    key, c, r, status, tot, cmd, rss, cache, other, resf, resa = line.rstrip("\n").split("\t")
    runs.setdefault((key, c), []).append((status, tot, cmd, rss, cache, other, resf, resa))

HEAD = ["contestant", "median extract+sync (s)", "min", "max", "median extract only (s)",
        "peak RSS (MB)", "page-cache growth (MB, % of bytes)",
        "left resident: files / archive (MB)", "vs GNU tar", "vs zstd floor"]
out_txt, out_md = [], []
for key, info in archives.items():
    med = {}
    rows = []
    for c in order:
        rr = runs.get((key, c), [])
        ok = [x for x in rr if x[0] == "ok"]
        if ok:
            med[c] = st.median(int(x[1]) for x in ok) / 1e6
    for c in order:
        rr = runs.get((key, c), [])
        ok = [x for x in rr if x[0] == "ok"]
        name = labels[c]
        v = verify.get((key, c))
        if v == "differs":
            name += " [OUTPUT DIFFERS]"
        if not ok:
            states = sorted({x[0] for x in rr}) or ["not run"]
            rows.append([name, "/".join(states)] + ["-"] * 8)
            continue
        tot = [int(x[1]) / 1e6 for x in ok]
        cmd = [int(x[2]) / 1e6 for x in ok]
        rss = [int(x[3]) / 1024 for x in ok if x[3]]
        cache = st.median(int(x[4]) for x in ok) / 1024
        resf = [int(x[6]) / 1048576 for x in ok if x[6]]
        resa = [int(x[7]) / 1048576 for x in ok if x[7]]
        resident = (f"{st.median(resf):.0f}" if resf else "-") + " / " + (f"{st.median(resa):.0f}" if resa else "-")
        m = st.median(tot)
        note = "" if len(ok) == len(rr) else f" ({len(ok)}/{len(rr)} ok)"
        rows.append([
            name + note,
            f"{m:.2f}", f"{min(tot):.2f}", f"{max(tot):.2f}", f"{st.median(cmd):.2f}",
            f"{max(rss):.0f}" if rss else "?",
            f"{cache:.0f} ({100 * cache * 1048576 / info['file_bytes']:.0f}%)",
            resident,
            f"{med['gnutar'] / m:.2f}x" if "gnutar" in med else "-",
            f"{m / med['zstd']:.2f}x" if "zstd" in med else "-",
        ])
    title = (f"{key}.tar.zst: {info['files']} files, {info['file_bytes'] / 1e6:.0f} MB of file data, "
             f"{info['zst'] / 1e6:.0f} MB compressed; rounds: {max((len(v) for (k, _), v in runs.items() if k == key), default=0)}")
    if nodrop:
        title += "; PAGE CACHE NOT DROPPED (not root)"
    # Runs during which other processes used > 10% of one CPU (user time, and at least
    # 0.2 s of it) are suspect.
    noisy = [f"{labels[c]} r{i + 1} ({int(x[5]) / 1e6:.1f} s)"
             for c in order for i, x in enumerate(runs.get((key, c), []))
             if x[0] == "ok" and x[5] and int(x[5]) > max(200_000, 0.10 * int(x[1]))]
    widths = [max(len(HEAD[i]), *(len(r[i]) for r in rows)) for i in range(len(HEAD))]
    fmt = lambda r: "  ".join(x.ljust(widths[i]) if i == 0 else x.rjust(widths[i]) for i, x in enumerate(r))
    noise = ("WARNING: other processes were busy (user CPU) during: " + ", ".join(noisy)) if noisy else ""
    out_txt += [title, fmt(HEAD), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]
    out_txt += ([noise] if noise else []) + [""]
    out_md += [f"**{title}**", "", "| " + " | ".join(HEAD) + " |",
               "|" + "|".join(["---"] + ["---:"] * (len(HEAD) - 1)) + "|"]
    out_md += ["| " + " | ".join(r) + " |" for r in rows] + ([""] + [noise] if noise else []) + [""]
legend = ("vs GNU tar = GNU tar's median / this median (>1 is faster than GNU tar); "
          "vs zstd floor = this median / zstd -dc's median (1.00 = as fast as decoding alone). "
          "Page-cache growth = Cached: in /proc/meminfo after the command minus before it, system-wide: "
          "it includes the archive read through the cache (see the zstd row), the programs' own "
          "binaries, and anything other processes did meanwhile. 'Left resident' is measured per "
          "file with fincore after the sync (medians): extracted files / the archive itself.")
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
