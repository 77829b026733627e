#!/usr/bin/env bash
# What drawing progress costs: fastuntar under a pseudo-terminal (`script`) with stderr on the
# terminal (progress drawn) versus stderr to a file (no progress), interleaved rounds, medians.
# A benchmark, not a test. Usage: scripts/progress-cost.sh [ARCHIVE] [ROUNDS]
# Default archive: the snapshot-shaped one scripts/bench.sh generates in $BENCH_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
bench_dir=${BENCH_DIR:-/work/bench}
archive=${1:-$bench_dir/snapshot.tar.zst}
rounds=${2:-5}
[[ -f $archive ]] || { echo "no archive $archive (run scripts/bench.sh first, or pass one)"; exit 1; }
command -v script >/dev/null || { echo "script (util-linux) is needed"; exit 1; }
cargo build --release -q
bin=$PWD/target/release/fastuntar
work=$(mktemp -d "${bench_dir}/progress-cost.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Each run extracts into a fresh directory: deleting a 100k-file tree right before the next
# extraction (caches warm) sends ext4's inode allocator through recently_deleted() scans that
# made runs 8x slower, whoever extracts. Everything is deleted at the end.
n=0
run() { # $1: tty|file → seconds
  n=$((n + 1))
  local line="exec $bin -xf $archive -C $work/d$n"
  [[ $1 == file ]] && line+=" 2>$work/stderr"
  local s e
  s=$(date +%s.%N)
  script -qfec "$line" /dev/null >"$work/out"
  e=$(date +%s.%N)
  if [[ $1 == tty ]] && ! grep -q $'\r' "$work/out"; then echo "warning: no progress drawn in a terminal run" >&2; fi
  echo "$e - $s" | bc
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

run file >/dev/null # warm the page cache: this measures CPU cost, not the disk
tty=() file=()
for ((i = 0; i < rounds; i++)); do
  if ((i % 2)); then file+=("$(run file)"); tty+=("$(run tty)")
  else tty+=("$(run tty)"); file+=("$(run file)"); fi
done
mt=$(printf '%s\n' "${tty[@]}" | median)
mf=$(printf '%s\n' "${file[@]}" | median)
echo "archive: $archive ($rounds rounds, page cache warm)"
echo "with progress (stderr on a terminal): ${tty[*]}  median $mt s"
echo "without (stderr to a file):           ${file[*]}  median $mf s"
echo "cost: $(echo "scale=2; ($mt - $mf) * 100 / $mf" | bc) %"
