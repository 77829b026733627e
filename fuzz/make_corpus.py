#!/usr/bin/env python3
"""Fills fuzz/corpus/<target>/ with seeds (the corpus directories are not committed).

Seeds: the peer archives in ../shared/corpus/peer and fixtures/ (when present), the hand-made archives
below (hostile paths and links, every sparse format, every compression), and for pax_sparse
the same archives in its input encoding plus PAX record lists. Usage:

    python3 fuzz/make_corpus.py            # from the repository root
"""
import gzip
import pathlib
import shutil
import subprocess

FUZZ = pathlib.Path(__file__).resolve().parent
PEER = FUZZ.parent.parent / "shared" / "corpus" / "peer"
FIXTURES = FUZZ.parent / "fixtures"
MAX = {"archive_reader": 64 << 10, "pax_sparse": 64 << 10, "extract": 256 << 10}


def block(name, flag, size, link=b"", mode=0o644):
    b = bytearray(512)
    b[0:len(name)] = name[:100]
    b[100:108] = b"%07o\0" % mode
    b[108:116] = b"0001750\0"
    b[116:124] = b"0001751\0"
    b[124:136] = b"%011o\0" % size
    b[136:148] = b"14000000000\0"
    b[156] = flag
    b[157:157 + len(link)] = link[:100]
    b[257:265] = b"ustar\x0000"
    b[148:156] = b" " * 8
    b[148:156] = b"%06o\0 " % sum(b)
    return bytes(b)


def padded(d):
    return d + b"\0" * (-len(d) % 512)


def member(name, flag=ord("0"), data=b"", link=b"", mode=0o644):
    return block(name, flag, len(data), link, mode) + padded(data)


def record(line):
    body = 1 + len(line) + 1
    n = body + 1
    while len(str(n)) + body != n:
        n += 1
    return b"%d " % n + line + b"\n"


def pax(lines, flag=ord("x")):
    return member(b"PaxHeader/x", flag, b"".join(record(l) for l in lines))


END = b"\0" * 1024


def hand_made():
    s = {}
    s["escape_symlink_parent.tar"] = (member(b"x", ord("2"), link=b"..")
                                      + member(b"x/evil", data=b"evil\n") + END)
    s["escape_symlink_abs.tar"] = (member(b"d", ord("2"), link=b"/tmp")
                                   + member(b"d/evil", data=b"evil\n") + END)
    s["escape_dotdot_abs.tar"] = (member(b"../evil", data=b"x") + member(b"/abs/evil", data=b"y")
                                  + member(b"a/../../evil", data=b"z") + END)
    s["escape_hardlink.tar"] = (member(b"h1", ord("1"), link=b"../sentinel")
                                + member(b"h2", ord("1"), link=b"pre_dir_link/f")
                                + member(b"h3", ord("1"), link=b"pre_file_link")
                                + member(b"h3", data=b"through a link?\n") + END)
    s["write_through_existing.tar"] = (member(b"pre_file_link", data=b"replace the link\n")
                                       + member(b"hl", data=b"replace the hard link\n")
                                       + member(b"pre_dir_link/f", data=b"through\n")
                                       + member(b"pre_dir_link/", ord("5"), mode=0o777) + END)
    s["dir_then_symlink.tar"] = (member(b"d/", ord("5"), mode=0o755) + member(b"d/f", data=b"1")
                                 + member(b"d", ord("2"), link=b"../outside")
                                 + member(b"d/g", data=b"2") + END)
    s["setuid_fifo_dev.tar"] = (member(b"suid", data=b"#!/bin/sh\n", mode=0o4755)
                                + member(b"fifo", ord("6")) + member(b"chr", ord("3"))
                                + member(b"./", ord("5"), mode=0o700) + END)
    s["pax_path_linkpath.tar"] = (pax([b"path=" + b"long/" * 40 + b"name",
                                       b"linkpath=../../etc/passwd", b"mtime=1.5",
                                       b"uid=0", b"size=5"])
                                  + member(b"short", data=b"hello") + END)
    s["pax_global.tar"] = (pax([b"path=g/global", b"mtime=100"], ord("g"))
                           + member(b"a", data=b"a") + pax([b"path="]) + member(b"b", data=b"b")
                           + END)
    s["gnu_longname.tar"] = (member(b"././@LongLink", ord("L"), b"L/" * 80 + b"file\0")
                             + member(b"short", data=b"long") + END)
    # PAX sparse 0.0 / 0.1 / 1.0 and old GNU 'S', built by hand (tiny).
    s["sparse_pax00.tar"] = (pax([b"GNU.sparse.size=3000", b"GNU.sparse.numblocks=2",
                                  b"GNU.sparse.offset=0", b"GNU.sparse.numbytes=3",
                                  b"GNU.sparse.offset=2000", b"GNU.sparse.numbytes=4"])
                             + member(b"s00", data=b"abcdefg") + END)
    s["sparse_pax01.tar"] = (pax([b"GNU.sparse.size=3000", b"GNU.sparse.numblocks=2",
                                  b"GNU.sparse.map=0,3,2000,4"])
                             + member(b"s01", data=b"abcdefg") + END)
    s["sparse_pax10.tar"] = (pax([b"GNU.sparse.major=1", b"GNU.sparse.minor=0",
                                  b"GNU.sparse.name=s10", b"GNU.sparse.realsize=3000"])
                             + member(b"GNUSparseFile.0/s10", data=padded(b"2\n0\n3\n2000\n4\n")
                                      + b"abcdefg") + END)
    h = bytearray(block(b"old", ord("S"), 7))
    h[386:398] = b"%011o\0" % 0
    h[398:410] = b"%011o\0" % 3
    h[410:422] = b"%011o\0" % 2000
    h[422:434] = b"%011o\0" % 4
    h[483:495] = b"%011o\0" % 3000
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    s["sparse_oldgnu.tar"] = bytes(h) + padded(b"abcdefg") + END
    # Issue 41's shapes (Go's and CPython's test archives): numbers with leading zeros,
    # malformed records (read on after, as GNU tar), a NUL in a path and in a keyword, a `g`
    # header that replaces the set, and members the input ends in.
    zeros = b"0" * 30
    zero_len = b" path=zero-length\n"
    s["pax_leading_zeros.tar"] = (pax([b"size=" + b"0" * 23 + b"5", b"uid=" + zeros + b"123",
                                       b"gid=" + zeros + b"7", b"mtime=" + zeros + b"15.5"])
                                  + block(b"size5", ord("0"), 0) + padded(b"hello")
                                  + member(b"PaxHeader/x", ord("x"),
                                           b"%040d" % (40 + len(zero_len)) + zero_len)
                                  + member(b"ignored", data=b"z") + END)
    s["pax_malformed.tar"] = (member(b"PaxHeader/x", ord("x"), b"11 path=bad\0")
                              + member(b"a", data=b"a")
                              + member(b"PaxHeader/x", ord("x"),
                                       record(b"mtime=15") + b"11 path=bad\0" + record(b"uid=5"))
                              + member(b"b", data=b"b")
                              + member(b"PaxHeader/x", ord("x"), b"12 pa\0th=xy\n")
                              + member(b"c", data=b"c")
                              + pax([b"size=x", b"uid=4294967296", b"mtime=x", b"gid=-1"])
                              + member(b"d", data=b"d")
                              + member(b"PaxHeader/g", ord("g"), record(b"uid=3") + b"99")
                              + member(b"e", data=b"e") + END)
    s["pax_nul_path.tar"] = (pax([b"path=good\0../../evil"]) + member(b"p1", data=b"p")
                             + pax([b"linkpath=tgt\0junk"]) + member(b"sym", ord("2"), link=b"x")
                             + pax([b"GNU.sparse.name=s\0n"]) + member(b"p2", data=b"q")
                             + member(b"after", data=b"after") + END)
    s["pax_global_reset.tar"] = (pax([b"mtime=1500000000", b"uid=77"], ord("g"))
                                 + member(b"a", data=b"a") + pax([b"comment=reset"], ord("g"))
                                 + member(b"b", data=b"b")
                                 + pax([b"GNU.volume.label=v", b"gid=5"], ord("g"))
                                 + member(b"c", data=b"c") + END)
    for size, present in ((4096, 512), (65536, 40000), (200000, 150001)):
        s["truncated_%d_%d.tar" % (size, present)] = (
            member(b"first", data=b"complete") + block(b"big", ord("0"), size)
            + bytes(range(256)) * (present // 256) + bytes(present % 256))
    plain = member(b"dir/", ord("5"), mode=0o755) + member(b"dir/file", data=b"x" * 3000) + END
    s["plain.tar"] = plain
    s["plain.tar.gz"] = gzip.compress(plain)
    for tool, ext in (("zstd", "zst"), ("bzip2", "bz2"), ("lz4", "lz4")):
        if shutil.which(tool):
            out = subprocess.run([tool, "-c"], input=plain, capture_output=True).stdout
            s["plain.tar." + ext] = out
    return s


def add(target, name, data):
    if len(data) > MAX[target]:
        return
    d = FUZZ / "corpus" / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def main():
    seeds = hand_made()
    for prefix, d in (("peer_", PEER), ("fixture_", FIXTURES)):
        if d.is_dir():
            for p in sorted(d.iterdir()):
                if p.is_file() and p.suffix not in (".md", ".sha256"):
                    seeds[prefix + p.name] = p.read_bytes()
    for name, data in seeds.items():
        add("archive_reader", name, data)
        add("extract", name, data)
        if not name.endswith((".gz", ".zst", ".bz2", ".lz4")) and len(data) >= 512:
            # pax_sparse mode 4: the first 512 bytes are a header (checksum fixed), then the rest.
            add("pax_sparse", name, b"\x04\x00\x02" + data)
    # pax_sparse mode 1: record lines, then the file data (here a 1.0 map and its data).
    lines = (b"GNU.sparse.major=1\nGNU.sparse.minor=0\nGNU.sparse.name=s\n"
             b"GNU.sparse.realsize=3000\n")
    data = padded(b"2\n0\n3\n2000\n4\n") + b"abcdefg"
    add("pax_sparse", "mode1_sparse10", b"\x01" + len(lines).to_bytes(2, "little") + lines + data)
    lines = b"GNU.sparse.size=3000\nGNU.sparse.numblocks=2\nGNU.sparse.map=0,3,2000,4\n"
    add("pax_sparse", "mode1_sparse01", b"\x01" + len(lines).to_bytes(2, "little") + lines
        + b"abcdefg")
    lines = (b"GNU.sparse.size=3000\nGNU.sparse.numblocks=2\nGNU.sparse.offset=0\n"
             b"GNU.sparse.numbytes=3\nGNU.sparse.offset=2000\nGNU.sparse.numbytes=4\n")
    add("pax_sparse", "mode1_sparse00", b"\x01" + len(lines).to_bytes(2, "little") + lines
        + b"abcdefg")
    lines = b"path=g/p\nmtime=5.25\nsize=3\nuid=7\nlinkpath=t\n"
    add("pax_sparse", "mode2_global", b"\x02" + len(lines).to_bytes(2, "little") + lines + b"abc")
    a = bytearray(512 - 345 + 12)
    for i, v in enumerate((0, 3, 2000, 4)):
        a[386 - 345 + 12 * i:386 - 345 + 12 * i + 12] = b"%011o\0" % v
    a[483 - 345:495 - 345] = b"%011o\0" % 3000
    a[512 - 345:] = b"%011o\0" % 7
    add("pax_sparse", "mode3_oldgnu", b"\x03" + len(a).to_bytes(2, "little") + bytes(a)
        + b"abcdefg")
    add("pax_sparse", "mode6_longname", b"\x06\x08\x00" + b"a/b/c/d\0" + b"\x00data")
    for t in MAX:
        n = len(list((FUZZ / "corpus" / t).iterdir()))
        print(f"corpus/{t}: {n} files")


if __name__ == "__main__":
    main()
