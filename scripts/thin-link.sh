#!/usr/bin/env bash
# `--min-rate` on a thin link (issue 40): does the floor retry connections that are slow only
# because many share a thin link? In a network namespace of its own (`unshare -n`: nothing
# else on the machine is shaped), the loopback gets an MTU of 1500 and a token bucket of RATE
# (`tc tbf`, 400 ms of queue), nginx serves a tar of random bytes, and `fastuntar -x` fetches
# it on --connections 16 under --memory 16M (256 KiB pieces, 16 in flight) once per FLOOR.
#
#   scripts/thin-link.sh [--bin PATH] [--size MIB] [--rates LIST] [--floors LIST]
#
# Defaults: target/release/fastuntar, 8 MiB, rates 1mbit,256kbit, floors 0,64,1K (0: no
# floor; 1K is the default). Prints one row per run: rate, floor, wall seconds, retries, and
# how many retries were for the floor. Root only (unshare -n, tc). The runs take the
# archive's size over the rate each (8 MiB at 256 kbit/s: ~4.5 minutes).
set -euo pipefail
export LC_ALL=C

BIN=target/release/fastuntar
SIZE=8
RATES=1mbit,256kbit
FLOORS=0,64,1K
while [[ $# -gt 0 ]]; do
    case $1 in
    --bin) BIN=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --rates) RATES=$2; shift 2 ;;
    --floors) FLOORS=$2; shift 2 ;;
    -h | --help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "thin-link.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
if [[ ${THIN_LINK_INSIDE:-} != 1 ]]; then
    [[ $(id -u) == 0 ]] || { echo "thin-link.sh: needs root (unshare -n, tc)" >&2; exit 2; }
    for tool in nginx tc ip unshare; do
        command -v $tool >/dev/null || { echo "thin-link.sh: $tool is missing" >&2; exit 2; }
    done
    BIN=$(realpath "$BIN")
    echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    printf '%-8s %-5s %8s %7s %9s\n' rate floor wall_s retries for_floor
    THIN_LINK_INSIDE=1 exec unshare -n "$0" --bin "$BIN" --size "$SIZE" --rates "$RATES" \
        --floors "$FLOORS"
fi

work=$(mktemp -d /dev/shm/thin-link.XXXXXX)
trap '[[ -f $work/nginx.pid ]] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; rm -rf "$work"' EXIT
chmod 755 "$work"
mkdir -p "$work/www" "$work/logs"
head -c "${SIZE}M" /dev/urandom >"$work/data"
tar -C "$work" -cf "$work/www/a.tar" data
rm "$work/data"
chmod 644 "$work/www/a.tar"
cat >"$work/nginx.conf" <<EOF
worker_processes 1;
daemon on;
pid $work/nginx.pid;
error_log $work/logs/error.log;
events { worker_connections 256; }
http {
  access_log off;
  server { listen 127.0.0.1:18080; root $work/www; }
}
EOF
ip link set lo mtu 1500 up
nginx -c "$work/nginx.conf" -p "$work"
for _ in $(seq 50); do
    [[ -s $work/nginx.pid ]] && (exec 3<>/dev/tcp/127.0.0.1/18080) 2>/dev/null && break
    sleep 0.1
done
for rate in ${RATES//,/ }; do
    tc qdisc replace dev lo root tbf rate "$rate" burst 16kb latency 400ms
    for floor in ${FLOORS//,/ }; do
        dest=$(mktemp -d "$work/dest.XXXX")
        start=$(date +%s.%N)
        "$BIN" -x -C "$dest" -f http://127.0.0.1:18080/a.tar --connections 16 --memory 16M \
            --min-rate "$floor" --json >"$work/out.json" 2>"$work/err" || echo "exit $?" >>"$work/err"
        end=$(date +%s.%N)
        rm -rf "$dest"
        retries=$(grep -o '"retries":[0-9]*' "$work/out.json" | cut -d: -f2 || true)
        printf '%-8s %-5s %8.1f %7s %9s\n' "$rate" "$floor" "$(echo "$end - $start" | bc)" \
            "${retries:-?}" "$(grep -c 'slower than --min-rate' "$work/err" || true)"
        grep -q '^exit' "$work/err" && tail -2 "$work/err" | sed 's/^/    /'
    done
done
