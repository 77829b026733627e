#!/usr/bin/env python3
"""Random archives, extracted two ways, compared.

    scripts/random-differential.py [--mode writers|gnu] [--seeds A:B] [--bin PATH]
                                   [--workdir DIR] [--args "EXTRA ARGS"]

Each seed makes a small tar with Python's tarfile (GNU, PAX or ustar; long and non-ASCII
names, the same few paths again and again as files, directories, symlinks, hard links and
FIFOs, between runs of ordinary files so that several writer threads are busy). Then:

- `--mode writers` (default): fastuntar with `--writer-threads 1 --io portable` against 2, 3
  and 4 writers under both backends: trees, exit codes and messages must be the same. This is
  how the ordering bugs F13-F15 of docs/TESTING.md were found.
- `--mode gnu`: GNU tar against fastuntar: trees and exit status (zero or not). Expect the
  documented differences (docs/DIFFERENCES.md): fastuntar never writes
  through a symlink, and GNU tar 1.34 lets a delayed symlink win over a later member when the
  kernel reuses its placeholder's inode number.

Run it as root, and as a user (`setpriv --reuid 65534 ...`, with a --workdir that user may
write) for permissions. An archive that differs is kept in --workdir as sNNN.tar; the script
exits 1 when any did. Not a timed test: a tool for the next engineer.
"""
import argparse
import hashlib
import io
import os
import random
import shutil
import stat
import subprocess
import sys
import tarfile

HOT = ["h", "h/a", "h/b", "h/a/c", "k", "k/d", "h/a/c/e", "k/d/x", "bulk1", "h/a/bulk0_f1"]


def archive(seed, path):
    r = random.Random(seed)
    fmt = r.choice([tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT])
    names = []
    with tarfile.open(path, "w", format=fmt) as t:
        for i in range(r.randint(20, 300)):
            if r.random() < 0.45:
                name = f"bulk{r.randint(0, 3)}/f{r.randint(0, 300)}"
                if r.random() < 0.3:
                    name = r.choice(HOT) + "/" + name.replace("/", "_")
                if r.random() < 0.1:
                    name = name.replace("f", "é" + "L" * r.randint(0, 120), 1)
                kind, mode = tarfile.REGTYPE, 0o644
            else:
                name = r.choice(HOT)
                kind = r.choices(
                    [tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE,
                     tarfile.FIFOTYPE],
                    [30, 30, 15, 15, 5],
                )[0]
                mode = r.choice([0o755, 0o644, 0o555, 0o700])
            ti = tarfile.TarInfo(name)
            ti.type, ti.mode = kind, mode
            ti.mtime = 1_500_000_000 + i
            data = b""
            if kind == tarfile.REGTYPE:
                data = bytes([i % 251]) * r.choice([0, 10, 3000, 70000])
            elif kind == tarfile.SYMTYPE:
                ti.linkname = r.choice(["t", "bulk0", "h/a", "../a", "/etc/passwd"])
            elif kind == tarfile.LNKTYPE:
                if not names:
                    continue
                ti.linkname = r.choice(names)
            ti.size = len(data)
            try:
                t.addfile(ti, io.BytesIO(data) if data else None)
            except ValueError:  # a name ustar cannot hold
                continue
            names.append(name)


def tree(root):
    out = []
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            rel = os.path.relpath(p, root)
            try:
                st = os.lstat(p)
            except PermissionError:
                out.append((rel, "EACCES"))
                continue
            if stat.S_ISLNK(st.st_mode):
                out.append((rel, "l", os.readlink(p)))
            elif stat.S_ISDIR(st.st_mode):
                t = st.st_mtime_ns if st.st_mtime < 1_700_000_000 else "now"
                out.append((rel, "d", oct(st.st_mode & 0o7777), t))
            elif stat.S_ISFIFO(st.st_mode):
                out.append((rel, "p", oct(st.st_mode & 0o7777), st.st_mtime_ns))
            else:
                h = ""
                if os.access(p, os.R_OK):
                    with open(p, "rb") as f:
                        h = hashlib.md5(f.read()).hexdigest()
                out.append((rel, "f", oct(st.st_mode & 0o7777), st.st_mtime_ns, st.st_nlink, h))
    return sorted(out, key=str)


def extract(cmd, dest):
    if os.path.exists(dest):
        subprocess.run(["chmod", "-R", "u+rwx", dest], capture_output=True)
        shutil.rmtree(dest)
    os.mkdir(dest)
    p = subprocess.run(cmd + ["-C", dest], capture_output=True, timeout=120)
    said = sorted(
        l for l in p.stderr.decode(errors="replace").splitlines()
        if "time stamp" not in l and " members, " not in l
    )
    return p.returncode, said, tree(dest)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["writers", "gnu"], default="writers")
    ap.add_argument("--seeds", default="0:100")
    ap.add_argument("--bin", default="target/release/fastuntar")
    ap.add_argument("--workdir", default="/tmp/random-differential")
    ap.add_argument("--args", default="", help="extra fastuntar (and GNU tar) arguments")
    a = ap.parse_args()
    first, last = (int(x) for x in a.seeds.split(":"))
    fu = os.path.abspath(a.bin)
    extra = a.args.split()
    os.makedirs(a.workdir, exist_ok=True)
    bad = 0
    for seed in range(first, last):
        ar = os.path.join(a.workdir, f"s{seed}.tar")
        archive(seed, ar)
        one = extract([fu, "-q", "--writer-threads", "1", "--io", "portable", "-xf", ar] + extra,
                      os.path.join(a.workdir, "one"))
        if a.mode == "gnu":
            others = {"GNU tar": [["tar", "-xf", ar] + extra]}
        else:
            others = {f"{n} writers, {io_}": [[fu, "-q", "--writer-threads", n, "--io", io_,
                                                "-xf", ar] + extra]
                      for n in ("2", "3", "4") for io_ in ("portable", "uring")}
        differs = False
        for label, (cmd,) in others.items():
            code, said, t = extract(cmd, os.path.join(a.workdir, "other"))
            if a.mode == "gnu":
                same = t == one[2] and (code == 0) == (one[0] == 0)
            else:
                same = (code, said, t) == one
            if not same:
                differs = True
                print(f"seed {seed}: one writer and {label} differ (exit {one[0]} vs {code})")
                for x in sorted(set(map(str, one[2])) ^ set(map(str, t)))[:6]:
                    print("   ", x)
                if a.mode == "writers":
                    for x in sorted(set(one[1]) ^ set(said))[:4]:
                        print("   ", x)
                break
        if differs:
            bad += 1
        else:
            os.unlink(ar)
    print(f"{bad} of {last - first} archives differ")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
