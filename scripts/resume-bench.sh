#!/usr/bin/env bash
# Resume points (issue 30): what they cost, and how fast a killed run resumes.
#
#   scripts/resume-bench.sh cost ARCHIVE [ROUNDS]   default (points on) against --no-resume
#   scripts/resume-bench.sh kill ARCHIVE [ROUNDS]   full run F; a run SIGKILLed once it has
#                                                   written half of F's bytes; its rerun
#   scripts/resume-bench.sh url  DIR NAME [ROUNDS]  the same from scripts/pacing-server.py (50 MB/s
#                                                   per connection) serving DIR/NAME
#
# Each run extracts into a fresh ext4 (mkfs per run) on a loop device over /dev/shm, with
# --sync (extract + sync), timed with /usr/bin/time; CPU = user + sys. Rounds interleave. Root
# only. This VM denies drop_caches: the archive is read from the page cache in every run.
# Prints one line per run; docs/PERFORMANCE.md has the medians. $BIN overrides the binary.
set -uo pipefail
BIN=${BIN:-$(dirname "$0")/../target/release/fastuntar}
work=$(mktemp -d /tmp/resume-bench.XXXXXX)
img=/dev/shm/resume-bench.img
mnt=$work/mnt
mkdir -p "$mnt"
loop=
cleanup() {
    umount "$mnt" 2>/dev/null
    [[ -n $loop ]] && losetup -d "$loop" 2>/dev/null
    rm -f "$img"
    rm -rf "$work"
}
trap cleanup EXIT
fresh() {
    umount "$mnt" 2>/dev/null
    [[ -n $loop ]] && losetup -d "$loop"
    rm -f "$img"
    truncate -s "$size" "$img"
    mkfs.ext4 -q -F "$img" >/dev/null
    loop=$(losetup -f --show "$img")
    mount "$loop" "$mnt"
    mkdir "$mnt/d"
}
# run LABEL SOURCE ARGS...: one timed extract + sync; sets $wall.
run() {
    local label=$1 src=$2
    shift 2
    /usr/bin/time -f "%e %U %S" -o "$work/t" "$BIN" -x -f "$src" -C "$mnt/d" --sync -q --json "$@" \
        >"$work/json" 2>"$work/err"
    local rc=$? u s
    read -r wall u s <"$work/t"
    local resumed
    resumed=$(grep -o '"resumed":{[^}]*}\|"download_bytes":[0-9]*' "$work/json" | tr '\n' ' ')
    echo "$label rc=$rc wall=$wall cpu=$(echo "$u + $s" | bc) $resumed"
}
used() { # bytes in use on the scratch ext4 (delayed allocations included)
    # Bash's 64-bit arithmetic: awk's printf "%d" stops at 2^31 (mawk), which made every
    # run before 2026-11-27 16:00 kill at 2 GiB / 2 of a 4 GB tree, not at half of it.
    local blocks free size
    read -r blocks free size < <(stat -f -c '%b %f %S' "$mnt")
    echo $(((blocks - free) * size))
}
# killed_at_half SOURCE FULL_USED: SIGKILL once the run has written half of what a full run
# leaves on the filesystem (polled every 10 ms), so the kill lands at half the archive however
# loaded the machine is; prints how far it got.
killed_at_half() {
    local base target pid
    base=$(used)
    target=$((base + $2 / 2))
    "$BIN" -x -f "$1" -C "$mnt/d" -q >/dev/null 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null && (($(used) < target)); do sleep 0.01; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    echo "killed at $(($(used) - base)) of $2 bytes written"
}
mode=$1
case $mode in
cost | kill)
    src=$2 rounds=${3:-5}
    size=$((($(stat -c %s "$src") * 8 >> 20) + 2048))M
    ;;
url)
    rounds=${4:-2}
    size=$((($(stat -c %s "$2/$3") * 8 >> 20) + 2048))M
    port=$((20000 + RANDOM % 10000))
    python3 "$(dirname "$0")/pacing-server.py" "$2" "$port" 50000000 >/dev/null 2>&1 &
    server=$!
    trap 'kill $server; cleanup' EXIT
    sleep 1
    src=http://127.0.0.1:$port/$3
    ;;
*) sed -n '2,12p' "$0"; exit 2 ;;
esac
uptime
for round in $(seq 0 $((rounds - 1))); do
    case $mode in
    cost)
        # The order alternates: the first run of a pair was ~10 % slower whichever it was
        # (2026-11-27 18:01-18:03: on/off 1.09 CPU with "on" first, 0.94 with "off" first).
        if ((round % 2)); then
            fresh; run "off" "$src" --no-resume
            fresh; run "on " "$src"
        else
            fresh; run "on " "$src"
            fresh; run "off" "$src" --no-resume
        fi
        ;;
    kill | url)
        fresh; base=$(used); run "full  " "$src"
        full=$wall full_used=$(($(used) - base))
        fresh; killed_at_half "$src" "$full_used"
        run "resume" "$src"
        echo "  ratio $(echo "$wall / $full" | bc -l | cut -c1-5)"
        ;;
    esac
done
uptime
