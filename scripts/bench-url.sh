#!/usr/bin/env bash
# Time-to-ready from a URL (issue 29): a mirror on 127.0.0.1 that caps each connection, and
# the ways a node operator restores from it, into a fresh RAM-backed ext4 for every run.
#
#   scripts/bench-url.sh [--rounds N] [--scale F] [--rate RATE] [--workdir DIR] [--bin PATH]
#                        [--port PORT] [--rows LIST] [--mirrors paced,nginx,three]
#                        [--peer RATE] [--chart [--chart-out DIR]] [--warm] [--prealloc]
#   (also reached as `scripts/bench.sh --only url [same options]`, and with --chart as
#   `scripts/bench.sh --only chart`)
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
#   fast-curl    curl -o /dev/null URL, the uncapped port (the download alone: its CPU and
#                nginx's are the floor under fast's)
#   local        fastuntar -x FILE
# The targets of issue 42: three <= 1.15 x max(size / (3 x PEER), local); three-slow <= 1.25 x
# max(size / (2.1 x PEER), local); fast <= 1.15 x local and its CPU <= 1.10 x fast1's; peak
# RSS <= 100 MiB. The fast link's CPU, split: fastuntar's user and system seconds, nginx's
# worker (utime + stime from /proc before and after the run: its reads, its sends and the
# loopback's receive processing that runs in its context), for fast, fast1, fast-curl and
# local; `fast` over `local` in CPU-s of both programs together says what the URL costs the
# machine, on 2 cores the same as wall time when both are busy.
#   scripts/bench-url.sh --mirrors three --rows three,three-slow,one,aria2-three,fast,fast1,local
#   scripts/bench-url.sh --mirrors three --rounds 5 --rows fast,fast1,fast-curl,local
# and the other extractors, for the chart (issue 44):
#   local-tar       tar -I zstd -xf FILE                (GNU tar)
#   local-bsdtar    bsdtar -xf FILE
#   local-tarcrate  bench/tar-unpack FILE DEST          (the `tar` crate's Archive::unpack
#                                                        behind the zstd crate's decoder)
#   aria2-tar       aria2c -x8 -s8 URL, then tar -I zstd -xf FILE
#   curl-bsdtar, curl-tarcrate                          (curl URL | each of them)
# --warm: the archive stays in the page cache for every row (read once at the start, no
# drop_caches; the destination is still a fresh ext4): what the URL path costs the client
# against a file, with neither side reading the disk. Without it, nginx's sendfile reads the
# archive from the virtio disk at the default readahead, and `curl -o /dev/null` alone took
# 1.13-1.38 s against 1.04-1.41 s for the whole local extraction (2026-11-28): the server's
# disk, not the client, sets the fast rows' pace.
# --prealloc: the RAM-backed ext4's image is allocated once (fallocate) and kept for every
# run (mkfs each time, nodiscard, so its pages stay). Without it each run writes into a new
# sparse file in /dev/shm, and tmpfs allocates and zeroes a page for every block the
# extraction writes: 0.4-0.5 CPU-s of 1.76 GB on this machine's two CPUs (2026-11-28: the
# fast row 1.21 s against 1.02, the local file 0.97 against 0.88), work a disk would not put
# on the CPUs, and more of a burden to the busier URL run.
# Printed: medians of extract+sync, of peak RSS and of CPU seconds (/usr/bin/time %M, %U and
# %S of the extractor; curl's for fast-curl), nginx's CPU seconds, the load average before the
# run, and the targets: issue 29's `url` within 1.15x of max(aria2, local), and issue 42's
# above.
# Results go to WORKDIR/results-url/<timestamp>/: raw.tsv (every run), summary.md (the table)
# and summary.tsv (the same for programs: row, group, label, median, min, max, runs, RSS,
# load; `#` lines say the date, machine, archive, mirror and build).
#
# --chart: the README's chart, time to a restored tree from a local file and from a URL.
# Rows local, local-tar, local-bsdtar, local-tarcrate, url, aria2-fu, aria2-tar, curl-fu,
# curl-tar from the nginx mirror, the archive at scale 0.15 (208 MB compressed, 616 MB of tar
# in 903 files: a round of the nine rows takes under a minute), 3 rounds (each unless given);
# then scripts/plot-chart.py draws summary.tsv as DIR/time-to-restore.svg and copies the
# table beside it as DIR/time-to-restore.tsv (DIR: --chart-out, default docs/).
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
CHART=0
CHART_OUT=$REPO/docs
WARM=0
PREALLOC=0
# The command line, for the table: as given to bench.sh (--only url|chart) or to this script.
[[ " $* " == *" --only "* ]] && COMMAND="scripts/bench.sh $*" || COMMAND="scripts/bench-url.sh $*"
declare -A GIVEN=()
while (($#)); do
    [[ $1 == --* ]] && GIVEN[$1]=1
    case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --scale) SCALE=$2; shift 2 ;;
    --chart) CHART=1; shift ;;
    --chart-out) CHART_OUT=$2; shift 2 ;;
    --warm) WARM=1; shift ;;
    --prealloc) PREALLOC=1; shift ;;
    --rate) RATE=$2; shift 2 ;;
    --workdir) WORKDIR=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --peer) PEER=$2; shift 2 ;;
    --rows) ROWS=${2//,/ }; shift 2 ;;
    --mirrors) MIRRORS=${2//,/ }; shift 2 ;;
    --only) [[ $2 == chart ]] && CHART=1; shift 2 ;; # from bench.sh
    --only=*) [[ $1 == --only=chart ]] && CHART=1; shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "bench-url.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
if ((CHART)); then
    [[ -n ${GIVEN[--scale]:-} ]] || SCALE=0.15
    [[ -n ${GIVEN[--rows]:-} ]] || ROWS="local local-tar local-bsdtar local-tarcrate url aria2-fu aria2-tar curl-fu curl-tar"
    [[ -n ${GIVEN[--mirrors]:-} ]] || MIRRORS="nginx"
fi
[[ $(id -u) == 0 ]] || { echo "bench-url.sh: needs root (drop_caches, losetup, mount, tc)" >&2; exit 2; }
for tool in nginx aria2c curl zstd tar bsdtar losetup mkfs.ext4 /usr/bin/time tc; do
    command -v "$tool" >/dev/null || {
        echo "bench-url.sh: installing nginx-light aria2 curl time zstd libarchive-tools iproute2 (missing $tool)"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends nginx-light aria2 curl time zstd libarchive-tools iproute2 >/dev/null
        break
    }
done
# The tar crate's unpacker, when a row runs it: its own small cargo project, its own target.
TARCRATE=""
if [[ " $ROWS " == *tarcrate* ]]; then
    (cd "$REPO" && cargo build --release -q --manifest-path bench/tar-unpack/Cargo.toml \
        --target-dir target/bench-tools)
    TARCRATE=$REPO/target/bench-tools/release/tar-unpack
fi
if [[ -z $BIN ]]; then
    (cd "$REPO" && cargo build --release -q)
    BIN=$REPO/target/release/fastuntar
fi
# The chart's smaller archive in a directory of its own: gen-archives.py would otherwise
# replace the URL table's (another --scale) with it, and back.
((CHART)) && ARCHDIR=$WORKDIR/archives-chart || ARCHDIR=$WORKDIR/archives
mkdir -p "$ARCHDIR"
python3 "$REPO/scripts/gen-archives.py" "$ARCHDIR" --scale "$SCALE" --only agave >&2
ARCHIVE=$ARCHDIR/agave.tar.zst
SIZE=$(stat -c %s "$ARCHIVE")
TAR_SIZE=$(awk -F'"tar_bytes": ' 'NF > 1 { split($2, a, /[,}]/); print a[1]; exit }' "$ARCHIVE.json" 2>/dev/null || true)
[[ -n $TAR_SIZE ]] || TAR_SIZE=$((SIZE * 3))
# Ports something already listens on (another benchmark's mirror) are not ours to measure:
# then two free ones.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
busy() { local i; for i in 0 1 2 3 4 5; do listening $((PORT + i)) && return 0; done; return 1; }
if busy; then
    PORT=$(python3 -c 'import socket
for _ in range(100):
    a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
    held = [a]
    try:
        for i in range(1, 6):
            b = socket.socket(); b.bind(("127.0.0.1", p + i)); held.append(b)
        print(p); break
    except OSError:
        pass
    finally:
        for s in held: s.close()')
    echo "bench-url.sh: port in use; the mirrors listen on $PORT to $((PORT + 5))"
fi
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
    ((PREALLOC)) || rm -f -- "$IMG"
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
# The rate of a tenth of a peer's (tc's units).
tenth() {
    local n=${PEER%%[a-z]*} unit=${PEER##*[0-9]}
    echo "$((n / 10))$unit"
}
# CPU seconds nginx's workers have used (utime + stime, clock ticks, of /proc/PID/stat).
TICK=$(getconf CLK_TCK)
nginx_cpu() {
    local total=0 pid f
    for pid in $(pgrep -P "$NGX_PID" 2>/dev/null); do
        f=$(cut -d' ' -f14,15 "/proc/$pid/stat" 2>/dev/null) || continue
        total=$((total + ${f% *} + ${f#* }))
    done
    echo "$total"
}
cleanup() {
    down
    rm -f -- "$IMG"
    [[ -n $TC ]] && tc qdisc del dev lo root 2>/dev/null
    kill "$NGX_PID" "$PACED_PID" 2>/dev/null || true
    wait "$NGX_PID" "$PACED_PID" 2>/dev/null || true
    rm -rf -- "$NGX" "$MNT"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
up() {
    down
    local bytes=$(((TAR_SIZE * 5 / 2 + SIZE * 3 / 2) >> 20 << 20))
    if ((PREALLOC)); then
        [[ -f $IMG ]] || fallocate -l "$bytes" "$IMG"
    else
        truncate -s "$bytes" "$IMG"
    fi
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
    fast-curl) echo "$t curl -sf -o /dev/null $FAST_URL" ;;
    url) echo "$t $BIN -x $URL -C $d -q" ;;
    url[0-9]*) echo "$t $BIN -x $URL -C $d -q --connections ${2#url}" ;;
    curl-fu) echo "curl -sf $URL | $t $BIN -x -C $d -q" ;;
    curl-tar) echo "curl -sf $URL | $t tar -I zstd -x -C $d" ;;
    aria2-fu) echo "aria2c -q -x8 -s8 -k1M --file-allocation=none -d $MNT -o a.tar.zst $URL && $t $BIN -x -f $MNT/a.tar.zst -C $d -q" ;;
    aria2) echo "aria2c -q -x8 -s8 -k1M --file-allocation=none -d $MNT -o a.tar.zst $URL" ;;
    aria2-tar) echo "aria2c -q -x8 -s8 -k1M --file-allocation=none -d $MNT -o a.tar.zst $URL && $t tar -I zstd -xf $MNT/a.tar.zst -C $d" ;;
    curl-bsdtar) echo "curl -sf $URL | $t bsdtar -xf - -C $d" ;;
    curl-tarcrate) echo "curl -sf $URL | $t $TARCRATE - $d" ;;
    local) echo "$t $BIN -x -f $ARCHIVE -C $d -q" ;;
    local-tar) echo "$t tar -I zstd -xf $ARCHIVE -C $d" ;;
    local-bsdtar) echo "$t bsdtar -xf $ARCHIVE -C $d" ;;
    local-tarcrate) echo "$t $TARCRATE $ARCHIVE $d" ;;
    *) echo "bench-url.sh: unknown row $2" >&2; return 1 ;;
    esac
}

# What the chart calls row $1, and its group.
GNU_TAR=$(tar --version | awk 'NR == 1 { print "GNU tar " $NF }')
BSDTAR=$(bsdtar --version | awk '{ print $1 " " $2; exit }')
TAR_CRATE=$(awk '/^name = "tar"$/ { getline; gsub(/[^0-9.]/, ""); print "tar crate " $0; exit }' \
    "$REPO/bench/tar-unpack/Cargo.lock" 2>/dev/null || echo "tar crate")
label_of() {
    case $1 in
    local) echo "fastuntar -x FILE" ;;
    local-tar) echo "$GNU_TAR -I zstd -x" ;;
    local-bsdtar) echo "$BSDTAR -x" ;;
    local-tarcrate) echo "$TAR_CRATE, Archive::unpack" ;;
    *url) echo "fastuntar -x URL (8 connections)" ;;
    *url[0-9]*) echo "fastuntar -x URL --connections ${1##*url}" ;;
    *three) echo "fastuntar -x URL1 --mirror URL2 --mirror URL3" ;;
    *three-slow) echo "the same, the third at a tenth" ;;
    *one) echo "fastuntar -x URL1 (one capped source)" ;;
    *aria2-three) echo "aria2c -x8 URL1 URL2 URL3, then fastuntar -x" ;;
    *fast) echo "fastuntar -x URL, uncapped, default flags" ;;
    *fast1) echo "fastuntar -x URL, uncapped, --connections 1" ;;
    *fast-curl) echo "curl -o /dev/null URL, uncapped" ;;
    *aria2-fu) echo "aria2c -x8, then fastuntar -x" ;;
    *aria2-tar) echo "aria2c -x8, then $GNU_TAR -x" ;;
    *aria2) echo "aria2c -x8 (the download alone)" ;;
    *curl-fu) echo "curl | fastuntar -x" ;;
    *curl-tar) echo "curl | $GNU_TAR -x" ;;
    *curl-bsdtar) echo "curl | $BSDTAR -x" ;;
    *curl-tarcrate) echo "curl | $TAR_CRATE" ;;
    *) echo "$1" ;;
    esac
}
group_of() { [[ $1 == local* ]] && echo "From a local file" || echo "From a URL (${1%%:*} mirror)"; }

CPU_MODEL=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
MACHINE="$(nproc) vCPUs ($CPU_MODEL), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM, Linux $(uname -r)"
BUILD="$("$BIN" --version 2>/dev/null | head -n1), $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown)"
RATE_SAYS=$(awk -v b="$RATE_BYTES" 'BEGIN { printf "%g MB/s", b / 1e6 }')
MIRROR_SAYS="nginx $(nginx -v 2>&1 | sed 's/.*\///') on 127.0.0.1, limit_rate $RATE_SAYS per request (a second's worth at once)"
[[ $MIRRORS == paced ]] && MIRROR_SAYS="pacing-server.py on 127.0.0.1, $RATE_SAYS per connection"
{
    echo "machine: $MACHINE"
    echo "archive: $ARCHIVE ($SIZE bytes); mirrors: $MIRRORS at $RATE (paced: pacing-server.py, a cap per connection; nginx $(nginx -v 2>&1 | sed 's/.*\///'): limit_rate, a cap per request)"
    echo "fastuntar: $BIN ($BUILD)"
} | tee "$RESULTS/setup.txt"
printf 'round\trow\tseconds\trss_kb\tload\tstatus\tcpu_s\tuser_s\tsys_s\tnginx_s\n' >"$RESULTS/raw.tsv"
# Every row of every mirror, then the local extractions once, per round. The rows of several
# sources and the fast link go with `three` only, the others with paced and nginx.
MULTI_ROWS=" three three-slow one aria2-three fast fast1 fast-curl "
RUNS=()
for m in $MIRRORS; do
    for row in $ROWS; do
        [[ $row == local* ]] && continue
        if [[ $m == three ]]; then [[ $MULTI_ROWS == *" $row "* ]] || continue
        else [[ $MULTI_ROWS == *" $row "* ]] && continue; fi
        RUNS+=("$m:$row")
    done
done
for row in $ROWS; do [[ $row == local* ]] && RUNS+=("-:$row"); done
STARTED=$(date -u '+%Y-%m-%d %H:%M UTC')
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
        if ((WARM)); then cat "$ARCHIVE" >/dev/null; else echo 3 >/proc/sys/vm/drop_caches; fi
        load=$(cut -d' ' -f1 /proc/loadavg)
        : >"$RESULTS/rss"
        status=ok
        n0=$(nginx_cpu)
        t0=$EPOCHREALTIME
        if ! bash -c "set -o pipefail; $(cmd_of "$mirror" "$row")" >"$RESULTS/$name.$r.log" 2>&1; then
            echo "round $r $name: FAILED (see $RESULTS/$name.$r.log)" >&2
            status=failed
        fi
        sync
        t1=$EPOCHREALTIME
        n1=$(nginx_cpu)
        secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
        timed=$(tail -n1 "$RESULTS/rss" 2>/dev/null || true)
        rss=${timed%%:*} cpu="" user="" sys="" ngx=""
        if [[ $timed == *:*:* ]]; then
            IFS=: read -r _ user sys <<<"$timed"
            cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
        fi
        [[ $mirror == - ]] || ngx=$(awk -v a="$n0" -v b="$n1" -v t="$TICK" 'BEGIN { printf "%.2f", (b - a) / t }')
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$name" "$secs" "${rss:-}" "$load" "$status" \
            "$cpu" "$user" "$sys" "$ngx" | tee -a "$RESULTS/raw.tsv"
    done
done
down

# The table, for people (summary.md) and for programs (summary.tsv: what the chart draws).
# A failed run is left out of its row's figures and counted.
{
    echo "# date	$STARTED"
    echo "# machine	$MACHINE"
    echo "# archive	$(basename "$ARCHIVE") of scripts/gen-archives.py --scale $SCALE: $(awk -v s="$SIZE" -v t="$TAR_SIZE" 'BEGIN { printf "%.0f MB zstd (32 MiB frames), %.0f MB of tar", s / 1e6, t / 1e6 }')"
    echo "# mirror	$MIRROR_SAYS"
    echo "# build	$BUILD"
    echo "# rounds	$ROUNDS"
    image="a RAM-backed loop device"
    ((PREALLOC)) && image="a RAM-backed loop device over an image allocated once (--prealloc)"
    if ((WARM)); then
        echo "# method	the archive in the page cache for every run (--warm), a fresh ext4 on $image for each, timed to the end of a sync"
    else
        echo "# method	page cache dropped before each run, a fresh ext4 on $image for each, timed to the end of a sync"
    fi
    echo "# command	$COMMAND"
} >"$RESULTS/summary.tsv"
LABELS=$(for run in "${RUNS[@]}"; do
    mirror=${run%%:*} row=${run#*:}
    [[ $mirror == - ]] && name=$row || name=$run
    printf '%s\t%s\t%s\n' "$name" "$(group_of "$name")" "$(label_of "$name")"
done)
PEER_BYTES=$(numfmt --from=si "${PEER%bps}" 2>/dev/null || echo 100000000)
awk -F'\t' -v size="$SIZE" -v peer="$PEER_BYTES" -v tsv="$RESULTS/summary.tsv" -v labels="$LABELS" '
BEGIN {
    k = split(labels, lines, "\n")
    for (i = 1; i <= k; i++) { split(lines[i], f, "\t"); group[f[1]] = f[2]; label[f[1]] = f[3] }
}
NR == 1 { next }
{
    order[++n] = $2
    if ($6 == "failed") { failed[$2]++; next }
    t[$2] = t[$2] " " $3; if ($4 != "") m[$2] = m[$2] " " $4; l[$2] = l[$2] " " $5
    if ($7 != "") { c[$2] = c[$2] " " $7; u[$2] = u[$2] " " $8; s[$2] = s[$2] " " $9 }
    if ($10 != "") g[$2] = g[$2] " " $10
}
function sorted(v, a,   k, i, j, x) {
    k = split(v, a, " ");
    for (i = 2; i <= k; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
    return k
}
function median(v,   a, k) {
    k = sorted(v, a)
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
function fmt(v) { return v == "" ? "" : sprintf("%.2f", v) }
END {
    print "| row | extract+sync, median (s) | runs (s) | peak RSS (MiB) | CPU (s): user + sys | nginx CPU (s) | load before |"
    print "| --- | ---: | --- | ---: | ---: | ---: | --- |"
    printf "row\tgroup\tlabel\tmedian_s\tmin_s\tmax_s\truns_s\trss_mib\tload\tfailed\tcpu_s\tuser_s\tsys_s\tnginx_s\n" >> tsv
    for (i = 1; i <= n; i++) {
        r = order[i]; if (done[r]++) continue
        if (t[r] == "") {
            printf "| %s | failed | | | | | |\n", r
            printf "%s\t%s\t%s\t\t\t\t\t\t\t%d\t\t\t\t\n", r, group[r], label[r], failed[r] >> tsv
            continue
        }
        med[r] = median(t[r]); k = sorted(t[r], a)
        rss = (r in m) ? sprintf("%.0f", median(m[r]) / 1024) : ""
        if (r in m) rssm[r] = median(m[r]) / 1024
        cs = us = ss = ns = ""
        if (r in c) { cpu[r] = cs = median(c[r]); us = median(u[r]); ss = median(s[r]) }
        if (r in g) { ngx[r] = ns = median(g[r]) }
        cpucell = cs == "" ? "" : sprintf("%.2f = %.2f + %.2f", cs, us, ss)
        printf "| %s | %.2f |%s%s | %s | %s | %s |%s |\n", r, med[r], t[r], failed[r] ? " (" failed[r] " failed)" : "", rss, cpucell, fmt(ns), l[r]
        runs = t[r]; sub(/^ /, "", runs); loads = l[r]; sub(/^ /, "", loads)
        printf "%s\t%s\t%s\t%.3f\t%.3f\t%.3f\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r, group[r], label[r], med[r], a[1], a[k], runs, rss, loads, failed[r], fmt(cs), fmt(us), fmt(ss), fmt(ns) >> tsv
    }
    print ""
    for (r in med) {
        if (r !~ /:url$/) continue
        mi = r; sub(/:url$/, "", mi)
        if (!((mi ":aria2") in med) || !("local" in med)) continue
        base = med[mi ":aria2"] > med["local"] ? med[mi ":aria2"] : med["local"]
        printf "%s: url / max(aria2, local) = %.2f (target 1.15)\n", mi, med[r] / base
    }
    if ("local" in med && "three:three" in med) {
        base = size / (3 * peer); if (med["local"] > base) base = med["local"]
        printf "three: %.2f / max(size/3 peers %.2f, local %.2f) = %.2f (target 1.15)\n", med["three:three"], size / (3 * peer), med["local"], med["three:three"] / base
    }
    if ("local" in med && "three:three-slow" in med) {
        base = size / (2.1 * peer); if (med["local"] > base) base = med["local"]
        printf "three-slow: %.2f / max(size/2.1 peers %.2f, local %.2f) = %.2f (target 1.25)\n", med["three:three-slow"], size / (2.1 * peer), med["local"], med["three:three-slow"] / base
    }
    if ("local" in med && "three:fast" in med)
        printf "fast: %.2f / local %.2f = %.2f (target 1.15)\n", med["three:fast"], med["local"], med["three:fast"] / med["local"]
    if (("three:fast" in cpu) && ("three:fast1" in cpu))
        printf "fast CPU: %.2f / fast1 %.2f = %.2f (target 1.10)\n", cpu["three:fast"], cpu["three:fast1"], cpu["three:fast"] / cpu["three:fast1"]
    if (("three:fast" in cpu) && ("local" in cpu) && ("three:fast" in ngx))
        printf "fast link, CPU-s of fastuntar + nginx: %.2f + %.2f = %.2f against local %.2f: %.2fx\n", cpu["three:fast"], ngx["three:fast"], cpu["three:fast"] + ngx["three:fast"], cpu["local"], (cpu["three:fast"] + ngx["three:fast"]) / cpu["local"]
    if (("three:fast-curl" in cpu) && ("three:fast-curl" in ngx))
        printf "the download alone (curl -o /dev/null): curl %.2f + nginx %.2f CPU-s\n", cpu["three:fast-curl"], ngx["three:fast-curl"]
    worst = 0
    for (r in rssm) if (r ~ /^three:/ && r != "three:aria2-three" && r != "three:fast-curl" && rssm[r] > worst) { worst = rssm[r]; wr = r }
    if (worst > 0) printf "peak RSS of the several-source rows: %.0f MiB (%s; target 100)\n", worst, wr
}' "$RESULTS/raw.tsv" | tee "$RESULTS/summary.md"
echo "bench-url.sh: $RESULTS/summary.tsv"

if ((CHART)); then
    mkdir -p "$CHART_OUT"
    python3 "$REPO/scripts/plot-chart.py" "$RESULTS/summary.tsv" "$CHART_OUT/time-to-restore.svg"
    cp "$RESULTS/summary.tsv" "$CHART_OUT/time-to-restore.tsv"
    echo "bench-url.sh: $CHART_OUT/time-to-restore.svg, $CHART_OUT/time-to-restore.tsv"
fi
