#!/usr/bin/env bash
# The one command that runs every check, from a fresh clone on a fresh Debian machine:
#
#   scripts/test.sh
#
# 1. Installs the CLI tools the tests compare against (GNU tar, zstd, lz4, gzip, bzip2,
#    sha256sum, bsdtar, setfacl, lzip, lzop) and the ones tests/faults.rs uses (mkfs.ext4/xfs/btrfs/exfat, bindfs, exfat-fuse, setpriv,
#    strace; unshare for tests/url.rs, whose HTTP and TLS servers are its own) when one is missing and we are root with apt-get; otherwise the tests that
#    need a missing tool print `SKIP <test>: <tool> not installed` and pass.
# 2. cargo fmt --check, cargo clippy --all-targets -D warnings.
# 3. cargo test --release (release, so the large-file cases are fast).
# 4. The differential, hostile, corrupt, fault, incremental and URL suites again with the binary
#    under a stock machine's limits: `ulimit -n 64` and `ulimit -l 64` (FASTUNTAR_TEST_STOCK_LIMITS).
# 5. The suites that write again with one writer thread, or two where one is the default
#    (FASTUNTAR_WRITER_THREADS).
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A package=([tar]=tar [zstd]=zstd [lz4]=lz4 [gzip]=gzip [bzip2]=bzip2
  [sha256sum]=coreutils [awk]=mawk [/usr/bin/time]=time)
missing=()
package+=([mkfs.ext4]=e2fsprogs [mkfs.xfs]=xfsprogs [mkfs.btrfs]=btrfs-progs [bindfs]=bindfs
  [mkfs.exfat]=exfatprogs [mount.exfat-fuse]=exfat-fuse
  [setpriv]=util-linux [unshare]=util-linux [strace]=strace [setfacl]=acl [bsdtar]=libarchive-tools
  [lzip]=lzip [lzop]=lzop)
for tool in "${!package[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("${package[$tool]}")
done
if ((${#missing[@]})); then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "test.sh: installing ${missing[*]}"
    if ! { apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"; }; then
      echo "test.sh: could not install ${missing[*]}; tests that need them will SKIP"
    fi
  else
    echo "test.sh: missing ${missing[*]} (not root or no apt-get); tests that need them will SKIP"
  fi
fi

for component in rustfmt clippy; do
  if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
    rustup component add "$component" || { echo "test.sh: cargo $component is not available" >&2; exit 1; }
  fi
done

echo "test.sh: cargo fmt --check"
cargo fmt --check
echo "test.sh: cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings
# --all-targets: every unit and integration test, without the empty doc-test pass (the crate
# has no doc tests), so the last summary line belongs to a real suite.
echo "test.sh: cargo test --release --no-fail-fast --all-targets"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --release --no-fail-fast --all-targets 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
echo "test.sh: differential, hostile, corrupt, faults, incremental, url under ulimit -n 64 -l 64"
FASTUNTAR_TEST_STOCK_LIMITS=1 cargo test --release --no-fail-fast --test tests -- \
  suite::differential:: suite::hostile:: suite::corrupt:: suite::faults:: suite::incremental:: \
  suite::url:: 2>&1 | tee -a "$log"
stock=${PIPESTATUS[0]}
((status == 0)) && status=$stock
# The default is a writer thread per CPU: every suite that writes runs again with the other
# shape, one writer (or two on a machine of one CPU, where one is the default).
writers=1
(($(nproc) < 2)) && writers=2
echo "test.sh: differential, hostile, corrupt, faults, regressions, ordering with $writers writer thread(s)"
FASTUNTAR_WRITER_THREADS=$writers cargo test --release --no-fail-fast --test tests -- \
  suite::differential:: suite::hostile:: suite::corrupt:: suite::faults:: suite::regressions:: \
  suite::ordering:: 2>&1 | tee -a "$log"
one=${PIPESTATUS[0]}
((status == 0)) && status=$one
set -e
# One closing line with the totals over every suite.
awk '/^test result:/ { p += $4; f += $6 } END { printf "%d passed, %d failed\n", p, f }' "$log"
exit "$status"
