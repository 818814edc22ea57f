"""LLM-scale rows of scripts/evaluate: model-shaped workloads (chameleon-train-sim --model) on an
H-class machine preset at fractions of their peak, each against its transfer bound computed by
`chameleon-bound` (policy::ComputeTransferBound, the one tested function) — unlimited, the safety
net alone (policy off: under a daemon, which finds the iterations the Belady eviction rule needs,
and without one, where the closest-size rule is all there is) and the daemon's policy, with the
executor's per-iteration records (CHAMELEON_STATS_FILE) read for the steady state."""
import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field

from . import runs

PHASES_RE = re.compile(r"^phases forward (\S+) backward (\S+) optimizer (\S+)$")
OPT_RE = re.compile(r"^optimizer-state (\d+)$")
UNLIMITED = "4T"  # sparse simulated memory makes an unlimited device cheap (docs/simgpu.md)


@dataclass
class Case:
    name: str             # the workload (model and shape), one plot line per name and machine
    machine: str
    args: list
    fraction: float       # device limit = peak x fraction
    steps: int = 24       # daemon run
    # Safety net alone under a daemon (policy off): the boundary is found after ~5 steps, the
    # Belady rule has a whole recorded iteration two boundaries later; steady = the last `window`.
    off_steps: int = 12
    closest_steps: int = 3  # safety net without a daemon (closest size); steady from step 1
    window: int = 4       # daemon runs: steady = the last `window` steps


@dataclass
class Row:
    case: Case
    ref: runs.Result = None
    off: runs.Result = None          # policy off under a daemon: Belady eviction
    off_closest: runs.Result = None  # policy off, no daemon: closest-size eviction
    swap: runs.Result = None
    plain: runs.Result = None
    recompute: runs.Result = None  # --recompute at the limit, plain (no shim): does it fit?
    limit: int = 0
    forward_s: float = None
    backward_s: float = None
    optimizer_bytes: int = 0
    bound: dict = field(default_factory=dict)
    steady: dict = field(default_factory=dict)  # stats-file figures under the final generation
    off_steady: dict = field(default_factory=dict)  # the policy-off run's last `window` iterations
    stable_at: int = None  # iterations done when a poll first saw STABLE
    reference: dict = field(default_factory=dict)  # run name: unlimited checksum, same steps
    notes: list = field(default_factory=list)


# limit / peak. At 1.0 the limit is the program's own peak byte count, where the bound is the
# unlimited time: those points measure what Chameleon costs where no swap should be needed. It
# still swaps a little there (its footprint, whole 2 MiB chunks per tensor and the plan's reserve,
# is above the program's bytes), and plain may still run out of memory (GPT-2 XL B8 S1024 does
# under simgpu: the driver's stream-ordered accounting is not the trainer's byte count).
FRACTIONS = (1.0, 0.75, 0.5, 0.33, 0.25)


def cases(quick):
    """The grid: model-shaped workloads x machines x limit / peak. ~1-2 min of wall per point on
    2 cores (the daemon's run dominates)."""
    if quick:  # the code path only (scripts/test): a small shape, few steps
        return [Case("GPT-2 XL B1 S256 (quick)", "h200-sxm",
                     "--model gpt2-xl --micro-batch 1 --seq 256".split(), 0.5, steps=8,
                     off_steps=8)]
    gpt2 = "--model gpt2-xl --micro-batch 8 --seq 1024".split()
    # The trainer's default allocation style (one allocation per tensor): the expandable style
    # sizes its reservations by the device's memory, which the limit shrinks (docs/shim.md).
    llama = "--model llama2-7b --micro-batch 1 --seq 4096".split()
    out = [Case("GPT-2 XL B8 S1024", m, gpt2, f) for m in ("h200-sxm", "a100-pcie4")
           for f in FRACTIONS]
    out += [Case("Llama-2 7B B1 S4096", "h200-sxm", llama, f, steps=16) for f in (0.5, 0.25)]
    return out


def machine_file(build, machine):
    return os.path.join(build.root, "share", "chameleon", "machines", machine + ".yaml")


def machine_figures(path):
    """The two host-link figures of a preset (plain `key: value` lines of the machine YAML), and
    `peer_link_bandwidth` (NVLink) when it has one; a preset with one symmetric
    `host_link_bandwidth` (a100-pcie4) gives it to both directions."""
    out = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"^(host_to_device_bandwidth|device_to_host_bandwidth|"
                         r"host_link_bandwidth|peer_link_bandwidth):\s*(\S+)", line)
            if m:
                out[m.group(1)] = float(m.group(2))
    for key in ("host_to_device_bandwidth", "device_to_host_bandwidth"):
        out.setdefault(key, out.get("host_link_bandwidth", 0.0))
    if not out["host_to_device_bandwidth"] or not out["device_to_host_bandwidth"]:
        raise ValueError(f"{path}: no host-link bandwidth")
    return out


def env_for(build, case, memory):
    return {"LD_LIBRARY_PATH": build.simgpu_dir, "SIMGPU_MACHINE": case.machine,
            "SIMGPU_MEMORY": str(memory),
            "CHAMELEON_TOPOLOGY": machine_file(build, case.machine)}


def argv(build, case, steps):
    return [build.bin("chameleon-train-sim"), *case.args, "--steps", str(steps)]


def shim(build, limit, stats, socket=None, policy=True):
    env = {"LD_PRELOAD": build.shim, "CHAMELEON_DEVICE_LIMIT": str(limit),
           "CHAMELEON_DEBUG": "stats", "CHAMELEON_STATS_FILE": stats,
           "CHAMELEON_SOCKET": socket or os.path.join(tempfile.gettempdir(), "chameleon-none.sock")}
    if not policy:
        env["CHAMELEON_SWAP_POLICY"] = "off"
    return env


def read_stats(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        return []


def steady(records, limit, peak, last=None):
    """Per-iteration means over the iterations under the last generation in force (after its first
    whole iteration), or over the `last` iterations, from the stats file's `iteration` records."""
    its = [r for r in records if r.get("event") == "iteration"]
    if not its:
        return {}
    last_gen = its[-1].get("generation_in_force", 0)
    under = (its[-last:] if last else
             [r for r in its if r.get("generation_in_force") == last_gen][1:])
    if not under:
        return {"generation": last_gen, "iterations": 0}
    c = [r["counters"] for r in under]
    total = lambda k: sum(x.get(k, 0) for x in c)  # noqa: E731
    ins = total("prefetches") + total("fault_ins")
    return {"generation": last_gen, "iterations": len(under),
            "ahead": total("prefetches") / ins if ins else None,
            "fault_ins": total("fault_ins") / len(c), "evictions": total("evictions") / len(c),
            "out_per_excess": (total("swap_out_bytes") / len(c) / (peak - limit)
                               if peak > limit else None),  # no bytes must leave at 1.0
            # Swapped bytes that went to a peer GPU (node placement) rather than host memory.
            "peer_share": (total("peer_out_bytes") / total("swap_out_bytes")
                           if total("swap_out_bytes") else None),
            "wait_s": total("swap_in_wait_ns") / len(c) / 1e9,
            # The plan's predicted wait for swap-ins (docs/policy.md, "Predicted stall"), the
            # figure swap_in_wait_ns measures; predicted_stall_ns adds the swap-out waits.
            "predicted_s": total("predicted_in_wait_ns") / len(c) / 1e9}


def bound(build, row, figures):
    t = row.ref.times[-1]
    cmd = [build.bin("chameleon-bound"), "--peak", str(row.ref.peak), "--limit", str(row.limit),
           "--optimizer-bytes", str(row.optimizer_bytes),
           "--out-bw", str(int(figures["device_to_host_bandwidth"])),
           "--in-bw", str(int(figures["host_to_device_bandwidth"])),
           "--unlimited-s", f"{t:.9f}", "--forward-s", f"{row.forward_s:.9f}"]
    if row.backward_s is not None:  # the windowed bound T_w; printed phases may round past t
        cmd += ["--backward-s", f"{min(row.backward_s, t - row.forward_s):.9f}"]
    return run_bound(cmd)


def run_bound(cmd):
    """chameleon-bound's JSON answer with the command that gave it, or status "error"."""
    p = subprocess.run(cmd, capture_output=True, text=True)
    try:
        out = json.loads(p.stdout)
    except ValueError:
        return {"status": "error", "error": (p.stderr or p.stdout).strip()[-200:]}
    out["command"] = " ".join(["chameleon-bound", *cmd[1:]])
    return out


def failure_notes(row):
    """A note for each of the row's shim runs that failed."""
    for which in ("off", "off_closest", "swap", "host"):
        r = getattr(row, which, None)
        if r is not None and not r.ok:
            row.notes.append(f"{which}: rc {r.rc}: {(r.oom_line() or r.stderr.strip()[-200:])}")


def unlimited(cfg, row):
    """The unlimited run of row.case (3 steps): its phases and optimizer state, the limit at
    case.fraction of its peak and the transfer bound over the host link. False if it failed."""
    b, case = cfg.build, row.case
    cfg.log(f"  {case.name}: unlimited")
    row.ref = runs.run(argv(b, case, 3), env_for(b, case, UNLIMITED), cfg.timeout)
    if not row.ref.ok:
        row.notes.append(f"unlimited run failed (rc {row.ref.rc})")
        return False
    for line in row.ref.stdout.splitlines():
        if (m := PHASES_RE.match(line)):
            row.forward_s = float(m.group(1))
            row.backward_s = float(m.group(2))
        elif (m := OPT_RE.match(line)):
            row.optimizer_bytes = int(m.group(1))
    row.limit = int(row.ref.peak * case.fraction)
    try:
        row.bound = bound(b, row, machine_figures(machine_file(b, case.machine)))
    except (OSError, ValueError) as e:  # a row without its bound, said so, not a lost evaluation
        row.bound = {"status": "error", "error": str(e)}
        row.notes.append(f"no transfer bound: {e}")
    return True


def measure(cfg, case):
    row = Row(case)
    b = cfg.build
    if not unlimited(cfg, row):
        return row
    device = row.limit + (16 << 20)  # room for what passes through (contexts, small tensors)
    cfg.log(f"  {case.name}: plain at {row.limit} B")
    row.plain = runs.run(argv(b, case, 2), env_for(b, case, row.limit), cfg.timeout)
    row.recompute = runs.run(argv(b, case, 2) + ["--recompute"], env_for(b, case, row.limit),
                             cfg.timeout)
    if not cfg.executor:
        return row
    with tempfile.TemporaryDirectory(prefix="chameleon-llm-") as tmp:
        cfg.log(f"  {case.name}: policy off, no daemon (closest-size eviction)")
        env = env_for(b, case, device)
        env.update(shim(b, row.limit, os.path.join(tmp, "closest.jsonl"), policy=False))
        env["CHAMELEON_EVICTION"] = "closest-size"  # what it falls back to with no iteration known
        row.off_closest = runs.run(argv(b, case, case.closest_steps), env, cfg.timeout)
        cfg.log(f"  {case.name}: policy off + daemon (Belady eviction), {case.off_steps} steps")
        off_stats = os.path.join(tmp, "off.jsonl")
        with runs.Daemon(b, {"CHAMELEON_TOPOLOGY": machine_file(b, case.machine)}) as d:
            env = env_for(b, case, device)
            env.update(shim(b, row.limit, off_stats, d.socket, policy=False))
            row.off = runs.run(argv(b, case, case.off_steps), env, cfg.timeout)
        row.off_steady = steady(read_stats(off_stats), row.limit, row.ref.peak, case.window)
        cfg.log(f"  {case.name}: Chameleon + daemon, {case.steps} steps")
        stats = os.path.join(tmp, "swap.jsonl")
        # The daemon plans with the node's host link, per direction, as an operator's
        # CHAMELEON_TOPOLOGY (e.g. written by chameleon-probe) would give it.
        with runs.Daemon(b, {"CHAMELEON_TOPOLOGY": machine_file(b, case.machine)}) as d:
            env = env_for(b, case, device)
            env.update(shim(b, row.limit, stats, d.socket))
            row.swap = runs.run(argv(b, case, case.steps), env, cfg.timeout, runs.start_poller(d))
            d.poll()
            row.swap.daemon = d.last
            row.stable_at = d.first_stable()
        row.steady = steady(read_stats(stats), row.limit, row.ref.peak)
    failure_notes(row)
    return row


def identical(row, which):
    """Same checksum as the unlimited run of the same number of steps (references())."""
    r = getattr(row, which)
    return r is not None and r.ok and r.checksum == row.reference.get(which)


def references(cfg, rows):
    """Unlimited checksums for the step counts the Chameleon runs used."""
    for row in rows:
        if not row.ref or not row.ref.ok:
            continue
        by_steps = {3: row.ref}  # the unlimited run has 3 steps
        for which, steps in (("off", row.case.off_steps), ("off_closest", row.case.closest_steps),
                             ("swap", row.case.steps)):
            if steps not in by_steps:
                by_steps[steps] = runs.run(argv(cfg.build, row.case, steps),
                                           env_for(cfg.build, row.case, UNLIMITED), cfg.timeout)
            r = by_steps[steps]
            row.reference[which] = r.checksum if r.ok else None
