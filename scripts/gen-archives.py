#!/usr/bin/env python3
"""Generate the deterministic benchmark archives for fastuntar.

Usage: python3 scripts/gen-archives.py OUTDIR [--scale F] [--only snapshot|smallfiles] [--force]

Writes (python3 standard library + the `zstd` CLI only):

  OUTDIR/snapshot.tar.zst    shaped like a Solana/Agave full ledger snapshot: `version`,
                             `snapshots/<slot>/<slot>`, `snapshots/status_cache`, directory
                             entries `snapshots/`, `snapshots/<slot>/`, `accounts/`, and ~6,000
                             `accounts/<slot>.<id>` files of log-normal size (median ~200 KB,
                             tail capped at 64 MiB), ~4 GB of tar, ordered the way Agave's
                             archiver orders them (sorted by size, then 4 small + 1 large, ...).
  OUTDIR/smallfiles.tar.zst  ~100,000 files of log-normal size (median ~6 KB) in ~340
                             directories, grouped per directory like `tar -c` of a tree.

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
"""

import argparse
import fcntl
import json
import math
import os
import random
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


class TarStream:
    """Writes a GNU tar stream into a binary file object and counts bytes."""

    def __init__(self, out):
        self.out = out
        self.pos = 0
        self.members = 0
        self.files = 0
        self.dirs = 0
        self.file_bytes = 0

    def _header(self, name, size, kind, mode):
        ti = tarfile.TarInfo(name)
        ti.size = size
        ti.type = kind
        ti.mode = mode
        ti.mtime = MTIME
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = "root"
        buf = ti.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")
        self.out.write(buf)
        self.pos += len(buf)
        self.members += 1

    def add_dir(self, name):
        self._header(name, 0, tarfile.DIRTYPE, 0o755)
        self.dirs += 1

    def add_file(self, name, size, chunks):
        self._header(name, size, tarfile.REGTYPE, 0o644)
        written = 0
        for c in chunks:
            self.out.write(c)
            written += len(c)
        assert written == size, (name, written, size)
        pad = -size % 512
        if pad:
            self.out.write(bytes(pad))
        self.pos += size + pad
        self.files += 1
        self.file_bytes += size

    def add_bytes(self, name, data):
        self.add_file(name, len(data), [data])

    def finish(self):
        end = self.pos + 1024
        end += -end % TAR_RECORD
        self.out.write(bytes(end - self.pos))
        self.pos = end


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


def gen_snapshot(tar, pool, scale, p):
    rng = random.Random(SEED + 1)
    slot = p["slot"]
    n = max(1, round(p["accounts_files"] * scale))
    mu = math.log(p["accounts_median"])
    entries = []
    next_id = 1_000
    for _ in range(n):
        size = int(rng.lognormvariate(mu, p["accounts_sigma"]))
        size = min(p["accounts_max"], max(p["accounts_min"], size))
        acc_slot = slot - rng.randrange(0, 432_000)  # about two epochs of slots
        next_id += rng.randrange(1, 40)
        entries.append((size, f"accounts/{acc_slot}.{next_id}"))
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
        with open(stamp_path(archive)) as f:
            stats = json.load(f)["stats"]
        log(f"{archive}: up to date (scale {scale}), skipping")
        return stats
    if pool_holder[0] is None:
        pool_holder[0] = Pool(SEED)
    pool = pool_holder[0]

    tmp = os.path.join(outdir, f".{kind}.tar.zst.tmp")
    try:
        os.unlink(stamp_path(archive))
    except FileNotFoundError:
        pass
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
    stats = {
        "members": tar.members,
        "files": tar.files,
        "dirs": tar.dirs,
        "file_bytes": tar.file_bytes,
        "tar_bytes": tar.pos,
        "zst_bytes": zst,
        "ratio": round(tar.pos / zst, 4),
        "gen_seconds": round(secs, 1),
    }
    with open(stamp_path(archive) + ".tmp", "w") as f:
        json.dump({"params": params, "stats": stats}, f, indent=1, sort_keys=True)
        f.write("\n")
    os.rename(stamp_path(archive) + ".tmp", stamp_path(archive))
    log(f"{archive}: done in {secs:.1f}s ({tar.pos / secs / 1e6:.0f} MB/s of tar)")
    if not 1.7 <= stats["ratio"] <= 2.3:
        log(f"WARNING: {archive}: compression ratio {stats['ratio']:.2f} is outside 1.7-2.3")
    return stats


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply file counts (default 1)")
    ap.add_argument("--only", choices=sorted(KINDS), help="generate only this archive")
    ap.add_argument("--force", action="store_true", help="regenerate even if up to date")
    args = ap.parse_args()
    if args.scale <= 0:
        ap.error("--scale must be > 0")
    os.makedirs(args.outdir, exist_ok=True)
    kinds = [args.only] if args.only else ["snapshot", "smallfiles"]
    if args.force:
        for k in kinds:
            try:
                os.unlink(stamp_path(os.path.join(args.outdir, f"{k}.tar.zst")))
            except FileNotFoundError:
                pass
    pool_holder = [None]
    for kind in kinds:
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
