#!/usr/bin/env python3
"""Compares the plain and shim runs written by run_gpu_check.sh and prints a table.

Per allocator mode: losses and checksum bit-identical?, steps/s without and with the shim,
overhead, and what the shim saw (from its CHAMELEON_DEBUG=stats exit line): launches,
allocations, frees, records. Exit status 0 only if every mode is identical and the shim saw
launches and allocations in every mode.
"""
import os
import re
import sys

MODES = ["default", "cudaMallocAsync", "expandable"]
LAUNCH = ("cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
          "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz", "cuGraphLaunch",
          "cuGraphLaunch_ptsz")
ALLOC = ("cuMemAlloc_v2", "cuMemAllocPitch_v2", "cuMemAllocAsync", "cuMemAllocAsync_ptsz",
         "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz", "cuMemMap")
FREE = ("cuMemFree_v2", "cuMemFreeAsync", "cuMemFreeAsync_ptsz", "cuMemUnmap")


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().splitlines()


def result_lines(lines):
    return [l for l in lines if l.startswith("step ") or l.startswith("checksum ")]


def value(lines, key):
    for l in lines:
        if l.startswith(key + " "):
            return l.split()[1]
    return None


def shim_calls(log_lines):
    for l in reversed(log_lines):
        if "stats:" in l and "calls:" in l:
            calls = dict(re.findall(r"(cu\w+)=(\d+)", l.split("calls:", 1)[1]))
            records = re.search(r"records=(\d+)", l)
            return {k: int(v) for k, v in calls.items()}, int(records.group(1)) if records else 0
    return None, 0


def main(out_dir):
    ok = True
    print(f"{'mode':<16} {'identical':<10} {'plain it/s':>10} {'shim it/s':>10} {'overhead':>9} "
          f"{'launches':>9} {'allocs':>8} {'frees':>8} {'records':>8}")
    for mode in MODES:
        plain = read(os.path.join(out_dir, f"{mode}.plain.out"))
        shim = read(os.path.join(out_dir, f"{mode}.shim.out"))
        log_path = os.path.join(out_dir, f"{mode}.shim.log")
        calls, records = shim_calls(read(log_path)) if os.path.exists(log_path) else (None, 0)
        identical = bool(result_lines(plain)) and result_lines(plain) == result_lines(shim)
        p_rate, s_rate = value(plain, "steps_per_s"), value(shim, "steps_per_s")
        try:
            overhead = f"{(float(p_rate) / float(s_rate) - 1) * 100:+.1f}%"
        except (TypeError, ValueError, ZeroDivisionError):
            overhead = "?"
        launches = sum(calls.get(k, 0) for k in LAUNCH) if calls else 0
        allocs = sum(calls.get(k, 0) for k in ALLOC) if calls else 0
        frees = sum(calls.get(k, 0) for k in FREE) if calls else 0
        print(f"{mode:<16} {str(identical):<10} {p_rate or '?':>10} {s_rate or '?':>10} "
              f"{overhead:>9} {launches:>9} {allocs:>8} {frees:>8} {records:>8}")
        if not identical:
            ok = False
            print(f"  results differ: diff {mode}.plain.out {mode}.shim.out")
        if calls is None:
            ok = False
            print(f"  no stats line in {log_path}: was the shim loaded?")
        elif launches == 0 or allocs == 0:
            ok = False
            print("  the shim saw no launches or no allocations: interposition failed")
    print("RESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "gpu-check-out"))
