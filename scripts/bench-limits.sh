#!/usr/bin/env bash
# Extract+sync time of fastuntar at a stock machine's open-file limit against a generous one
# (issue 9: the fd budget is derived from RLIMIT_NOFILE, so a low limit means fewer cached
# directories and files in flight; this shows what that costs).
#
#   scripts/bench-limits.sh [--rounds N] [--bin PATH] [--dest DIR] ARCHIVE... [-- FASTUNTAR_ARGS]
#
# For each archive, interleaved rounds of: `ulimit -n 1024` (soft and hard, as a login shell
# gives a user who cannot raise it), `ulimit -n 64`, and the hard limit this shell has; each run
# into a fresh DIR on DEST's filesystem after `sync; echo 3 > /proc/sys/vm/drop_caches` (root),
# timed to the end of a `sync`. Prints each run and the median per limit.
set -euo pipefail
export LC_ALL=C
ROUNDS=3
BIN=""
DEST=/work/bench-limits
ARCHIVES=()
EXTRA=()
while (($#)); do
    case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --dest) DEST=$2; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) ARCHIVES+=("$1"); shift ;;
    esac
done
((${#ARCHIVES[@]})) || { echo "usage: $0 [--rounds N] [--bin PATH] [--dest DIR] ARCHIVE... [-- ARGS]" >&2; exit 2; }
REPO=$(cd "$(dirname "$0")/.." && pwd)
if [[ -z $BIN ]]; then
    cargo build --release --quiet --manifest-path "$REPO/Cargo.toml"
    BIN=${CARGO_TARGET_DIR:-$REPO/target}/release/fastuntar
fi
mkdir -p "$DEST"
HARD=$(ulimit -Hn)
LIMITS=(1024 64 "$HARD")
declare -A times
printf '%-28s %8s %6s %10s\n' archive nofile round "extract+sync s"
for round in $(seq "$ROUNDS"); do
    for a in "${ARCHIVES[@]}"; do
        for lim in "${LIMITS[@]}"; do
            d=$DEST/run
            rm -rf "$d"; mkdir -p "$d"; sync
            [[ $(id -u) == 0 ]] && echo 3 >/proc/sys/vm/drop_caches
            t0=$EPOCHREALTIME
            (ulimit -n "$lim"; exec "$BIN" -x "$a" -C "$d" -q "${EXTRA[@]}")
            sync
            t=$(echo "$EPOCHREALTIME - $t0" | bc)
            printf '%-28s %8s %6s %10.2f\n' "$(basename "$a")" "$lim" "$round" "$t"
            times[$a/$lim]+="$t "
        done
    done
done
rm -rf "$DEST/run"
echo
printf '%-28s %8s %10s\n' archive nofile "median s"
for a in "${ARCHIVES[@]}"; do
    for lim in "${LIMITS[@]}"; do
        m=$(tr ' ' '\n' <<<"${times[$a/$lim]}" | grep . | sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}')
        printf '%-28s %8s %10.2f\n' "$(basename "$a")" "$lim" "$m"
    done
done
