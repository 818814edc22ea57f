"""What scripts/evaluate measures for one workload: the unlimited reference, --recompute, the plain
run at the limit, and Chameleon at the limit with the daemon's policy and with the policy off."""
import atexit
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field

from . import runs

HOST_LINK = 2.5e10  # simgpu's default host link, bytes/s per direction (docs/simgpu.md)
TRACES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "traces")


@dataclass
class Workload:
    name: str
    kind: str                 # "trainer" or "replay"
    args: list
    steps: int = 40           # daemon runs: STABLE after every candidate is measured, ~step 30
                              # (docs/detection.md)
    window: int = 4           # steady state: the last `window` steps
    off_steps: int = 4        # policy off: steady from the second step; slow in wall time
    daemon: str = ""          # non-empty: why the daemon run is skipped
    # The device as large as the peak (+16 MiB) and only the executor limited: the expandable
    # style sizes its VA reservations by the device's memory, as PyTorch does, so on a device of
    # the limit's size it cannot map past the limit whatever the executor does (docs/shim.md).
    device_at_peak: bool = False

    def argv(self, build, steps, extra=()):
        if self.kind == "trainer":
            return [build.bin("chameleon-train-sim"), *self.args, "--steps", str(steps), *extra]
        return [build.bin("chameleon-replay"), *self.args, "--iterations", str(steps), *extra]


@dataclass
class Config:
    build: runs.Build
    divisor: int = 4          # device memory = peak / divisor
    timeout: int = 300        # seconds per process
    executor: bool = True     # False: Chameleon runs are "not measured"
    log: object = print


def simgpu_env(build, memory=None, topology=None):
    env = {"LD_LIBRARY_PATH": build.simgpu_dir}
    if memory:
        env["SIMGPU_MEMORY"] = memory
    if topology:
        env["SIMGPU_TOPOLOGY"] = topology
    return env


def shim_env(build, limit, policy, socket=None):
    """Chameleon on: the shim preloaded with a device limit; policy=False: the safety net only."""
    env = {"LD_PRELOAD": build.shim, "CHAMELEON_DEVICE_LIMIT": limit, "CHAMELEON_DEBUG": "stats",
           # No daemon unless one is given: a socket nobody listens on.
           "CHAMELEON_SOCKET": socket or os.path.join(tempfile.gettempdir(), "chameleon-none.sock")}
    if not policy:
        env["CHAMELEON_SWAP_POLICY"] = "off"
    return env


def topology_file(host_link_bandwidth):
    """A SIMGPU_TOPOLOGY file that changes only the host link (the sensitivity sweep's knob)."""
    f = tempfile.NamedTemporaryFile("w", prefix="simgpu-topo-", suffix=".yaml", delete=False)
    f.write(f"host_link_bandwidth: {host_link_bandwidth:.6g}\n")
    f.close()
    return f.name


def window_time(result, window):
    """Sum of the last `window` step times (the same window is compared across runs)."""
    if len(result.times) < window:
        return None
    return sum(result.times[-window:])


def run_chameleon(cfg, w, memory, policy, topology=None, steps=None, peak=None):
    """One run at `memory` bytes of device under the shim (with a private daemon if policy);
    with w.device_at_peak and `peak`, only the executor is limited to `memory`."""
    steps = steps or w.steps
    device = str(peak + (16 << 20)) if w.device_at_peak and peak else memory
    env = simgpu_env(cfg.build, device, topology)
    if not policy:
        env.update(shim_env(cfg.build, memory, False))
        return runs.run(w.argv(cfg.build, steps), env, cfg.timeout)
    # The daemon sees the same link as simgpu (the sensitivity sweep changes it).
    with runs.Daemon(cfg.build, {"CHAMELEON_TOPOLOGY": topology} if topology else None) as d:
        env.update(shim_env(cfg.build, memory, True, d.socket))
        r = runs.run(w.argv(cfg.build, steps), env, cfg.timeout, runs.start_poller(d))
        d.poll()  # in case the client is still listed
        r.daemon = d.last
    return r


@dataclass
class Measurement:
    workload: Workload
    memory: int = 0
    ref: runs.Result = None
    recompute: runs.Result = None
    recompute_at_limit: runs.Result = None
    plain: runs.Result = None
    swap: runs.Result = None
    off: runs.Result = None
    off_ref: runs.Result = None  # unlimited, off_steps long (the policy-off run's reference)
    # chameleon-bound's "working_set" answer for the replayed step's profile at the host link
    # (None: not taken): the stall that working sets force while the compute stream waits.
    working_set: dict = None
    # The same at any other link (WorkingSetSource; None: not taken).
    working_set_source: object = None
    notes: list = field(default_factory=list)

    def window(self, which):
        """Step indices of a run's steady state: the last steps (policy settled)."""
        r = getattr(self, which)
        if r is None or not r.ok or not r.times:
            return None
        w = self.workload.window if which in ("ref", "swap") else 2
        n = len(r.times)
        return range(max(0, n - w), n)

    def t(self, which):
        """Mean steady step time of one run (virtual seconds), None if it did not complete."""
        idx = self.window(which)
        if idx is None:
            return None
        times = getattr(self, which).times
        return sum(times[i] for i in idx) / len(idx)

    def rel(self, which):
        """Throughput relative to unlimited memory over the same steps (the unlimited run's steps
        are the same work, so --dynamic phases line up)."""
        idx = self.window(which)
        if idx is None or self.ref is None or len(self.ref.times) < idx.stop:
            return None
        run = sum(getattr(self, which).times[i] for i in idx)
        return sum(self.ref.times[i] for i in idx) / run if run > 0 else None

    def identical(self, which):
        r = getattr(self, which)
        ref = self.off_ref if which == "off" else self.ref
        return r is not None and ref is not None and r.ok and r.results == ref.results

    def identical_to(self, other):
        """This run's Chameleon results equal `other`'s unlimited run (same steps)."""
        return self.swap is not None and self.swap.ok and self.swap.results == other.ref.results

    def bound_bytes(self):
        """Bytes a step must move through ONE direction's time budget (docs/evaluation.md,
        "transfer bound"): peak - limit in any case; twice the step-local part of it (beyond what
        stays live between steps) when the run reported its persistent bytes, because that part is
        written before the peak and read after it, so its way out and its way back cannot overlap."""
        over = max(0, self.ref.peak - int(self.memory))
        if self.ref.persistent is None:
            return over
        return max(over, 2 * max(0, over - self.ref.persistent))

    def working_set_time(self, bandwidth=HOST_LINK):
        """The working-set bound at `bandwidth` (docs/policy.md "The working-set bound"): the
        step's compute plus the stall that working sets force; None if not taken."""
        ws = self.working_set
        if ws and bandwidth != HOST_LINK and self.working_set_source:
            ws = self.working_set_source.at(bandwidth)
        if not ws or not ws.get("feasible"):
            return None
        return ws["bound_s"]

    def bound_time(self, bandwidth=HOST_LINK):
        """Least step time any swap policy can reach (see bound_bytes), and for a replayed trace
        no less than its working-set bound."""
        t = self.t("ref")
        if t is None:
            return None
        return max(t, self.bound_bytes() / bandwidth, self.working_set_time(bandwidth) or 0)

    def bandwidth_for(self, fraction):
        """The host link at which the bound reaches `fraction` of unlimited; None when no link
        does (the step's compute alone is longer than unlimited / fraction)."""
        t = self.t("ref")
        if not t:
            return None
        need = fraction * self.bound_bytes() / t
        ws = self.working_set
        if ws and ws.get("feasible") and ws["stall_s"] > 0:
            # The stall is not linear in 1 / bandwidth (compute hides part of the windows'
            # copies): bisect on a log scale, the bound falling as the link grows.
            target = t / fraction
            lo, hi = 1e8, 1e14
            if ws["compute_s"] >= target or (self.working_set_time(hi) or 0) > target:
                return None
            for _ in range(30):
                mid = (lo * hi) ** 0.5
                if (self.working_set_time(mid) or 0) <= target:
                    hi = mid
                else:
                    lo = mid
            need = max(need, hi)
        return need


def working_set(build, profile, peak, limit, unlimited_s, bandwidth=HOST_LINK):
    """chameleon-bound's working-set answer (policy::ComputeWorkingSetBound, tested) for
    `profile` at `limit` over a link of `bandwidth` each way, or {"error": …}."""
    cmd = [build.bin("chameleon-bound"), "--peak", str(peak), "--limit", str(limit),
           "--out-bw", str(int(bandwidth)), "--in-bw", str(int(bandwidth)),
           "--unlimited-s", f"{unlimited_s:.9f}", "--forward-s", "0", "--profile", profile]
    p = subprocess.run(cmd, capture_output=True, text=True)
    try:
        return json.loads(p.stdout)["working_set"]
    except (ValueError, KeyError):
        return {"error": (p.stderr or p.stdout).strip()[-200:]}


class WorkingSetSource:
    """The working-set bound of one emitted profile at any link bandwidth (chameleon-bound, run
    once per bandwidth). Owns the profile file: it is removed when the evaluation exits."""

    def __init__(self, build, profile, peak, limit, unlimited_s):
        self.args = (build, profile, peak, limit, unlimited_s)
        self.cache = {}
        atexit.register(lambda: os.path.exists(profile) and os.unlink(profile))

    def at(self, bandwidth):
        if bandwidth not in self.cache:
            ws = working_set(*self.args, bandwidth=bandwidth)
            self.cache[bandwidth] = None if ws.get("error") else ws
        return self.cache[bandwidth]


def measure(cfg, w, topology=None):
    """Everything for one workload row (recompute only for the trainer)."""
    m = Measurement(w)
    env0 = simgpu_env(cfg.build, None, topology)
    cfg.log(f"  {w.name}: unlimited")
    profile = None
    extra = []
    if w.kind == "replay":  # its detailed profile, for the working-set bound
        profile = tempfile.NamedTemporaryFile(prefix="profile-", suffix=".json", delete=False).name
        extra = ["--emit-profile", profile]
    m.ref = runs.run(w.argv(cfg.build, w.steps, extra), env0, cfg.timeout)
    if not m.ref.ok:
        m.notes.append(f"unlimited run failed (rc {m.ref.rc}): {m.ref.stderr.strip()[-200:]}")
        if profile:
            os.unlink(profile)
        return m
    m.memory = m.ref.peak // cfg.divisor
    if profile:
        m.working_set_source = WorkingSetSource(cfg.build, profile, m.ref.peak, m.memory,
                                                m.t("ref"))
        m.working_set = working_set(cfg.build, profile, m.ref.peak, m.memory, m.t("ref"))
        if m.working_set.get("error"):
            m.notes.append(f"working-set bound: {m.working_set['error']}")
            m.working_set = None
    if w.kind == "trainer" and "--recompute" not in w.args:
        cfg.log(f"  {w.name}: --recompute")
        m.recompute = runs.run(w.argv(cfg.build, 3, ["--recompute"]), env0, cfg.timeout)
        m.recompute_at_limit = runs.run(w.argv(cfg.build, 2, ["--recompute"]),
                                        simgpu_env(cfg.build, m.memory, topology), cfg.timeout)
    cfg.log(f"  {w.name}: plain at {m.memory} B")
    m.plain = runs.run(w.argv(cfg.build, 2), simgpu_env(cfg.build, m.memory, topology),
                       cfg.timeout)
    if not cfg.executor:
        return m
    if w.daemon:
        m.notes.append("Chameleon with the daemon: not measured: " + w.daemon)
    else:
        cfg.log(f"  {w.name}: Chameleon + daemon at {m.memory} B")
        m.swap = run_chameleon(cfg, w, m.memory, True, topology, peak=m.ref.peak)
    cfg.log(f"  {w.name}: Chameleon, policy off, at {m.memory} B")
    m.off = run_chameleon(cfg, w, m.memory, False, topology, w.off_steps, peak=m.ref.peak)
    m.off_ref = (m.ref if w.off_steps == w.steps else
                 runs.run(w.argv(cfg.build, w.off_steps), env0, cfg.timeout))
    for which in ("swap", "off"):
        r = getattr(m, which)
        if r is None:
            continue
        if not r.ok:
            m.notes.append(f"{which}: rc {r.rc}: {(r.oom_line() or r.stderr.strip()[-200:])}")
        elif not m.identical(which):
            m.notes.append(f"{which}: results differ from the unlimited run")
    return m


def probe_executor(cfg, spec):
    """True when the shim's executor trains a small model at 1/4 of its peak, identically."""
    w = Workload("probe", "trainer", spec.split(), steps=2)
    ref = runs.run(w.argv(cfg.build, 2), simgpu_env(cfg.build), cfg.timeout)
    if not ref.ok:
        return False, "the trainer does not run: " + ref.stderr[-300:]
    limit = ref.peak // 4
    r = run_chameleon(cfg, w, limit, False)
    if r.ok and r.results == ref.results and r.executor.get("swap_out_bytes", 0) > 0:
        return True, f"probe trained at {limit} B with {r.executor['swap_out_bytes']} B swapped out"
    why = r.oom_line() or r.stderr.strip().splitlines()[-1:] or ["no output"]
    return False, f"probe at {limit} B: rc {r.rc}: {why if isinstance(why, str) else why[0]}"


def largest(trains, start, executor, factors=(2, 4, 8)):
    """The doubling search of every capacity row: the largest value that trains plain (doubling
    from `start`), then plain x each factor under Chameleon until one fails. `trains(v,
    chameleon)` runs one shape. Returns {"plain", "chameleon" (None: not tried), "tried"}."""
    plain, v = 0, start
    while v <= start << 16 and trains(v, False):
        plain, v = v, v * 2
    out = {"plain": plain, "chameleon": None, "tried": []}
    if not executor or plain == 0:
        return out
    best = plain
    for f in factors:
        ok = trains(plain * f, True)
        out["tried"].append((plain * f, ok))
        if not ok:
            break
        best = plain * f
    out["chameleon"] = best
    return out


def capacity(cfg, base, dim, start, memory, factors=(2, 4, 8)):
    """Largest `dim` value (batch or seq) of the small trainer that trains at `memory`: plain
    and under Chameleon (safety net: capacity does not depend on the policy), each checked
    identical against an unlimited run of the same shape."""
    def shaped(v):
        args = list(base)
        i = args.index("--" + dim)
        args[i + 1] = str(v)
        return Workload(f"{dim} {v}", "trainer", args, steps=2)

    def trains(v, chameleon):
        w = shaped(v)
        if chameleon:
            r = run_chameleon(cfg, w, memory, False)
        else:
            r = runs.run(w.argv(cfg.build, 2), simgpu_env(cfg.build, memory), cfg.timeout)
        if not r.ok:
            return False
        ref = runs.run(w.argv(cfg.build, 2), simgpu_env(cfg.build), cfg.timeout)
        return ref.ok and ref.results == r.results

    out = {"workload": f"trainer {' '.join(base[:4])}", "dim": dim, "memory": memory}
    out.update(largest(trains, start, cfg.executor, factors))
    return out
