#!/usr/bin/env python3
"""Random GNU incremental backups restored by GNU tar and by fastuntar (`-G`), compared.

    scripts/incremental-differential.py [--seeds A:B] [--bin PATH] [--workdir DIR]

Each seed grows a random tree (files, directories, symlinks), dumps it with GNU tar
`-g SNAPSHOT` three times (level 0, 1, 2; `--format=gnu` or `posix`), changing it at random
between the dumps: files made, appended to and removed, directories made, removed with their
contents and renamed, sibling directories swapped (GNU tar then lists an 'X' temporary
directory and 'R'/'T' renames). Then the levels are restored in order with `-xvG` by GNU tar
and by fastuntar under four writer settings (one writer of each backend, several writers of
each): after the last level the trees (types, contents, link targets, modes, file mtimes)
must be the same, and after every level the exit code and the `-v` output ("Deleting" lines
included, program names set aside).

GNU tar runs in DIR rather than with -C: it makes the 'X' temporary directory relative to its
working directory, not to -C's (its bug; fastuntar's is made inside DIR). Run as root, and as
a user (`setpriv --reuid 65534 ...`, with a --workdir that user may write). A differing seed
is printed; the script exits 1 when any did. Not a timed test: a tool for the next engineer.
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import time

ROWS = [
    ["--writer-threads", "1", "--io", "portable"],
    ["--writer-threads", "1", "--io", "uring"],
    ["--writer-threads", "3", "--io", "portable"],
    ["--writer-threads", "2", "--io", "uring"],
]


def snapshot(root):
    out = {}
    for dp, dns, fns in os.walk(root):
        for n in dns + fns:
            p = os.path.join(dp, n)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            kind = "l" if os.path.islink(p) else "d" if os.path.isdir(p) else "f"
            data = None
            if kind == "l":
                data = os.readlink(p)
            elif kind == "f":
                with open(p, "rb") as f:
                    data = f.read()
            mtime = int(st.st_mtime) if kind != "d" else None
            out[rel] = (kind, data, st.st_mode & 0o7777, mtime)
    return out


def entries(root):
    found = []
    for dp, dns, fns in os.walk(root):
        found += [os.path.join(dp, x) for x in dns + fns]
    return found


def is_dir(p):
    return os.path.isdir(p) and not os.path.islink(p)


def change(r, root, n):
    """n random changes to the tree at root (failed ones are skipped)."""
    for _ in range(n):
        found = entries(root)
        dirs = [root] + [p for p in found if is_dir(p)]
        name = os.path.join(r.choice(dirs), r.choice("abcdefgh") + str(r.randrange(5)))
        op = r.randrange(8)
        try:
            if op <= 1 and not os.path.lexists(name):
                with open(name, "w") as f:
                    f.write(str(r.random()))
            elif op == 2 and not os.path.lexists(name):
                os.makedirs(name)
            elif op == 3 and found:
                p = r.choice(found)
                shutil.rmtree(p) if is_dir(p) else os.unlink(p)
            elif op == 4 and found:
                p = r.choice(found)
                if is_dir(p) and not os.path.lexists(name) and not name.startswith(p + "/"):
                    os.rename(p, name)
            elif op == 5 and not os.path.lexists(name):
                os.symlink(r.choice(["a0", "../x", "/etc"]), name)
            elif op == 6 and found:
                p = r.choice(found)
                if os.path.isfile(p) and not os.path.islink(p):
                    with open(p, "a") as f:
                        f.write("more")
            elif op == 7:
                subs = [p for p in found if is_dir(p)]
                if len(subs) >= 2:
                    a, b = r.sample(subs, 2)
                    if os.path.dirname(a) == os.path.dirname(b):
                        t = a + ".swap"
                        os.rename(a, t)
                        os.rename(b, a)
                        os.rename(t, b)
        except OSError:
            pass


def run_seed(seed, fastuntar, work):
    r = random.Random(seed)
    shutil.rmtree(work, ignore_errors=True)
    src = os.path.join(work, "t", "src")
    os.makedirs(src)
    change(r, src, 40)
    fmt = r.choice(["gnu", "posix"])
    levels = []
    for level in range(3):
        a = os.path.join(work, f"l{level}.tar")
        subprocess.run(
            ["tar", "-C", os.path.join(work, "t"), f"--format={fmt}", "-g",
             os.path.join(work, "snap"), "-cf", a, "src"],
            check=True, stderr=subprocess.DEVNULL)
        levels.append(a)
        # File times come from the kernel's coarse clock: a change at once after a dump can
        # look older than it to GNU tar.
        time.sleep(0.02)
        change(r, src, 15)
    gnu_dir = os.path.join(work, "gnu")
    os.makedirs(gnu_dir)
    gnu = []
    for a in levels:
        p = subprocess.run(["tar", "-xvG", "-f", a], capture_output=True, cwd=gnu_dir)
        gnu.append((p.returncode, p.stdout.replace(b"tar: ", b"PROG: ")))
    gnu_tree = snapshot(gnu_dir)
    problems = []
    for i, row in enumerate(ROWS):
        d = os.path.join(work, f"ours{i}")
        os.makedirs(d)
        for a, (code, out) in zip(levels, gnu):
            p = subprocess.run([fastuntar] + row + ["-xvG", "-q", "-f", a, "-C", d],
                               capture_output=True)
            if p.returncode != code or p.stdout.replace(b"fastuntar: ", b"PROG: ") != out:
                problems.append(f"{row} {os.path.basename(a)}: exit {p.returncode} (GNU {code})"
                                f" or -v output differs; stderr: {p.stderr.decode()[:300]}")
                break
        tree = snapshot(d)
        if tree != gnu_tree:
            keys = sorted(set(tree) | set(gnu_tree))
            diff = [(k, gnu_tree.get(k), tree.get(k)) for k in keys if gnu_tree.get(k) != tree.get(k)]
            problems.append(f"{row}: trees differ (path, GNU tar, fastuntar): {diff[:4]}")
    return fmt, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0:50")
    ap.add_argument("--bin", default="target/release/fastuntar")
    ap.add_argument("--workdir", default="/tmp/fastuntar-incremental")
    args = ap.parse_args()
    first, last = (int(x) for x in args.seeds.split(":"))
    fastuntar = os.path.abspath(args.bin)
    bad = 0
    for seed in range(first, last):
        fmt, problems = run_seed(seed, fastuntar, args.workdir)
        for p in problems:
            print(f"seed {seed} ({fmt}): {p}")
        bad += bool(problems)
    print(f"{last - first} seeds, {bad} differing")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
