#!/usr/bin/env bash
# Every check, from a fresh clone on a fresh Debian machine, in one of two tiers:
#
#   scripts/test.sh           the exhaustive tier: what CI runs (.ci/run)
#   scripts/test.sh --quick   the quick tier: one row per dimension, while working
#
# 1. Installs (as root, with apt-get) every tool a test compares against or needs: GNU tar,
#    zstd, lz4, gzip, bzip2, xz, lzip, lzop, bsdtar, sha256sum, setfacl, mkfs.ext4/xfs/btrfs/
#    exfat, bindfs, exfat-fuse, setpriv, unshare, setsid, script, strace, /usr/bin/time, and
#    for the package test (tests/suite/package.rs, exhaustive tier) file, dpkg-deb and
#    musl-gcc (musl-tools: scripts/package.sh's static build; the musl target itself comes
#    from `rustup target add`, which package.sh runs). Under
#    CI (CI=true) a test whose tool is still missing fails naming it; elsewhere it prints
#    `SKIP <test>: <tool> not installed`.
#    moto's S3 server (tests/suite/s3.rs) comes from PyPI into a venv under target/ (Debian's
#    python3 refuses a system-wide pip install, PEP 668); the tests run its python
#    (FASTUNTAR_TEST_PYTHON). Under CI a missing moto fails the S3 tests.
# 2. Exhaustive tier only: cargo fmt --check; cargo clippy --release --all-targets -D warnings
#    and cargo doc with -D warnings,
#    in the tests' profile, so the build scripts (zstd's, liblzma's and ring's C) run once for
#    both (the dev profile's clippy built every dependency again: 134 s against 58 s).
#    Then scripts/package.sh: the static (musl) build and the .deb that
#    tests/suite/package.rs checks.
# 3. cargo test, once: the unit tests and the one integration crate (tests/tests.rs), whose
#    runner (tests/util/engine.rs) reruns each case over the rows of the matrix its suite
#    states: writer rows, writer threads, decoder rows, encodings, the stock limits
#    (`ulimit -n 64 -l 64`). FASTUNTAR_TEST_TIER says how many: exhaustive or quick.
# 4. Exhaustive tier, as root: the tests that ran a program as another user (uid 65534), once
#    more with their directories and the binary under a fresh 0700 directory, as from a
#    clone under /root or in a `mktemp -d` (issue 40): they must stage what that user needs
#    where it can reach it (tests/util/mod.rs, "what another user can reach").
#
# docs/TESTING.md has what each tier costs and how it was measured.
set -euo pipefail
cd "$(dirname "$0")/.."

tier=exhaustive
case "${1:-}" in
  --quick) tier=quick ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--quick]" >&2; exit 64 ;;
esac

declare -A package=([tar]=tar [zstd]=zstd [lz4]=lz4 [gzip]=gzip [bzip2]=bzip2 [xz]=xz-utils
  [lzma]=xz-utils [sha256sum]=coreutils [awk]=mawk [/usr/bin/time]=time [perl]=perl-base
  [mkfs.ext4]=e2fsprogs [mkfs.xfs]=xfsprogs [mkfs.btrfs]=btrfs-progs [bindfs]=bindfs
  [mkfs.exfat]=exfatprogs [mount.exfat-fuse]=exfat-fuse [setpriv]=util-linux
  [unshare]=util-linux [setsid]=util-linux [script]=bsdutils [strace]=strace [setfacl]=acl
  [bsdtar]=libarchive-tools [lzip]=lzip [lzop]=lzop [file]=file [dpkg-deb]=dpkg
  [musl-gcc]=musl-tools)
missing=()
for tool in "${!package[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("${package[$tool]}")
done
# python3 with venv and ensurepip, for moto's venv below.
command -v python3 >/dev/null 2>&1 || missing+=(python3)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
if ((${#missing[@]})); then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "test.sh: installing ${missing[*]}"
    if ! { apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"; }; then
      echo "test.sh: could not install ${missing[*]}"
    fi
  else
    echo "test.sh: missing ${missing[*]} (not root or no apt-get)"
  fi
fi

venv=target/test-venv
if ! "$venv/bin/python3" -c 'import moto.server, boto3' >/dev/null 2>&1; then
  echo "test.sh: installing moto[server] into $venv"
  rm -rf "$venv"
  if ! { python3 -m venv "$venv" && "$venv/bin/python3" -m pip install -q 'moto[server]>=5,<6'; }; then
    echo "test.sh: could not install moto[server]"
  fi
fi
export FASTUNTAR_TEST_PYTHON=$PWD/$venv/bin/python3

if [[ $tier == exhaustive ]]; then
  for component in rustfmt clippy; do
    if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
      rustup component add "$component" || { echo "test.sh: cargo $component is not available" >&2; exit 1; }
    fi
  done
  echo "test.sh: cargo fmt --check"
  cargo fmt --check
  echo "test.sh: cargo clippy --release --all-targets -- -D warnings"
  cargo clippy --release --all-targets -- -D warnings
  # The API's documentation (issue 43: `cargo doc` with no warnings), private items too.
  echo "test.sh: cargo doc --no-deps --document-private-items with -D warnings"
  RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --document-private-items --quiet
  # The static build for tests/suite/package.rs, before the tests rather than during them
  # (it would compete with them for the CPUs); the test runs package.sh again, which then
  # only packs. A failure here is the test's to report.
  echo "test.sh: scripts/package.sh (the static binary and the .deb)"
  scripts/package.sh >/dev/null || echo "test.sh: scripts/package.sh failed; suite::package says why"
fi

# --all-targets: every unit and integration test; the API's doc tests (its examples, which
# restore fixtures/sample.tar.zst) run after, with --doc, which --all-targets leaves out.
echo "test.sh: FASTUNTAR_TEST_TIER=$tier cargo test --release --no-fail-fast --all-targets"
log=$(mktemp)
users=$(mktemp)
hidden=$(mktemp -d)
trap 'rm -rf "$log" "$users" "$hidden"' EXIT
set +e
FASTUNTAR_TEST_USERS_LOG=$users FASTUNTAR_TEST_TIER=$tier \
  cargo test --release --no-fail-fast --all-targets 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
# The tests that change machine-wide state (kernel.io_uring_disabled), which every other test
# would see, are #[ignore]d in the parallel run and run here, alone.
echo "test.sh: the tests that run alone (--ignored)"
FASTUNTAR_TEST_TIER=$tier cargo test --release --test tests -- --ignored 2>&1 | tee -a "$log"
alone=${PIPESTATUS[0]}
((status == 0)) && status=$alone
echo "test.sh: the API's doc tests (cargo test --doc)"
cargo test --release --doc 2>&1 | tee -a "$log"
doc=${PIPESTATUS[0]}
((status == 0)) && status=$doc
# The tests that ran a program as another user (each noted its name), from under a 0700
# directory (mktemp -d's): the tests' directories (FASTUNTAR_TEST_TMPDIR) and the binary
# (FASTUNTAR_TEST_BIN) where uid 65534 cannot reach them. What the rows add is not about
# reaching: one row each (the quick tier).
if [[ $tier == exhaustive && $(id -u) == 0 && -s $users ]]; then
  mapfile -t staged < <(sort -u "$users")
  mkdir -p "$hidden/tmp" "$hidden/bin"
  cp target/release/fastuntar "$hidden/bin/"
  echo "test.sh: ${#staged[@]} tests that run programs as another user, again from $hidden (0700)"
  FASTUNTAR_TEST_TMPDIR=$hidden/tmp FASTUNTAR_TEST_BIN=$hidden/bin/fastuntar FASTUNTAR_TEST_TIER=quick \
    cargo test --release --test tests -- --exact "${staged[@]}" 2>&1 | tee -a "$log"
  hidden_status=${PIPESTATUS[0]}
  ((status == 0)) && status=$hidden_status
fi
set -e
# One closing line with the totals over the unit tests and the integration crate.
awk '/^test result:/ { p += $4; f += $6 } END { printf "%d passed, %d failed\n", p, f }' "$log"
exit "$status"
