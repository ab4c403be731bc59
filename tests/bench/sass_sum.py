#!/usr/bin/env python3
# tests/bench/sass_sum.py FILE.csv: sums an `ncu --page source --print-source sass --csv` export by
# opcode: warp-level instructions executed, their share, their share of the warp-stall samples.
import collections
import csv
import sys

rows = list(csv.reader(open(sys.argv[1])))
# the export may follow the profiled program's own output: start at its header row
for i, r in enumerate(rows):
    if r and r[0] in ("Kernel Name", "Address", "# Address"):
        rows = rows[i:]
        break
if rows and rows[0] and rows[0][0] == "Kernel Name":
    rows = rows[1:]
head = rows[0]


def col(name):
    for i, c in enumerate(head):
        if c.strip().lower().startswith(name.lower()):
            return i
    return None


c_src, c_stall, c_exec = col("Source"), col("Warp Stall Sampling (All"), col("Instructions Executed")
executed, stalls = collections.Counter(), collections.Counter()
for r in rows[1:]:
    try:
        words = r[c_src].strip().split()
        op = words[1] if words[0].startswith("@") else words[0]
        parts = op.split(".")
        op = ".".join(parts[:2]) if op.startswith(("LD", "ST")) else parts[0]
        executed[op] += int(r[c_exec].replace(",", "") or 0)
        if c_stall is not None:
            stalls[op] += int(r[c_stall].replace(",", "") or 0)
    except (IndexError, ValueError):
        pass
total, samples = sum(executed.values()), sum(stalls.values()) or 1
print(f"total warp instr {total} stall samples {samples}")
for op, n in executed.most_common(18):
    print(f"  {op:14s} {n:10d} {100 * n / max(total, 1):5.1f}%  stalls {100 * stalls[op] / samples:5.1f}%")
