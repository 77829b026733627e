#!/usr/bin/env bash
# (Reached as `scripts/bench-url.sh --mirrors ...,three`, or on its own.)
# Time-to-ready from a URL (issues 29 and 42): mirrors on 127.0.0.1, and the ways a node
# operator restores from them, into a fresh RAM-backed ext4 for every run.
#
#   scripts/bench-url.sh [--rounds N] [--scale F] [--rate RATE] [--workdir DIR] [--bin PATH]
#                        [--port PORT] [--rows LIST] [--mirrors paced,nginx,three]
#   (also reached as `scripts/bench.sh --only url [same options]`)
#
# Two mirrors serve WORKDIR/archives, each capping at RATE (default 50m: 50 MB/s):
#   paced  scripts/pacing-server.py: every TCP connection capped by SO_MAX_PACING_RATE, as a
#          mirror's or CDN's shaping caps a connection, whatever requests it carries;
#   nginx  apt's nginx-light with `limit_rate RATE` and sendfile: the cap is per *request*, and
#          each request may start with a second's worth of it at once (a client asking for
#          many small ranges is barely capped: see pacing-server.py).
# The archive is the
# Agave-shaped multi-frame agave.tar.zst of scripts/gen-archives.py at --scale (default 0.44:
# 595 MB compressed, 1.76 GB of tar in 2,643 files). Rows, in interleaved rounds (default 3),
# each preceded by `sync; echo 3 > drop_caches` and timed to the end of a `sync`:
#   url          fastuntar -x URL                      (default flags: 8 connections)
#   url1         fastuntar -x URL --connections 1 (any urlN: --connections N, for a sweep)
#   curl-fu      curl URL | fastuntar -x
#   curl-tar     curl URL | tar -I zstd -x              (GNU tar, zstd -d as its child)
#   aria2-fu     aria2c -x8 -s8 URL (into the same ext4), then fastuntar -x FILE
#   aria2        aria2c -x8 -s8 URL alone              (the download at 8 connections)
#   local        fastuntar -x FILE                      (the archive on the local disk)
# Several sources (issue 42), `--mirrors three`: three nginx servers (ports PORT+2..PORT+4),
# each capped at PEER (default 100mbps: 100 MB/s) for all its connections together by `tc`
# (an HTB class per port on the loopback device; everything else on lo goes to an unlimited
# default class, and the qdisc is removed at exit), and one more port (PORT+5) with no cap:
#   three        fastuntar -x URL1 --mirror URL2 --mirror URL3     (3 x 100 MB/s)
#   three-slow   the same, the third server capped at a tenth of PEER (10 MB/s)
#   one          fastuntar -x URL1                                   (one source, 100 MB/s)
#   aria2-three  aria2c -x8 -s8 URL1 URL2 URL3 (the same three sources), then fastuntar -x FILE
#   fast         fastuntar -x URL, the uncapped port, default flags
#   fast1        the same with --connections 1
#   local        fastuntar -x FILE
# The targets of issue 42: three <= 1.15 x max(size / (3 x PEER), local); three-slow <= 1.25 x
# max(size / (2.1 x PEER), local); fast <= 1.15 x local and its CPU <= 1.10 x fast1's; peak
# RSS <= 100 MiB. Needs root for tc as for the rest.
#   scripts/bench-url.sh --mirrors three --rows three,three-slow,one,aria2-three,fast,fast1,local
# Printed: medians of extract+sync, of peak RSS and of CPU seconds (/usr/bin/time %M, %U+%S of
# fastuntar), the load average before the run, and the targets: issue 29's `url` within 1.15x
# of max(aria2, local), and issue 42's above. Results go to WORKDIR/results-url/<timestamp>/.
set -euo pipefail
export LC_ALL=C

REPO=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=3
SCALE=0.44
RATE=50m
WORKDIR=/var/tmp/fastuntar-bench
BIN=""
PORT=18629
PEER=100mbps
ROWS="url url1 curl-fu curl-tar aria2-fu aria2 local"
MIRRORS="paced nginx"
while (($#)); do
    case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --scale) SCALE=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --workdir) WORKDIR=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --peer) PEER=$2; shift 2 ;;
    --rows) ROWS=${2//,/ }; shift 2 ;;
    --mirrors) MIRRORS=${2//,/ }; shift 2 ;;
    --only) shift 2 ;; # from bench.sh
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "bench-url.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[[ $(id -u) == 0 ]] || { echo "bench-url.sh: needs root (drop_caches, losetup, mount, tc)" >&2; exit 2; }
for tool in nginx aria2c curl zstd tar losetup mkfs.ext4 /usr/bin/time tc; do
    command -v "$tool" >/dev/null || {
        echo "bench-url.sh: installing nginx-light aria2 curl time (missing $tool)"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends nginx-light aria2 curl time zstd iproute2 >/dev/null
        break
    }
done
if [[ -z $BIN ]]; then
    (cd "$REPO" && cargo build --release -q)
    BIN=$REPO/target/release/fastuntar
fi
ARCHDIR=$WORKDIR/archives
mkdir -p "$ARCHDIR"
python3 "$REPO/scripts/gen-archives.py" "$ARCHDIR" --scale "$SCALE" --only agave >&2
ARCHIVE=$ARCHDIR/agave.tar.zst
SIZE=$(stat -c %s "$ARCHIVE")
TAR_SIZE=$(awk -F'"tar_bytes": ' 'NF > 1 { split($2, a, /[,}]/); print a[1]; exit }' "$ARCHIVE.json" 2>/dev/null || true)
[[ -n $TAR_SIZE ]] || TAR_SIZE=$((SIZE * 3))
PACED_PORT=$((PORT + 1))
PEER_PORTS=($((PORT + 2)) $((PORT + 3)) $((PORT + 4)))
FAST_PORT=$((PORT + 5))
declare -A URL_OF=([nginx]=http://127.0.0.1:$PORT/agave.tar.zst [paced]=http://127.0.0.1:$PACED_PORT/agave.tar.zst)
PEER_URLS=()
for p in "${PEER_PORTS[@]}"; do PEER_URLS+=("http://127.0.0.1:$p/agave.tar.zst"); done
FAST_URL=http://127.0.0.1:$FAST_PORT/agave.tar.zst
RESULTS=$WORKDIR/results-url/$(date +%Y%m%d-%H%M%S)
mkdir -p "$RESULTS"

# The mirror.
NGX=$WORKDIR/nginx-$$
mkdir -p "$NGX/logs"
cat >"$NGX/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $NGX/nginx.pid;
error_log $NGX/logs/error.log warn;
events { worker_connections 256; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    server {
        listen 127.0.0.1:$PORT;
        root $ARCHDIR;
        limit_rate $RATE;
    }
    server {
        listen 127.0.0.1:${PEER_PORTS[0]};
        listen 127.0.0.1:${PEER_PORTS[1]};
        listen 127.0.0.1:${PEER_PORTS[2]};
        listen 127.0.0.1:$FAST_PORT;
        root $ARCHDIR;
    }
}
EOF
nginx -p "$NGX" -c "$NGX/nginx.conf" &
NGX_PID=$!
RATE_BYTES=$(numfmt --from=si "${RATE^^}")
python3 "$REPO/scripts/pacing-server.py" "$ARCHDIR" "$PACED_PORT" "$RATE_BYTES" &
PACED_PID=$!
IMG=/dev/shm/fastuntar-bench-url-$$.img
MNT=$WORKDIR/url-mnt-$$
LOOP=""
down() {
    mountpoint -q "$MNT" 2>/dev/null && { umount "$MNT" || umount -l "$MNT"; }
    [[ -n $LOOP ]] && { losetup -d "$LOOP" 2>/dev/null || true; LOOP=""; }
    rm -f -- "$IMG"
}
TC=""
# The peers' caps: an HTB class per port on lo (server to client), the rest of lo unlimited.
# `peer_rates R1 R2 R3` sets them (tc's units: 100mbps is 100 MB/s).
peer_rates() {
    if [[ -z $TC ]]; then
        tc qdisc add dev lo root handle 1: htb default 9 r2q 1000
        TC=1
        tc class add dev lo parent 1: classid 1:9 htb rate 200gbit quantum 1000000
        for i in 0 1 2; do
            tc class add dev lo parent 1: classid 1:$((i + 1)) htb rate "${@:$((i + 1)):1}" \
                burst 256k cburst 256k quantum 200000
            tc filter add dev lo parent 1: protocol ip prio 1 u32 \
                match ip sport "${PEER_PORTS[$i]}" 0xffff flowid 1:$((i + 1))
        done
        return
    fi
    for i in 0 1 2; do
        tc class change dev lo parent 1: classid 1:$((i + 1)) htb rate "${@:$((i + 1)):1}" \
            burst 256k cburst 256k quantum 200000
    done
}
cleanup() {
    down
    [[ -n $TC ]] && tc qdisc del dev lo root 2>/dev/null
    kill "$NGX_PID" "$PACED_PID" 2>/dev/null || true
    wait "$NGX_PID" "$PACED_PID" 2>/dev/null || true
    rm -rf -- "$NGX" "$MNT"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
up() {
    down
    truncate -s $(((TAR_SIZE * 5 / 2 + SIZE * 3 / 2) >> 20 << 20)) "$IMG"
    LOOP=$(losetup -f --show "$IMG")
    mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 "$LOOP"
    mkdir -p "$MNT"
    mount "$LOOP" "$MNT"
    mkdir "$MNT/dest"
}
for m in $MIRRORS; do
    [[ $m == three ]] && continue
    for _ in 1 2 3 4 5 6 7 8 9 10; do curl -sf -o /dev/null -r 0-0 "${URL_OF[$m]}" && break; sleep 0.3; done
done
if [[ " $MIRRORS " == *" three "* ]]; then
    for u in "${PEER_URLS[@]}" "$FAST_URL"; do
        for _ in 1 2 3 4 5 6 7 8 9 10; do curl -sf -o /dev/null -r 0-0 "$u" && break; sleep 0.3; done
    done
    peer_rates "$PEER" "$PEER" "$PEER"
fi
# The rate of a tenth of a peer's (tc's units).
tenth() {
    local n=${PEER%%[a-z]*} unit=${PEER##*[0-9]}
    echo "$((n / 10))$unit"
}

# The command of row $2 from mirror $1.
cmd_of() {
    local d=$MNT/dest t="/usr/bin/time -o $RESULTS/rss -f %M:%U:%S" URL=${URL_OF[$1]:-}
    local m3="${PEER_URLS[0]} --mirror ${PEER_URLS[1]} --mirror ${PEER_URLS[2]}"
    case $2 in
    three | three-slow) echo "$t $BIN -x $m3 -C $d -q" ;;
    one) echo "$t $BIN -x ${PEER_URLS[0]} -C $d -q" ;;
    aria2-three) echo "aria2c -q -x8 -s8 -k1M --file-allocation=none -d $MNT -o a.tar.zst ${PEER_URLS[*]} && $t $BIN -x -f $MNT/a.tar.zst -C $d -q" ;;
    fast) echo "$t $BIN -x $FAST_URL -C $d -q" ;;
    fast1) echo "$t $BIN -x $FAST_URL -C $d -q --connections 1" ;;
    url) echo "$t $BIN -x $URL -C $d -q" ;;
    url[0-9]*) echo "$t $BIN -x $URL -C $d -q --connections ${2#url}" ;;
    curl-fu) echo "curl -sf $URL | $t $BIN -x -C $d -q" ;;
    curl-tar) echo "curl -sf $URL | $t tar -I zstd -x -C $d" ;;
    aria2-fu) echo "aria2c -q -x8 -s8 -k1M --file-allocation=none -d $MNT -o a.tar.zst $URL && $t $BIN -x -f $MNT/a.tar.zst -C $d -q" ;;
    aria2) echo "aria2c -q -x8 -s8 -k1M --file-allocation=none -d $MNT -o a.tar.zst $URL" ;;
    local) echo "$t $BIN -x -f $ARCHIVE -C $d -q" ;;
    esac
}

{
    echo "machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"
    echo "archive: $ARCHIVE ($SIZE bytes); mirrors: $MIRRORS at $RATE (paced: pacing-server.py, a cap per connection; nginx $(nginx -v 2>&1 | sed 's/.*\///'): limit_rate, a cap per request)"
    echo "fastuntar: $BIN ($("$BIN" --version 2>/dev/null | head -n1))"
} | tee "$RESULTS/setup.txt"
printf 'round\trow\tseconds\trss_kb\tload\tcpu_s\n' >"$RESULTS/raw.tsv"
# Every row of every mirror, then the local extraction once, per round. The rows of several
# sources go with `three` only, the others with paced and nginx.
MULTI_ROWS=" three three-slow one aria2-three fast fast1 "
RUNS=()
for m in $MIRRORS; do
    for row in $ROWS; do
        [[ $row == local ]] && continue
        if [[ $m == three ]]; then [[ $MULTI_ROWS == *" $row "* ]] || continue
        else [[ $MULTI_ROWS == *" $row "* ]] && continue; fi
        RUNS+=("$m:$row")
    done
done
[[ " $ROWS " == *" local "* ]] && RUNS+=("-:local")
for r in $(seq 1 "$ROUNDS"); do
    for run in "${RUNS[@]}"; do
        mirror=${run%%:*} row=${run#*:}
        [[ $mirror == - ]] && name=$row || name=$run
        up
        if [[ $mirror == three ]]; then
            if [[ $row == three-slow ]]; then peer_rates "$PEER" "$PEER" "$(tenth)"
            else peer_rates "$PEER" "$PEER" "$PEER"; fi
        fi
        sync
        echo 3 >/proc/sys/vm/drop_caches
        load=$(cut -d' ' -f1 /proc/loadavg)
        : >"$RESULTS/rss"
        t0=$EPOCHREALTIME
        if ! bash -c "set -o pipefail; $(cmd_of "$mirror" "$row")" >"$RESULTS/$name.$r.log" 2>&1; then
            echo "round $r $name: FAILED (see $RESULTS/$name.$r.log)" >&2
        fi
        sync
        t1=$EPOCHREALTIME
        secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
        timed=$(tail -n1 "$RESULTS/rss" 2>/dev/null || true)
        rss=${timed%%:*} cpu=""
        [[ $timed == *:*:* ]] && cpu=$(awk -F: '{ printf "%.2f", $2 + $3 }' <<<"$timed")
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$name" "$secs" "${rss:-}" "$load" "$cpu" | tee -a "$RESULTS/raw.tsv"
    done
done
down

PEER_BYTES=$(numfmt --from=si "${PEER%bps}" 2>/dev/null || echo 100000000)
awk -F'\t' -v size="$SIZE" -v peer="$PEER_BYTES" '
NR == 1 { next }
{ t[$2] = t[$2] " " $3; if ($4 != "") m[$2] = m[$2] " " $4; l[$2] = l[$2] " " $5; if ($6 != "") c[$2] = c[$2] " " $6; rows[$2] = 1; order[++n] = $2 }
function median(s,   a, k, i, j, x) {
    k = split(s, a, " ");
    for (i = 2; i <= k; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
END {
    print "| row | extract+sync, median (s) | runs (s) | peak RSS (MiB) | CPU (s) | load before |"
    print "| --- | ---: | --- | ---: | ---: | --- |"
    for (i = 1; i <= n; i++) {
        r = order[i]; if (done[r]++) continue
        med[r] = median(t[r])
        if (r in c) cpu[r] = median(c[r])
        if (r in m) rss[r] = median(m[r]) / 1024
        printf "| %s | %.2f |%s | %s | %s |%s |\n", r, med[r], t[r], (r in m) ? sprintf("%.0f", rss[r]) : "", (r in c) ? sprintf("%.2f", cpu[r]) : "", l[r]
    }
    if ("local" in med && "three:three" in med) {
        base = size / (3 * peer); if (med["local"] > base) base = med["local"]
        printf "\nthree: %.2f / max(size/3 peers %.2f, local %.2f) = %.2f (target 1.15)\n", med["three:three"], size / (3 * peer), med["local"], med["three:three"] / base
    }
    if ("local" in med && "three:three-slow" in med) {
        base = size / (2.1 * peer); if (med["local"] > base) base = med["local"]
        printf "three-slow: %.2f / max(size/2.1 peers %.2f, local %.2f) = %.2f (target 1.25)\n", med["three:three-slow"], size / (2.1 * peer), med["local"], med["three:three-slow"] / base
    }
    if ("local" in med && "three:fast" in med)
        printf "fast: %.2f / local %.2f = %.2f (target 1.15)\n", med["three:fast"], med["local"], med["three:fast"] / med["local"]
    if (("three:fast" in cpu) && ("three:fast1" in cpu))
        printf "fast CPU: %.2f / fast1 %.2f = %.2f (target 1.10)\n", cpu["three:fast"], cpu["three:fast1"], cpu["three:fast"] / cpu["three:fast1"]
    worst = 0
    for (r in rss) if (r ~ /^three:/ && r != "three:aria2-three" && rss[r] > worst) { worst = rss[r]; wr = r }
    if (worst > 0) printf "peak RSS of the several-source rows: %.0f MiB (%s; target 100)\n", worst, wr
    for (r in med) {
        if (r !~ /:url$/) continue
        mi = r; sub(/:url$/, "", mi)
        if (!((mi ":aria2") in med) || !("local" in med)) continue
        base = med[mi ":aria2"] > med["local"] ? med[mi ":aria2"] : med["local"]
        printf "\n%s: url / max(aria2, local) = %.2f (target 1.15)\n", mi, med[r] / base
    }
}' "$RESULTS/raw.tsv" | tee "$RESULTS/summary.md"
