#!/usr/bin/env python3
"""Generate the deterministic benchmark archives for fastuntar.

Usage: python3 scripts/gen-archives.py OUTDIR [--scale F] [--only KIND[,KIND...]] [--force]
       (KIND: snapshot, smallfiles, agave; default: all three)

Writes (python3 standard library + the `zstd` CLI only):

  OUTDIR/snapshot.tar.zst    shaped like a Solana/Agave full ledger snapshot: `version`,
                             `snapshots/<slot>/<slot>`, `snapshots/status_cache`, directory
                             entries `snapshots/`, `snapshots/<slot>/`, `accounts/`, and ~6,000
                             `accounts/<slot>.<id>` files of log-normal size (median ~200 KB,
                             tail capped at 64 MiB), ~4 GB of tar, ordered the way Agave's
                             archiver orders them (sorted by size, then 4 small + 1 large, ...).
  OUTDIR/smallfiles.tar.zst  ~100,000 files of log-normal size (median ~6 KB) in ~340
                             directories, grouped per directory like `tar -c` of a tree.
  OUTDIR/agave.tar.zst       the tar stream byte for byte as Agave's archiver writes it (tar crate
                             headers: `version`, `snapshots/` tree from file metadata, then
                             ~6,000 `accounts/<slot>.<id>` with `Header::new_gnu()` + path, size,
                             cksum only: mode/uid/gid NUL, mtime 0, typeflag NUL, no `accounts/`
                             entry, 1024-byte end, no record padding), file contents shaped like
                             AppendVec account storage (136-byte account headers + data), sizes
                             as in `snapshot`; compressed as Agave 4.x does: independent zstd -3
                             frames of exactly 32 MiB of tar each (content size in every frame
                             header, no checksum).
  OUTDIR/agave.tar.lz4       the same tar stream, lz4 -1 (64 KiB linked blocks, content
                             checksum: the lz4 crate's EncoderBuilder defaults, level 1).
  OUTDIR/agave-1frame.tar.zst  the same tar stream as ONE zstd -3 frame (zstd -T0 --no-check:
                             the multi-threaded CLI still writes a single frame).

Every archive gets a sidecar stamp `OUTDIR/<name>.tar.zst.json` holding the generation
parameters and the measured statistics (members, bytes, compressed bytes, ratio).  An archive
whose stamp matches the requested parameters (and whose size matches the stamp) is not
regenerated.  `--scale F` multiplies the file counts (0.01 gives a quick smoke set).

Content recipe: every 4 KiB block of file data is 2 KiB of pseudo-random bytes followed by
2 KiB of a short repeated pattern, so zstd -1 compresses it about 2x.  The random halves are
taken from a 128 MiB pool generated once from the seed (random.Random.randbytes); each file
starts at a seeded pseudo-random 4 KiB-aligned offset of the interleaved 256 MiB pool, so
no repetition is ever visible inside zstd -1's 512 KiB window and the whole output is a
pure function of (seed, scale).  The tar stream is GNU format (as Agave's tar crate writes
it), mode 0644 files / 0755 dirs, uid/gid 0, fixed mtime, padded to a 10240-byte record
like GNU tar, and is piped through `zstd -1 -T0` without being held in memory.

The agave archive has its own content recipe (see AgavePool) and its own stamp fields, so adding
it changed nothing in the other two archives or their stamps.
"""

import argparse
import bisect
import collections
import concurrent.futures
import fcntl
import json
import math
import os
import random
import struct
import subprocess
import sys
import tarfile
import time

GENERATOR_VERSION = 1  # bump when the output of any archive changes
SEED = 0x5EED_F457
MTIME = 1_700_000_000  # 2023-11-14T22:13:20Z
BLOCK = 4096
HALF = BLOCK // 2
POOL_BYTES = 256 << 20  # interleaved pool (half of it random)
TAR_RECORD = 10240  # GNU tar's default blocking factor 20 * 512

SNAPSHOT = {
    "name": "snapshot",
    "accounts_files": 6000,
    "accounts_median": 200_000,
    "accounts_sigma": 1.6,
    "accounts_min": 512,
    "accounts_max": 64 << 20,
    "bank_snapshot_bytes": 5 * 1024 * 1024 + 12_345,
    "status_cache_bytes": 3 * 1024 * 1024 + 4_321,
    "slot": 312_345_678,
    "small_to_large": [4, 1],
}

SMALLFILES = {
    "name": "smallfiles",
    "files": 100_000,
    "median": 6_000,
    "sigma": 1.0,
    "max": 4 << 20,
    "empty_fraction": 0.005,  # a few empty files, as in real source trees
    "leaf_dirs": 320,
    "leaves_per_top": 20,
}


def log(msg):
    print(f"gen-archives: {msg}", file=sys.stderr, flush=True)


class Pool:
    """A 256 MiB buffer of 4 KiB blocks, each half seeded-random, half a repeated pattern."""

    def __init__(self, seed):
        t0 = time.monotonic()
        rnd = random.Random(seed).randbytes(POOL_BYTES // 2)
        tail = 64 << 20  # the pool's first 64 MiB again, so a slice of <= 64 MiB never wraps
        buf = bytearray(POOL_BYTES + tail)
        nblocks = POOL_BYTES // BLOCK
        for b in range(nblocks):
            o = b * BLOCK
            buf[o:o + HALF] = rnd[b * HALF:(b + 1) * HALF]
            # 16-byte pattern that varies per block; a run of it compresses to a few bytes.
            pat = (b.to_bytes(4, "little") * 2 + b"fastuntar")[:16]
            buf[o + HALF:o + BLOCK] = pat * (HALF // 16)
        buf[POOL_BYTES:] = buf[:tail]
        self.buf = buf
        self.view = memoryview(buf)
        self.nblocks = nblocks
        log(f"content pool ready ({len(self.buf) >> 20} MiB, {time.monotonic() - t0:.1f}s)")

    def chunks(self, rng, size):
        """Yields memoryviews totalling `size` bytes, starting at a random aligned offset."""
        off = rng.randrange(self.nblocks) * BLOCK
        limit = len(self.buf)
        while size > 0:
            n = min(size, limit - off)
            yield self.view[off:off + n]
            size -= n
            off = 0


class CountedStream:
    """A tar stream being written by `_emit(b)`: its length and member counts."""

    def __init__(self):
        self.pos = 0
        self.members = 0
        self.files = 0
        self.dirs = 0
        self.file_bytes = 0

    def counts(self, compressed):
        """The stamp's counts, with `compressed` bytes of output as `zst_bytes` (the name
        bench.sh reads)."""
        return {
            "members": self.members,
            "files": self.files,
            "dirs": self.dirs,
            "file_bytes": self.file_bytes,
            "tar_bytes": self.pos,
            "zst_bytes": compressed,
        }

    def _file_data(self, name, size, chunks):
        """A regular file's data (`size` bytes in `chunks`), padded to a whole block."""
        written = 0
        for c in chunks:
            self._emit(c)
            written += len(c)
        assert written == size, (name, written, size)
        if size % 512:
            self._emit(bytes(-size % 512))
        self.files += 1
        self.file_bytes += size


class TarStream(CountedStream):
    """Writes a GNU tar stream into a binary file object and counts bytes."""

    def __init__(self, out):
        super().__init__()
        self.out = out

    def _emit(self, b):
        self.out.write(b)
        self.pos += len(b)

    def _header(self, name, size, kind, mode):
        ti = tarfile.TarInfo(name)
        ti.size = size
        ti.type = kind
        ti.mode = mode
        ti.mtime = MTIME
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = "root"
        self._emit(ti.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape"))
        self.members += 1

    def add_dir(self, name):
        self._header(name, 0, tarfile.DIRTYPE, 0o755)
        self.dirs += 1

    def add_file(self, name, size, chunks):
        self._header(name, size, tarfile.REGTYPE, 0o644)
        self._file_data(name, size, chunks)

    def add_bytes(self, name, data):
        self.add_file(name, len(data), [data])

    def finish(self):
        end = self.pos + 1024
        end += -end % TAR_RECORD
        self._emit(bytes(end - self.pos))


def agave_order(sizes_and_items, small, large):
    """Sort by size ascending, then emit `small` from the small end, `large` from the
    large end, alternately, until the two ends meet (Agave's AccountStoragesOrderer)."""
    items = sorted(sizes_and_items, key=lambda x: (x[0], x[1]))
    lo, hi = 0, len(items) - 1
    out = []
    while lo <= hi:
        for _ in range(small):
            if lo > hi:
                break
            out.append(items[lo])
            lo += 1
        for _ in range(large):
            if lo > hi:
                break
            out.append(items[hi])
            hi -= 1
    return out


def account_storages(scale, p):
    """The account storage files, drawn from the seed: (target size, name) each."""
    rng = random.Random(SEED + 1)
    n = max(1, round(p["accounts_files"] * scale))
    mu = math.log(p["accounts_median"])
    next_id = 1_000
    for _ in range(n):
        size = int(rng.lognormvariate(mu, p["accounts_sigma"]))
        size = min(p["accounts_max"], max(p["accounts_min"], size))
        acc_slot = p["slot"] - rng.randrange(0, 432_000)  # about two epochs of slots
        next_id += rng.randrange(1, 40)
        yield size, f"accounts/{acc_slot}.{next_id}"


def gen_snapshot(tar, pool, scale, p):
    slot = p["slot"]
    entries = list(account_storages(scale, p))
    ordered = agave_order(entries, *p["small_to_large"])

    content_rng = random.Random(SEED + 2)
    # Agave writes `version` first, then the snapshots/ tree, then the account storages.
    tar.add_bytes("version", b"1.2.0\n")
    tar.add_dir("snapshots")
    tar.add_dir(f"snapshots/{slot}")
    size = p["bank_snapshot_bytes"]
    tar.add_file(f"snapshots/{slot}/{slot}", size, pool.chunks(content_rng, size))
    size = p["status_cache_bytes"]
    tar.add_file("snapshots/status_cache", size, pool.chunks(content_rng, size))
    tar.add_dir("accounts")
    for size, name in ordered:
        tar.add_file(name, size, pool.chunks(content_rng, size))


def gen_smallfiles(tar, pool, scale, p):
    rng = random.Random(SEED + 3)
    n = max(1, round(p["files"] * scale))
    leaves = max(4, round(p["leaf_dirs"] * scale))
    per_top = p["leaves_per_top"]
    leaf_names = [f"smallfiles/d{i // per_top:02d}/s{i % per_top:02d}" for i in range(leaves)]
    mu = math.log(p["median"])
    by_leaf = [[] for _ in range(leaves)]
    for i in range(n):
        if rng.random() < p["empty_fraction"]:
            size = 0
        else:
            size = min(p["max"], int(rng.lognormvariate(mu, p["sigma"])))
        by_leaf[rng.randrange(leaves)].append((f"f{i:06d}.dat", size))

    content_rng = random.Random(SEED + 4)
    tar.add_dir("smallfiles")
    seen_tops = set()
    for leaf, files in zip(leaf_names, by_leaf):
        top = leaf.rsplit("/", 1)[0]
        if top not in seen_tops:
            seen_tops.add(top)
            tar.add_dir(top)
        tar.add_dir(leaf)
        for fname, size in files:
            tar.add_file(f"{leaf}/{fname}", size, pool.chunks(content_rng, size))


KINDS = {
    "snapshot": (SNAPSHOT, gen_snapshot),
    "smallfiles": (SMALLFILES, gen_smallfiles),
}


def stamp_path(archive):
    return archive + ".json"


def wanted_params(kind, scale):
    recipe, _ = KINDS[kind]
    return {
        "generator_version": GENERATOR_VERSION,
        "kind": kind,
        "scale": scale,
        "seed": SEED,
        "mtime": MTIME,
        "recipe": recipe,
        "content": "per 4 KiB block: 2 KiB seeded random + 2 KiB repeated 16-byte pattern",
        "compressor": "zstd -1 -T0",
    }


def stamped_stats(archive):
    """The statistics in `archive`'s stamp."""
    with open(stamp_path(archive)) as f:
        return json.load(f)["stats"]


def remove_stamp(archive):
    """Removes `archive`'s stamp (if any) before the archive is regenerated."""
    try:
        os.unlink(stamp_path(archive))
    except FileNotFoundError:
        pass


def up_to_date(archive, params):
    try:
        with open(stamp_path(archive)) as f:
            stamp = json.load(f)
        return stamp.get("params") == params and os.path.getsize(archive) == stamp["stats"]["zst_bytes"]
    except (OSError, ValueError, KeyError):
        return False


def generate(outdir, kind, scale, pool_holder):
    archive = os.path.join(outdir, f"{kind}.tar.zst")
    params = wanted_params(kind, scale)
    if up_to_date(archive, params):
        log(f"{archive}: up to date (scale {scale}), skipping")
        return stamped_stats(archive)
    if pool_holder[0] is None:
        pool_holder[0] = Pool(SEED)
    pool = pool_holder[0]

    tmp = os.path.join(outdir, f".{kind}.tar.zst.tmp")
    remove_stamp(archive)
    log(f"{archive}: generating (scale {scale}) ...")
    t0 = time.monotonic()
    proc = subprocess.Popen(
        ["zstd", "-1", "-T0", "-q", "-f", "-o", tmp],
        stdin=subprocess.PIPE,
        bufsize=0,
    )
    try:
        # A 1 MiB pipe buffer means fewer wake-ups between this process and zstd.
        fcntl.fcntl(proc.stdin.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)
    except (OSError, AttributeError):
        pass
    tar = TarStream(proc.stdin)
    try:
        KINDS[kind][1](tar, pool, scale, KINDS[kind][0])
        tar.finish()
        proc.stdin.close()
    except BrokenPipeError:
        pass
    rc = proc.wait()
    if rc != 0:
        raise SystemExit(f"gen-archives: zstd failed with exit code {rc} for {archive}")
    os.rename(tmp, archive)
    secs = time.monotonic() - t0
    zst = os.path.getsize(archive)
    stats = {**tar.counts(zst), "ratio": round(tar.pos / zst, 4), "gen_seconds": round(secs, 1)}
    with open(stamp_path(archive) + ".tmp", "w") as f:
        json.dump({"params": params, "stats": stats}, f, indent=1, sort_keys=True)
        f.write("\n")
    os.rename(stamp_path(archive) + ".tmp", stamp_path(archive))
    log(f"{archive}: done in {secs:.1f}s ({tar.pos / secs / 1e6:.0f} MB/s of tar)")
    if not 1.7 <= stats["ratio"] <= 2.3:
        log(f"WARNING: {archive}: compression ratio {stats['ratio']:.2f} is outside 1.7-2.3")
    return stats


# ------------------------------------------------------------------------------------- agave
# The real shape of an Agave full snapshot archive, for the parallel-decoding work.  Everything
# here is separate from the two archives above: their recipes, stamps and bytes are unchanged.

AGAVE_VERSION = 1  # bump when the output of the agave archives changes

AGAVE = {
    "name": "agave",
    # File names and sizes are drawn exactly as for `snapshot` (same seed and parameters), then
    # each size is rounded up to a whole number of account records.
    "accounts_files": SNAPSHOT["accounts_files"],
    "accounts_median": SNAPSHOT["accounts_median"],
    "accounts_sigma": SNAPSHOT["accounts_sigma"],
    "accounts_min": SNAPSHOT["accounts_min"],
    "accounts_max": SNAPSHOT["accounts_max"],
    "bank_snapshot_bytes": SNAPSHOT["bank_snapshot_bytes"],
    "status_cache_bytes": SNAPSHOT["status_cache_bytes"],
    "slot": SNAPSHOT["slot"],
    "small_to_large": SNAPSHOT["small_to_large"],
    # The non-account entries come from file metadata (tar::Builder, HeaderMode::Complete):
    # st_mode with its type bits, the validator's uid/gid, the file's mtime, no user names.
    "meta_uid": 1000,
    "meta_gid": 1000,
    # Account record pool: records are drawn until this many bytes, then the first
    # `pool_wrap_bytes` are repeated after the end so a file of up to 64 MiB never wraps.
    "pool_bytes": 128 << 20,
    "pool_wrap_bytes": 65 << 20,
    # Fractions of records by kind (the rest are program-owned accounts).
    "mix_system": 0.30,
    "mix_token": 0.40,
    "token_mints": 64,
    "token_owners": 4096,
    "program_data_min": 64,
    "program_data_max": 640,
    "program_owners": 12,
    "program_shared_keys": 256,
    # Per 32-byte field of program data: probabilities of a random key, a key from the shared
    # set, small integers, zeros (the rest).
    "program_field_random": 0.35,
    "program_field_shared": 0.25,
    "program_field_ints": 0.20,
    "rent_epoch_old_fraction": 0.10,
    "zstd_level": 3,
    "frame_bytes": 32 << 20,  # Agave 4.x: ZSTD_FRAME_SIZE, uncompressed bytes per frame
}

# Program ids as 32-byte keys (base58 decoded): the System program is all zeros.
SYSTEM_PROGRAM = bytes(32)
TOKEN_PROGRAM = bytes.fromhex("06ddf6e1d765a193d9cbe146ceeb79ac1cb485ed5f5b37913a8cf5857eff00a9")
TOKEN_2022_PROGRAM = bytes.fromhex("06ddf6e1ee758fde18425dbce46ccddab61afc4d83b90d27febdf928d8a18bfc")
VOTE_PROGRAM = bytes.fromhex("0761481d357474bb7c4d7624ebd3bdb3d8355e73d11043fc0da3538000000000")
STAKE_PROGRAM = bytes.fromhex("06a1d8179137542a983437bdfe2a7ab2557f535c8a78722b68a49dc000000000")
BPF_UPGRADEABLE = bytes.fromhex("02a8f6914e88a1b0e210153ef763ae2b00c2b93d16c124d2c0537a1004800000")
RENT_EXEMPT_EPOCH = (1 << 64) - 1  # rent_epoch of rent-exempt accounts (RENT_EXEMPT_RENT_EPOCH)
TOKEN_ACCOUNT_LAMPORTS = 2_039_280  # rent-exempt minimum for 165 bytes
# StoredMeta {write_version_obsolete u64, data_len u64, pubkey [32]} + AccountMeta {lamports u64,
# rent_epoch u64, owner [32], executable bool, 7 bytes padding} + hash [32] = 136 bytes.
ACCOUNT_HEADER = struct.Struct("<QQ32sQQ32s?7x32s")
assert ACCOUNT_HEADER.size == 136


class AgavePool:
    """Account records shaped like Agave's AppendVec storage, generated once from the seed.

    Each record: write_version_obsolete 0, data_len, a random pubkey, lamports, rent_epoch
    (u64::MAX for rent-exempt accounts, an old epoch for some), owner, executable, padding, a
    zero hash (current Agave writes both the write version and the hash as zeros), then the
    data padded to 8 bytes.  Kinds: system accounts (no data), SPL token accounts (165 bytes:
    mint and owner from small sets, a small amount, empty delegate/close authority) and
    program-owned accounts (64-640 bytes of 32-byte fields: random keys, keys from a shared
    set, small integers, zeros)."""

    def __init__(self, seed, p):
        t0 = time.monotonic()
        rng = random.Random(seed)
        mints = [rng.randbytes(32) for _ in range(p["token_mints"])]
        wallets = [rng.randbytes(32) for _ in range(p["token_owners"])]
        owners = [TOKEN_2022_PROGRAM, VOTE_PROGRAM, STAKE_PROGRAM, BPF_UPGRADEABLE]
        owners += [rng.randbytes(32) for _ in range(p["program_owners"] - len(owners))]
        shared = [rng.randbytes(32) for _ in range(p["program_shared_keys"])]
        discriminators = [rng.randbytes(8) for _ in range(16)]
        zero_hash = bytes(32)
        f_rand = p["program_field_random"]
        f_shared = f_rand + p["program_field_shared"]
        f_ints = f_shared + p["program_field_ints"]
        m_sys = p["mix_system"]
        m_tok = m_sys + p["mix_token"]
        lo, hi = p["program_data_min"], p["program_data_max"]
        old_epochs = p["rent_epoch_old_fraction"]
        pack = ACCOUNT_HEADER.pack
        buf = bytearray()
        offsets = []
        limit = p["pool_bytes"]
        while len(buf) < limit:
            offsets.append(len(buf))
            kind = rng.random()
            pubkey = rng.randbytes(32)
            rent_epoch = RENT_EXEMPT_EPOCH if rng.random() >= old_epochs else rng.randrange(200, 800)
            executable = False
            if kind < m_sys:
                owner = SYSTEM_PROGRAM
                data = b""
                lamports = int(rng.lognormvariate(math.log(50_000_000), 3.0)) + 890_880
            elif kind < m_tok:
                owner = TOKEN_PROGRAM
                lamports = TOKEN_ACCOUNT_LAMPORTS
                amount = int(rng.lognormvariate(math.log(1_000_000), 2.0))
                # spl_token::state::Account: mint, owner, amount, delegate (COption<Pubkey>),
                # state (1 = initialized), is_native (COption<u64>), delegated_amount,
                # close_authority (COption<Pubkey>): 165 bytes, padded to 168 below.
                data = (rng.choice(mints) + rng.choice(wallets) + amount.to_bytes(8, "little")
                        + bytes(36) + b"\x01" + bytes(12) + bytes(8) + bytes(36))
            else:
                owner = rng.choice(owners)
                n = rng.randrange(lo, hi + 1)
                parts = [rng.choice(discriminators)]
                left = n - 8
                while left > 0:
                    f = rng.random()
                    if f < f_rand:
                        field = rng.randbytes(32)
                    elif f < f_shared:
                        field = rng.choice(shared)
                    elif f < f_ints:
                        field = b"".join(rng.randrange(1 << 20).to_bytes(8, "little") for _ in range(4))
                    else:
                        field = bytes(32)
                    parts.append(field[:left])
                    left -= 32
                data = b"".join(parts)
                lamports = 890_880 + 6_960 * len(data)
                executable = owner == BPF_UPGRADEABLE and rng.random() < 0.1
            buf += pack(0, len(data), pubkey, lamports, rent_epoch, owner, executable, zero_hash)
            buf += data
            buf += bytes(-len(data) % 8)
        self.length = len(buf)  # a whole number of records
        wrap = p["pool_wrap_bytes"]
        buf += buf[:wrap]
        self.offsets = offsets + [o + self.length for o in offsets if o < wrap]
        self.buf = buf
        self.view = memoryview(buf)
        self.records = len(offsets)
        self.wrap = wrap
        log(f"agave record pool ready ({self.records} records, {self.length >> 20} MiB, "
            f"{time.monotonic() - t0:.1f}s)")

    def file_size(self, start, want):
        """Bytes from record index `start` to the first record boundary at or after `want`."""
        o = self.offsets[start]
        j = bisect.bisect_left(self.offsets, o + want)
        end = self.offsets[j] if j < len(self.offsets) else len(self.buf)
        assert end - o <= self.wrap, (want, end - o)
        return end - o

    def slice(self, start, size):
        o = self.offsets[start]
        return self.view[o:o + size]


def octal_field(width, value):
    """The tar crate's octal_into: zero-padded octal, NUL-terminated, `width` bytes."""
    digits = format(value, "o").encode()
    assert len(digits) <= width - 1, (width, value)
    return digits.rjust(width - 1, b"0") + b"\0"


def tar_crate_header(name, size, *, typeflag=b"\0", mode=None, uid=None, gid=None, mtime=0,
                     devices=False):
    """A 512-byte header exactly as tar 0.4's Header::new_gnu() + setters leave it.

    new_gnu() zero-fills the block, writes the GNU magic "ustar " / " \\0" and calls
    set_mtime(0), so an account header (path, size, cksum only) has NUL mode/uid/gid, mtime
    "00000000000\\0", typeflag NUL, empty uname/gname and NUL device fields.  Headers made from
    file metadata (HeaderMode::Complete) add the st_mode (with type bits), uid, gid, mtime, the
    entry type and device numbers 0."""
    h = bytearray(512)
    raw = name.encode()
    assert len(raw) <= 100, name
    h[0:len(raw)] = raw
    if mode is not None:
        h[100:108] = octal_field(8, mode)
    if uid is not None:
        h[108:116] = octal_field(8, uid)
    if gid is not None:
        h[116:124] = octal_field(8, gid)
    h[124:136] = octal_field(12, size)
    h[136:148] = octal_field(12, mtime)
    h[156:157] = typeflag
    h[257:263] = b"ustar "
    h[263:265] = b" \0"
    if devices:
        h[329:337] = octal_field(8, 0)
        h[337:345] = octal_field(8, 0)
    h[148:156] = b" " * 8
    h[148:156] = octal_field(8, sum(h))
    return bytes(h)


class AgaveTar(CountedStream):
    """Writes the tar stream as tar::Builder does: no record padding, two zero blocks at the
    end.  `sink(chunk)` receives every piece of the stream in order."""

    def __init__(self, sink):
        super().__init__()
        self.sink = sink

    def _emit(self, b):
        self.sink(b)
        self.pos += len(b)

    def add_file(self, header, chunks, size):
        self._emit(header)
        self._file_data(None, size, chunks)
        self.members += 1

    def add_meta_file(self, name, chunks, size, p):
        h = tar_crate_header(name, size, typeflag=b"0", mode=0o100644, uid=p["meta_uid"],
                             gid=p["meta_gid"], mtime=MTIME, devices=True)
        self.add_file(h, chunks, size)

    def add_meta_dir(self, name, p):
        h = tar_crate_header(name, 0, typeflag=b"5", mode=0o040755, uid=p["meta_uid"],
                             gid=p["meta_gid"], mtime=MTIME, devices=True)
        self._emit(h)
        self.members += 1
        self.dirs += 1

    def add_account_file(self, name, chunks, size):
        self.add_file(tar_crate_header(name, size), chunks, size)

    def finish(self):
        self._emit(bytes(1024))


def gen_agave(tar, pool, scale, p):
    # Names and target sizes: the same draws as gen_snapshot.
    slot = p["slot"]
    start_rng = random.Random(SEED + 5)
    entries = []
    for want, name in account_storages(scale, p):
        start = start_rng.randrange(pool.records)
        entries.append((pool.file_size(start, want), name, start))
    ordered = agave_order(entries, *p["small_to_large"])

    # Archive order of tar::Builder: append_path_with_name(version), then append_dir_all of the
    # staging snapshots/ directory (its own entry first, named "snapshots/" because the builder
    # joins an empty relative path; the children come off a stack in reverse readdir order,
    # here <slot>/ with its file, then status_cache), then the storages.  No accounts/ entry.
    tar.add_meta_file("version", [b"1.2.0\n"], 6, p)
    tar.add_meta_dir("snapshots/", p)
    tar.add_meta_dir(f"snapshots/{slot}", p)
    for name, want, start in ((f"snapshots/{slot}/{slot}", p["bank_snapshot_bytes"], 11),
                              ("snapshots/status_cache", p["status_cache_bytes"], 222_222)):
        size = pool.file_size(start % pool.records, want)
        tar.add_meta_file(name, [pool.slice(start % pool.records, size)], size, p)
    for size, name, start in ordered:
        tar.add_account_file(name, [pool.slice(start, size)], size)
    tar.finish()


def pipe_to(cmd, path):
    out = open(path, "wb")
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=out, bufsize=0)
    out.close()
    try:
        fcntl.fcntl(proc.stdin.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)
    except (OSError, AttributeError):
        pass
    return proc


def write_all(f, data):
    mv = memoryview(data)
    while len(mv):
        mv = mv[f.write(mv):]


def compress_frame(level, data):
    """One independent frame as Agave's MultiFrameZstdWriter makes it (zstd::bulk, i.e.
    ZSTD_compress2 with the size known): content size in the header, no checksum."""
    r = subprocess.run(
        ["zstd", f"-{level}", "-q", "-c", "--no-check", f"--stream-size={len(data)}"],
        input=data, stdout=subprocess.PIPE, check=True)
    return r.stdout


def zstd_frames(path):
    """Walks the frames of a zstd file (RFC 8878) by their block headers without decoding.
    Returns [(compressed bytes, content size or None, checksum flag, window bytes)]."""
    frames = []
    with open(path, "rb") as f:
        total = os.fstat(f.fileno()).st_size
        pos = 0
        while pos < total:
            f.seek(pos)
            hdr = f.read(18)
            magic = int.from_bytes(hdr[0:4], "little")
            if 0x184D2A50 <= magic <= 0x184D2A5F:  # skippable frame
                pos += 8 + int.from_bytes(hdr[4:8], "little")
                continue
            if magic != 0xFD2FB528:
                raise SystemExit(f"gen-archives: {path}: bad zstd magic at {pos}")
            fhd = hdr[4]
            fcs_flag, single, checksum, did_flag = fhd >> 6, (fhd >> 5) & 1, (fhd >> 2) & 1, fhd & 3
            o = 5
            window = None
            if not single:
                wd = hdr[o]
                exp, mant = wd >> 3, wd & 7
                base = 1 << (10 + exp)
                window = base + (base // 8) * mant
                o += 1
            o += (0, 1, 2, 4)[did_flag]
            fcs_len = (1 if single else 0, 2, 4, 8)[fcs_flag]
            fcs = None
            if fcs_len:
                fcs = int.from_bytes(hdr[o:o + fcs_len], "little") + (256 if fcs_len == 2 else 0)
            if single:
                window = fcs
            o += fcs_len
            p = pos + o
            while True:
                f.seek(p)
                b = int.from_bytes(f.read(3), "little")
                last, btype, bsize = b & 1, (b >> 1) & 3, b >> 3
                p += 3 + (1 if btype == 1 else bsize)
                if last:
                    break
            p += 4 * checksum
            frames.append((p - pos, fcs, bool(checksum), window))
            pos = p
    return frames


AGAVE_OUTPUTS = ("agave.tar.zst", "agave-1frame.tar.zst", "agave.tar.lz4")


def agave_params(scale):
    return {
        "agave_version": AGAVE_VERSION,
        "kind": "agave",
        "scale": scale,
        "seed": SEED,
        "mtime": MTIME,
        "recipe": AGAVE,
        "content": "AppendVec-shaped account records (AgavePool)",
        "compressors": {
            "agave.tar.zst": "independent frames of 32 MiB of tar: zstd -3 --no-check --stream-size=N",
            "agave-1frame.tar.zst": "zstd -3 -T0 --no-check (one frame)",
            "agave.tar.lz4": "lz4 -1 -B4 -BD (64 KiB linked blocks, content checksum)",
        },
    }


def generate_agave(outdir, scale):
    params = agave_params(scale)
    paths = [os.path.join(outdir, name) for name in AGAVE_OUTPUTS]
    if all(up_to_date(a, params) for a in paths):
        log(f"{outdir}/agave.*: up to date (scale {scale}), skipping")
        return [stamped_stats(a) for a in paths]
    for a in paths:
        remove_stamp(a)
    log(f"{outdir}/agave.*: generating (scale {scale}) ...")
    t0 = time.monotonic()
    pool = AgavePool(SEED + 6, AGAVE)
    tmps = {name: os.path.join(outdir, f".{name}.tmp") for name in AGAVE_OUTPUTS}
    one = pipe_to(["zstd", f"-{AGAVE['zstd_level']}", "-T0", "--no-check", "-q", "-c"],
                  tmps["agave-1frame.tar.zst"])
    lz4 = pipe_to(["lz4", "-q", "-1", "-B4", "-BD", "-c"], tmps["agave.tar.lz4"])
    multi = open(tmps["agave.tar.zst"], "wb")
    workers = max(1, os.cpu_count() or 1)
    pending = collections.deque()
    frame = bytearray()
    frame_bytes = AGAVE["frame_bytes"]
    frames = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as ex:

        def submit():
            nonlocal frame, frames
            pending.append(ex.submit(compress_frame, AGAVE["zstd_level"], bytes(frame)))
            frames += 1
            frame = bytearray()
            while len(pending) > workers + 1:
                multi.write(pending.popleft().result())

        def sink(chunk):
            write_all(one.stdin, chunk)
            write_all(lz4.stdin, chunk)
            mv = memoryview(chunk)
            while len(mv):
                take = min(len(mv), frame_bytes - len(frame))
                frame.extend(mv[:take])
                mv = mv[take:]
                if len(frame) == frame_bytes:
                    submit()

        tar = AgaveTar(sink)
        gen_agave(tar, pool, scale, AGAVE)
        if frame:
            submit()
        while pending:
            multi.write(pending.popleft().result())
    multi.close()
    for proc, what in ((one, "zstd -T0"), (lz4, "lz4")):
        proc.stdin.close()
        rc = proc.wait()
        if rc != 0:
            raise SystemExit(f"gen-archives: {what} failed with exit code {rc}")
    secs = time.monotonic() - t0
    walked = {name: zstd_frames(tmps[name]) for name in ("agave.tar.zst", "agave-1frame.tar.zst")}
    assert len(walked["agave.tar.zst"]) == frames, (len(walked["agave.tar.zst"]), frames)
    assert len(walked["agave-1frame.tar.zst"]) == 1, len(walked["agave-1frame.tar.zst"])
    assert sum(w[1] for w in walked["agave.tar.zst"]) == tar.pos
    all_stats = []
    for name, a in zip(AGAVE_OUTPUTS, paths):
        os.rename(tmps[name], a)
        size = os.path.getsize(a)
        stats = {
            **tar.counts(size),  # zst_bytes: for the .lz4 file it is lz4 bytes
            "compressed_bytes": size,
            "ratio": round(tar.pos / size, 4),
            "gen_seconds": round(secs, 1),
            "pool_records": pool.records,
        }
        if name in walked:
            fr = walked[name]
            stats["zstd_frames"] = len(fr)
            stats["frame_content_size"] = sorted({"yes" if w[1] is not None else "no" for w in fr})
            stats["frame_checksum"] = sorted({"yes" if w[2] else "no" for w in fr})
            stats["frame_window_bytes"] = sorted({w[3] for w in fr if w[3] is not None})
            stats["frame_compressed_bytes_min_max"] = [min(w[0] for w in fr), max(w[0] for w in fr)]
        with open(stamp_path(a) + ".tmp", "w") as f:
            json.dump({"params": params, "stats": stats}, f, indent=1, sort_keys=True)
            f.write("\n")
        os.rename(stamp_path(a) + ".tmp", stamp_path(a))
        all_stats.append(stats)
    log(f"{outdir}/agave.*: done in {secs:.1f}s ({tar.pos / secs / 1e6:.0f} MB/s of tar, "
        f"{frames} frames)")
    r = all_stats[0]["ratio"]
    if not 2.7 <= r <= 3.3:
        log(f"WARNING: agave.tar.zst: compression ratio {r:.2f} is outside 2.7-3.3")
    return all_stats


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply file counts (default 1)")
    ap.add_argument("--only", metavar="KIND[,KIND...]",
                    help="generate only these archives (snapshot, smallfiles, agave)")
    ap.add_argument("--force", action="store_true", help="regenerate even if up to date")
    args = ap.parse_args()
    if args.scale <= 0:
        ap.error("--scale must be > 0")
    all_kinds = ["snapshot", "smallfiles", "agave"]
    kinds = args.only.split(",") if args.only else all_kinds
    for k in kinds:
        if k not in all_kinds:
            ap.error(f"--only: unknown archive {k!r} (choose from {', '.join(all_kinds)})")
    os.makedirs(args.outdir, exist_ok=True)
    if args.force:
        for k in kinds:
            names = AGAVE_OUTPUTS if k == "agave" else [f"{k}.tar.zst"]
            for name in names:
                try:
                    os.unlink(stamp_path(os.path.join(args.outdir, name)))
                except FileNotFoundError:
                    pass
    pool_holder = [None]
    for kind in kinds:
        if kind == "agave":
            for name, s in zip(AGAVE_OUTPUTS, generate_agave(args.outdir, args.scale)):
                extra = f", {s['zstd_frames']} zstd frame(s)" if "zstd_frames" in s else ""
                print(
                    f"{name}: {s['files']} files, {s['dirs']} dirs, "
                    f"{s['file_bytes'] / 1e6:.1f} MB of file data, tar {s['tar_bytes'] / 1e6:.1f} MB, "
                    f"compressed {s['compressed_bytes'] / 1e6:.1f} MB, ratio {s['ratio']:.2f}{extra}, "
                    f"generated in {s['gen_seconds']}s",
                    flush=True,
                )
            continue
        s = generate(args.outdir, kind, args.scale, pool_holder)
        print(
            f"{kind}.tar.zst: {s['files']} files, {s['dirs']} dirs, "
            f"{s['file_bytes'] / 1e6:.1f} MB of file data, tar {s['tar_bytes'] / 1e6:.1f} MB, "
            f"zst {s['zst_bytes'] / 1e6:.1f} MB, ratio {s['ratio']:.2f} (zstd -1), "
            f"generated in {s['gen_seconds']}s",
            flush=True,
        )


if __name__ == "__main__":
    main()
