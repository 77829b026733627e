#!/usr/bin/env bash
# --spread (issue 43): an Agave-shaped archive's accounts spread over three throttled disks
# against the same run into one of them.
#
#   scripts/bench-spread.sh ARCHIVE [ROUNDS] [MBPS] [SIZE_GB]   (defaults: 3 rounds, 150 MB/s, 3 GB)
#
# Makes three ext4 filesystems on loop devices over /dev/shm, each throttled to MBPS MB/s of
# writes (/work/shared/bench/throttled-disks.sh, cgroup-v1 blkio: exact for O_DIRECT writes,
# so both runs use --direct-io), and tears them down at the end. Each round runs, interleaved:
#   one:    fastuntar -x -f ARCHIVE -C /mnt/tdisk1/one --direct-io
#   spread: fastuntar -x -f ARCHIVE -C /mnt/tdisk1/sp --direct-io
#             --spread accounts/=/mnt/tdisk1/sp/accounts,/mnt/tdisk2/sp,/mnt/tdisk3/sp
# each followed by a sync of the three filesystems inside the timing (extract + sync), the page cache dropped before
# (where the VM allows it) and the previous run's tree removed. Prints one line per run and
# the medians; CPU = user + sys. Root only. $BIN overrides the binary.
set -uo pipefail
archive=${1:?usage: scripts/bench-spread.sh ARCHIVE [ROUNDS] [MBPS] [SIZE_GB]}
rounds=${2:-3}
mbps=${3:-150}
size=${4:-3}
here=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-$here/../target/release/fastuntar}
disks=${DISKS:-/work/shared/bench/throttled-disks.sh}
[[ -x $disks || -f $disks ]] || disks=$here/../../shared/bench/throttled-disks.sh
for i in 1 2 3; do
    if mountpoint -q /mnt/tdisk$i; then
        echo "/mnt/tdisk$i is mounted already (another run?): not touching it" >&2
        exit 1
    fi
done
cleanup() { bash "$disks" down 3 >/dev/null 2>&1; }
trap cleanup EXIT
bash "$disks" up 3 "$mbps" "$size" >&2 || exit 1

roots=/mnt/tdisk1/sp/accounts,/mnt/tdisk2/sp,/mnt/tdisk3/sp
# run LABEL ARGS...: one timed extract + sync in the throttled group; prints the line.
run() {
    local label=$1
    shift
    rm -rf /mnt/tdisk1/one /mnt/tdisk1/sp /mnt/tdisk2/sp /mnt/tdisk3/sp
    sync
    echo 3 >/proc/sys/vm/drop_caches 2>/dev/null
    local t
    # The three filesystems are synced in both runs (sync -f: each one's, not the machine's).
    t=$( { /usr/bin/time -f '%e %U %S' bash "$disks" run bash -c \
        '"$0" -x -f "$1" --direct-io "${@:2}" >/dev/null && sync -f /mnt/tdisk1 /mnt/tdisk2 /mnt/tdisk3' \
        "$BIN" "$archive" "$@"; } 2>&1 | tail -1)
    read -r wall user sys <<<"$t"
    local cpu
    cpu=$(echo "$user + $sys" | bc)
    printf '%-7s %8s s  cpu %6s s  load %s\n' "$label" "$wall" "$cpu" "$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "$label $wall $cpu" >>"$results"
}
results=$(mktemp)
echo "archive: $archive ($(stat -c %s "$archive") bytes), $rounds rounds, 3 disks at $mbps MB/s"
for r in $(seq "$rounds"); do
    if (( r % 2 )); then
        run one -C /mnt/tdisk1/one
        run spread -C /mnt/tdisk1/sp --spread "accounts/=$roots"
    else
        run spread -C /mnt/tdisk1/sp --spread "accounts/=$roots"
        run one -C /mnt/tdisk1/one
    fi
done
median() { grep "^$1 " "$results" | awk '{print $'"$2"'}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
one=$(median one 2)
spread=$(median spread 2)
echo "median one:    $one s (cpu $(median one 3) s)"
echo "median spread: $spread s (cpu $(median spread 3) s)"
echo "spread / one:  $(echo "scale=3; $spread / $one" | bc)"
rm -f "$results"
