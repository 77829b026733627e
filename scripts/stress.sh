#!/usr/bin/env bash
# The load protocol of docs/TESTING.md ("No test depends on an idle machine"): runs a test
# tier again and again on a machine made slow and crowded, and prints one line per pass.
#
#   scripts/stress.sh [PASSES] [--quick] [--hogs N] [--shm GIB]
#
# - a slow disk: target/tmp (CARGO_TARGET_TMPDIR, where every test makes its directories and
#   loop images) becomes an ext4 on a loop device over a sparse file in /var/tmp, throttled for
#   the test processes with the cgroup-v1 blkio controller: writes 30 MB/s and 400 IOPS, reads
#   100 MB/s (direct and synchronous I/O; buffered writeback is not charged in cgroup v1);
# - /dev/shm mostly full: GIB GiB taken with fallocate (default: two thirds of its size, 16 of
#   24 GB here; with no swap that is RAM too, and 6 GB stayed available to the tests);
# - CPU stress: N busy loops (default 2, one per core here), besides whatever else runs;
# - the tier under nice 5, with CI=true (a missing oracle fails).
#
# Root only (loop devices, mounts, cgroups). Everything is undone on exit. Logs and the
# summary are under target/stress/ (pass-N.log, summary.txt).
set -uo pipefail
cd "$(dirname "$0")/.."
passes=10 tier=exhaustive hogs=2 shm=
while (($#)); do
  case $1 in
    --quick) tier=quick ;;
    --hogs) hogs=$2; shift ;;
    --shm) shm=$2; shift ;;
    [0-9]*) passes=$1 ;;
    *) sed -n '2,17p' "$0"; exit 64 ;;
  esac
  shift
done
[[ $(id -u) == 0 ]] || { echo "stress.sh: root only" >&2; exit 1; }
blkio=/sys/fs/cgroup/blkio
[[ -d $blkio ]] || { echo "stress.sh: no cgroup-v1 blkio controller at $blkio" >&2; exit 1; }

out=target/stress
mkdir -p "$out" target/tmp
rm -rf target/tmp/*
img=/var/tmp/fastuntar-stress.img
cg=$blkio/fastuntar-stress
loop= pids=()
cleanup() {
  ((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null
  if [[ -n $loop ]]; then
    umount target/tmp 2>/dev/null || umount -l target/tmp
    losetup -d "$loop" 2>/dev/null
  fi
  rm -f "$img" /dev/shm/fastuntar-stress-fill
  rmdir "$cg" 2>/dev/null
}
trap cleanup EXIT

if findmnt -n target/tmp >/dev/null; then
  echo "stress.sh: target/tmp is a mount point already (another stress.sh?)" >&2
  exit 1
fi
# Build first, outside the stress, so every pass times the tests alone.
cargo test --release --all-targets --no-run -q || exit 1

truncate -s 40G "$img"
loop=$(losetup -f --show "$img")
mkfs.ext4 -q -F "$loop"
mount "$loop" target/tmp
mm=$(lsblk -dno MAJ:MIN "$loop" | tr -d ' ')
mkdir -p "$cg"
echo "$mm $((30 << 20))" >"$cg/blkio.throttle.write_bps_device"
echo "$mm 400" >"$cg/blkio.throttle.write_iops_device"
echo "$mm $((100 << 20))" >"$cg/blkio.throttle.read_bps_device"
echo $$ >"$cg/tasks"
[[ -n $shm ]] || shm=$(($(df --output=size -BG /dev/shm | tail -1 | tr -dc 0-9) * 2 / 3))
fallocate -l "${shm}G" /dev/shm/fastuntar-stress-fill
for _ in $(seq "$hogs"); do
  (while :; do :; done) &
  pids+=($!)
done

echo "stress.sh: $passes passes of the $tier tier; slow disk $loop on target/tmp;" \
  "/dev/shm $(df --output=pcent /dev/shm | tail -1 | tr -d ' ') full; $hogs CPU hogs" |
  tee -a "$out/summary.txt"
failed=0
for i in $(seq "$passes"); do
  start=$(date +%s)
  load0=$(cut -d' ' -f1 /proc/loadavg)
  CI=true FASTUNTAR_TEST_TIER=$tier nice -n 5 \
    cargo test --release --no-fail-fast --all-targets >"$out/pass-$i.log" 2>&1
  rc=$?
  # The tests that run alone (test.sh's --ignored pass).
  CI=true FASTUNTAR_TEST_TIER=$tier nice -n 5 \
    cargo test --release --test tests -- --ignored >>"$out/pass-$i.log" 2>&1 || rc=1
  totals=$(awk '/^test result:/ { p += $4; f += $6 } END { printf "%d passed, %d failed", p, f }' \
    "$out/pass-$i.log")
  echo "pass $i: exit $rc, $totals, $(($(date +%s) - start)) s, load $load0..$(cut -d' ' -f1 /proc/loadavg)" |
    tee -a "$out/summary.txt"
  grep -E '^test .* FAILED$' "$out/pass-$i.log" | tee -a "$out/summary.txt"
  ((rc == 0)) || failed=$((failed + 1))
done
echo "stress.sh: $((passes - failed)) of $passes passes green" | tee -a "$out/summary.txt"
((failed == 0))
