#!/bin/sh
# Runs the `extract` fuzz target in a throwaway mount namespace: / is read-only there, the
# target extracts into a private tmpfs, and only fuzz/ (corpus, artifacts, logs) stays
# writable. An escape that the target's own checks missed could then not touch the machine.
# Needs root (unshare, mount). Extra arguments go to libFuzzer, e.g.
#
#     fuzz/run-extract.sh -max_total_time=600
#
# Without root, run it plainly: RUSTC_BOOTSTRAP=1 cargo fuzz run extract corpus/extract -- ...
set -eu
cd "$(dirname "$0")"
RUSTC_BOOTSTRAP=1 cargo fuzz build extract
mkdir -p artifacts/extract corpus/extract
work=/tmp/fastuntar-fuzz-extract
mkdir -p "$work"
exec unshare --mount --propagation private sh -eu -c '
    mount -t tmpfs -o size=2g tmpfs "$1"
    mount --bind "$PWD" "$PWD"
    cd "$PWD"   # onto the bind mount: the old cwd is on / and about to turn read-only
    mount -o remount,bind,ro /
    shift
    FASTUNTAR_FUZZ_DIR="$0" exec target/x86_64-unknown-linux-gnu/release/extract \
        -artifact_prefix=artifacts/extract/ -max_len=262144 -timeout=10 -rss_limit_mb=2048 \
        -dict=tar.dict -close_fd_mask=3 -print_final_stats=1 "$@" corpus/extract
' "$work" "$work" "$@"
