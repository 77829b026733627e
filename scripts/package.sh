#!/usr/bin/env bash
# Builds fastuntar for machines without a Rust toolchain: a static binary and a .deb.
#
#   scripts/package.sh [--out DIR] [--libc musl|glibc]
#
# 1. The static binary, for x86_64 or aarch64 Linux:
#    - musl (default): `cargo build --release --locked --target ARCH-unknown-linux-musl`. The
#      target's standard library comes from `rustup target add`; the C inside the crates
#      (zstd-sys, liblzma-sys, ring) is compiled with musl-gcc, Debian's musl-tools, which the
#      script installs as root with apt-get when it is missing. musl resolves host names itself:
#      /etc/hosts and the nameservers of /etc/resolv.conf only (no nsswitch.conf: no
#      systemd-resolved through nss-resolve, no mDNS, LDAP or NIS hosts; a resolv.conf pointing
#      to 127.0.0.53 still works). That is what a URL or an S3 endpoint needs here.
#    - glibc (`--libc glibc`, and the fallback when the musl target or musl-gcc cannot be had):
#      `-C target-feature=+crt-static` on the gnu target. What that costs: getaddrinfo in a
#      static glibc still loads the NSS modules (libnss_*.so) at run time, and they must come
#      from the very glibc version it was linked with. On a machine with another glibc, a URL's
#      host name may not resolve (or the process may crash in the module); /etc/hosts and
#      numeric addresses keep working. The linker warns about it; the script says so too.
# 2. DIR/fastuntar_VERSION_ARCH.deb, made with dpkg-deb alone (VERSION from Cargo.toml):
#      /usr/bin/fastuntar
#      /usr/share/man/man1/fastuntar.1.gz                      (`fastuntar --man`)
#      /usr/share/bash-completion/completions/fastuntar        (`fastuntar --completions bash`)
#      /usr/share/zsh/vendor-completions/_fastuntar            (... zsh)
#      /usr/share/fish/vendor_completions.d/fastuntar.fish     (... fish)
#      /usr/share/doc/fastuntar/{copyright,changelog.gz}
#      /usr/share/lintian/overrides/fastuntar                  (static-pie is not a library)
#    Depends: nothing (static). Maintainer: $DEBFULLNAME <$DEBEMAIL> (Debian's variables),
#    else the repository's git user.name and user.email. Files are dated from the last commit
#    (SOURCE_DATE_EPOCH), owned by root, so the same commit gives the same package.
# 3. DIR/fastuntar-VERSION-ARCH-linux-LIBC (the binary alone) and DIR/SHA256SUMS.
# Then it checks that the binary is static (file, ldd) and runs, and prints what lintian says
# of the .deb when lintian is installed (`apt-get install lintian`; not installed by this
# script). DIR defaults to target/package/.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

OUT=$REPO/target/package
LIBC=musl
while (($#)); do
    case $1 in
    --out) OUT=${2:?--out needs a directory}; shift 2 ;;
    --libc) LIBC=${2:?--libc needs musl or glibc}; shift 2 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "package.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[[ $LIBC == musl || $LIBC == glibc ]] || { echo "package.sh: --libc musl or glibc, not $LIBC" >&2; exit 2; }
say() { echo "package.sh: $*" >&2; }
die() { say "$*"; exit 1; }

case $(uname -m) in
x86_64) ARCH=x86_64 DEB_ARCH=amd64 ;;
aarch64) ARCH=aarch64 DEB_ARCH=arm64 ;;
*) die "no package for $(uname -m): x86_64 and aarch64 only" ;;
esac
NAME=fastuntar
VERSION=$(awk -F'"' '/^\[/ { section = $0 } section == "[package]" && /^version *=/ { print $2; exit }' Cargo.toml)
[[ -n $VERSION ]] || die "no version in Cargo.toml's [package]"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
COMMIT=$(git describe --always --dirty 2>/dev/null || echo unknown)

# --- 1. The static binary -------------------------------------------------------------------
musl_ready() {
    rustup target list --installed 2>/dev/null | grep -qx "$ARCH-unknown-linux-musl" ||
        rustup target add "$ARCH-unknown-linux-musl" >&2 || return 1
    if ! command -v musl-gcc >/dev/null; then
        [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null || return 1
        say "installing musl-tools (musl-gcc, for the C in zstd-sys, liblzma-sys and ring)"
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends musl-tools; } >&2 || return 1
    fi
}
if [[ $LIBC == musl ]] && ! musl_ready; then
    say "the musl target or musl-gcc is not available: a static glibc binary instead (DNS: see --help)"
    LIBC=glibc
fi
if [[ $LIBC == musl ]]; then
    TRIPLE=$ARCH-unknown-linux-musl
    triple_var=${TRIPLE//-/_}
    say "cargo build --release --locked --target $TRIPLE"
    env "CC_$triple_var=musl-gcc" cargo build --release --locked --target "$TRIPLE" >&2
else
    TRIPLE=$ARCH-unknown-linux-gnu
    say "cargo build --release --locked --target $TRIPLE with -C target-feature=+crt-static"
    say "note: a static glibc binary loads the NSS modules of its own glibc version to resolve names"
    # --target keeps RUSTFLAGS off the build scripts and proc macros, which run on the host.
    RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
        cargo build --release --locked --target "$TRIPLE" >&2
fi
BIN=$REPO/target/$TRIPLE/release/$NAME
[[ -x $BIN ]] || die "$BIN was not built"

# Static: `file` says so, and ldd finds no dynamic section (musl's ldd or glibc's).
kind=$(file -b "$BIN")
[[ $kind == *"statically linked"* || $kind == *"static-pie linked"* ]] ||
    die "$BIN is not static: $kind"
if ldd_out=$(ldd "$BIN" 2>&1) && [[ $ldd_out != *"statically linked"* && $ldd_out != *"not a dynamic executable"* ]]; then
    die "$BIN has dynamic dependencies: $ldd_out"
fi
"$BIN" --version >/dev/null || die "$BIN does not run"

# --- 2. The .deb ----------------------------------------------------------------------------
mkdir -p "$OUT"
STAGE=$(mktemp -d "$OUT/.deb.XXXXXX")
trap 'rm -rf -- "$STAGE"' EXIT
ROOT=$STAGE/root
install -D -m 0755 "$BIN" "$ROOT/usr/bin/$NAME"
strip --strip-unneeded "$ROOT/usr/bin/$NAME" 2>/dev/null || true
install -d -m 0755 "$ROOT/usr/share/man/man1" "$ROOT/usr/share/bash-completion/completions" \
    "$ROOT/usr/share/zsh/vendor-completions" "$ROOT/usr/share/fish/vendor_completions.d" \
    "$ROOT/usr/share/doc/$NAME"
"$BIN" --man | gzip -9n >"$ROOT/usr/share/man/man1/$NAME.1.gz"
"$BIN" --completions bash >"$ROOT/usr/share/bash-completion/completions/$NAME"
"$BIN" --completions zsh >"$ROOT/usr/share/zsh/vendor-completions/_$NAME"
"$BIN" --completions fish >"$ROOT/usr/share/fish/vendor_completions.d/$NAME.fish"

MAINTAINER="${DEBFULLNAME:-$(git config user.name 2>/dev/null || true)} <${DEBEMAIL:-$(git config user.email 2>/dev/null || true)}>"
[[ $MAINTAINER =~ ^[^\<]+\ \<[^@\>]+@[^\>]+\>$ ]] ||
    die "no maintainer: set DEBFULLNAME and DEBEMAIL (or git's user.name and user.email)"
DATE_R=$(date -u -R -d "@$SOURCE_DATE_EPOCH")
cat >"$ROOT/usr/share/doc/$NAME/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: $NAME
Upstream-Contact: $MAINTAINER
Comment: Built from the fastuntar repository at $COMMIT by scripts/package.sh. The
 binary is statically linked and includes the Rust crates listed in the repository's
 Cargo.lock (and, for the musl build, the musl C library), each under its own license.

Files: *
Copyright: $(date -u -d "@$SOURCE_DATE_EPOCH" +%Y) the fastuntar developers
License: none-stated
 The repository states no license yet.
EOF
printf '%s (%s) unstable; urgency=medium\n\n  * Built from %s by scripts/package.sh:\n    %s, static.\n\n -- %s  %s\n' \
    "$NAME" "$VERSION" "$COMMIT" "$TRIPLE" "$MAINTAINER" "$DATE_R" |
    gzip -9n >"$ROOT/usr/share/doc/$NAME/changelog.gz"
# A static-pie executable has no DT_NEEDED, which lintian takes for a shared library without
# its libc (a false positive: `file` says static-pie linked, and the kernel runs it as such).
install -d -m 0755 "$ROOT/usr/share/lintian/overrides"
cat >"$ROOT/usr/share/lintian/overrides/$NAME" <<EOF
# usr/bin/fastuntar is a static-pie executable, not a shared library: no libc to need.
$NAME: shared-library-lacks-prerequisites [usr/bin/$NAME]
EOF
chmod 0644 "$ROOT"/usr/share/man/man1/* "$ROOT"/usr/share/*/*completion*/* \
    "$ROOT/usr/share/zsh/vendor-completions/_$NAME" "$ROOT/usr/share/doc/$NAME"/* \
    "$ROOT/usr/share/lintian/overrides/$NAME"

install -d -m 0755 "$ROOT/DEBIAN"
(cd "$ROOT" && find usr -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum) >"$ROOT/DEBIAN/md5sums"
chmod 0644 "$ROOT/DEBIAN/md5sums"
INSTALLED_KIB=$(du -sk --exclude=DEBIAN "$ROOT" | cut -f1)
cat >"$ROOT/DEBIAN/control" <<EOF
Package: $NAME
Version: $VERSION
Architecture: $DEB_ARCH
Maintainer: $MAINTAINER
Installed-Size: $INSTALLED_KIB
Section: utils
Priority: optional
Description: fast and safe tar extractor for Linux
 fastuntar extracts tar archives (plain, zstd, gzip, bzip2, xz or LZ4) as fast
 as the disk allows: a decoder feeding a pool of aligned buffers, an io_uring
 writer, O_DIRECT for large files. Nothing is created outside the destination,
 whatever the archive says. It reads archives from files, standard input,
 http(s):// URLs (several connections, resumed after a drop) and s3:// objects,
 and resumes an interrupted restore.
 .
 Built to restore blockchain ledger snapshots; takes GNU tar's options for
 extracting and listing. A static binary: no dependencies.
EOF
chmod 0644 "$ROOT/DEBIAN/control"
find "$ROOT" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
DEB=$OUT/${NAME}_${VERSION}_${DEB_ARCH}.deb
dpkg-deb --root-owner-group -Zxz --build "$ROOT" "$DEB" >&2

# --- 3. The binary alone, and the sums -----------------------------------------------------
LONE=$OUT/$NAME-$VERSION-$ARCH-linux-$LIBC
install -m 0755 "$ROOT/usr/bin/$NAME" "$LONE"
(cd "$OUT" && sha256sum "$(basename "$DEB")" "$(basename "$LONE")" >SHA256SUMS)

if command -v lintian >/dev/null; then
    say "lintian $(basename "$DEB"):"
    lintian --tag-display-limit 0 "$DEB" >&2 || true
fi
say "$kind"
echo "$DEB"
echo "$LONE"
