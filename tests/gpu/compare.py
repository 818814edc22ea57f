#!/usr/bin/env python3
"""Compares the plain and shim runs written by run_gpu_check.sh and prints a table.

First the probe's figures (probe.txt, probe.yaml). Per allocator mode: losses and checksum
bit-identical?, steps/s without and with the shim, overhead, and what the shim saw (from its
CHAMELEON_DEBUG=stats exit line): launches, allocations, frees, records. Then the run under
CHAMELEON_DEVICE_LIMIT = peak / 2 against the default mode's plain run: identical?, and what the
executor moved (the last line of its CHAMELEON_STATS_FILE). Exit status 0 only if the probe ran,
every mode is identical with launches and allocations seen, and the limited run is identical and
swapped.
"""
import json
import os
import re
import sys

MODES = ["default", "expandable", "nocache"]
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


def probe_ok(out_dir):
    """Prints the probe's table; true when both of its runs exited 0 and the YAML has the keys."""
    ok = True
    for name in ("probe.txt", "probe.yaml"):
        path = os.path.join(out_dir, name)
        rc = read(path + ".rc") if os.path.exists(path + ".rc") else ["?"]
        if rc != ["0"] or not os.path.exists(path):
            print(f"probe: {name} failed (exit status {rc[0] if rc else '?'}); see {path}.err")
            ok = False
    if ok:
        yaml = "\n".join(read(os.path.join(out_dir, "probe.yaml")))
        for key in ("host_to_device_bandwidth", "device_to_host_bandwidth", "host_link_bandwidth"):
            if not re.search(rf"^{key}: [0-9.e+]+", yaml, re.M):
                print(f"probe: probe.yaml has no {key}")
                ok = False
    return ok


def last_stats(path):
    """The executor's totals from the last line of a CHAMELEON_STATS_FILE, or None."""
    if not os.path.exists(path):
        return None
    lines = [l for l in read(path) if l.strip()]
    try:
        return json.loads(lines[-1])["totals"] if lines else None
    except (ValueError, KeyError):
        return None


def limited_ok(out_dir):
    out = os.path.join(out_dir, "limited.shim.out")
    if not os.path.exists(out):
        print("limited: no run (no peak_bytes in default.plain.out?)")
        return False
    limit = (read(os.path.join(out_dir, "limited.limit")) or ["?"])[0]
    plain = result_lines(read(os.path.join(out_dir, "default.plain.out")))
    identical = bool(plain) and plain == result_lines(read(out))
    totals = last_stats(os.path.join(out_dir, "limited.stats.jsonl")) or {}
    moved = {k: totals.get(k, 0) for k in ("swap_out_bytes", "swap_in_bytes", "evictions",
                                           "fault_ins", "prefetch_hits")}
    print(f"limited (limit {limit} bytes = peak / 2): identical {identical}, "
          f"steps/s {value(read(out), 'steps_per_s') or '?'}, "
          + ", ".join(f"{k} {v}" for k, v in moved.items()))
    ok = identical and moved["swap_out_bytes"] > 0
    if not identical:
        print("  results differ: diff default.plain.out limited.shim.out")
    if moved["swap_out_bytes"] == 0:
        print("  nothing was swapped out under the limit (limited.stats.jsonl)")
    return ok


def main(out_dir):
    ok = probe_ok(out_dir)
    if os.path.exists(os.path.join(out_dir, "probe.txt")):
        print("\n".join(read(os.path.join(out_dir, "probe.txt"))))
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
    ok = limited_ok(out_dir) and ok
    print("RESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "gpu-check-out"))
