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

run() { # $1: tty|file → seconds
  rm -rf "$work/d"
  local line="exec $bin -xf $archive -C $work/d"
  [[ $1 == file ]] && line+=" 2>$work/stderr"
  local s e
  s=$(date +%s.%N)
  script -qfec "$line" /dev/null >"$work/out"
  e=$(date +%s.%N)
  echo "$e - $s" | bc
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

run file >/dev/null # warm the page cache: this measures CPU cost, not the disk
tty=() file=()
for ((i = 0; i < rounds; i++)); do
  if ((i % 2)); then file+=("$(run file)"); tty+=("$(run tty)")
  else tty+=("$(run tty)"); file+=("$(run file)"); fi
done
grep -q $'\r' "$work/out" || echo "warning: no progress seen in the last terminal run"
mt=$(printf '%s\n' "${tty[@]}" | median)
mf=$(printf '%s\n' "${file[@]}" | median)
echo "archive: $archive ($rounds rounds, page cache warm)"
echo "with progress (stderr on a terminal): ${tty[*]}  median $mt s"
echo "without (stderr to a file):           ${file[*]}  median $mf s"
echo "cost: $(echo "scale=2; ($mt - $mf) * 100 / $mf" | bc) %"
