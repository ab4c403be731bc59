#!/usr/bin/env python3
# tests/bench/aot_diff.py OLD.bcar NEW.bcar: compares two AOT kernel archives (build/aot/kernels.bcar,
# format runtime/jit/bc_jit.h) kernel by kernel, without a GPU or cuobjdump: each (name, arch)
# entry's launch record and its cubin's ELF sections, all but .note.nv.tkinfo (the compiler's
# record of the source path). Prints the counts and every kernel that differs with the sections
# that differ; exits 1 if any kernel differs or is missing from either archive.
# Use it to show that a change to the templates leaves kernels' code as it was (copy the old
# archive aside before rebuilding).
import struct
import sys

MAGIC = b"BCAOT006"
NLAUNCH = 11  # i32 fields of bci_launch


def entries(path):
    d = open(path, "rb").read()
    if d[:8] != MAGIC:
        sys.exit(f"{path}: not a {MAGIC.decode()} archive (header {d[:8]!r})")
    (n,) = struct.unpack_from("<I", d, 8)
    p, out = 12, {}
    for _ in range(n):
        (nl,) = struct.unpack_from("<H", d, p)
        name = d[p + 2 : p + 1 + nl].decode()
        p += 2 + nl
        (al,) = struct.unpack_from("<H", d, p)
        arch = d[p + 2 : p + 1 + al].decode()
        p += 2 + al + 130  # spec hash, cache key
        launch = struct.unpack_from(f"<{NLAUNCH}i", d, p)
        p += 4 * NLAUNCH
        (size,) = struct.unpack_from("<Q", d, p)
        p += 8 + 32  # size, sha256
        out[(name, arch)] = (launch, d[p : p + size])
        p += size
    return out


def sections(elf):
    (shoff,) = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    hs = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names = hs[shstrndx][4]
    out = {}
    for h in hs:
        name = elf[names + h[0] : elf.index(b"\0", names + h[0])].decode()
        if name != ".note.nv.tkinfo":
            out[name] = elf[h[4] : h[4] + h[5]] if h[1] != 8 else h[5]  # SHT_NOBITS: its size
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: aot_diff.py OLD.bcar NEW.bcar")
    a, b = entries(sys.argv[1]), entries(sys.argv[2])
    only = sorted(set(a) ^ set(b))
    same, diff = 0, []
    for k in sorted(set(a) & set(b)):
        (la, ea), (lb, eb) = a[k], b[k]
        sa, sb = sections(ea), sections(eb)
        if la == lb and sa == sb:
            same += 1
        else:
            secs = [s for s in sorted(set(sa) | set(sb)) if sa.get(s) != sb.get(s)]
            diff.append((k, la != lb, secs))
    print(f"{len(a)} / {len(b)} kernels; {same} identical (all sections but .note.nv.tkinfo, and the launch), "
          f"{len(diff)} different, {len(only)} in one archive only")
    for (name, arch), launch, secs in diff:
        print(f"  {name} ({arch}):{' launch,' if launch else ''} {', '.join(secs)}")
    for name, arch in only:
        print(f"  only in {'old' if (name, arch) in a else 'new'}: {name} ({arch})")
    return 1 if diff or only else 0


if __name__ == "__main__":
    sys.exit(main())
