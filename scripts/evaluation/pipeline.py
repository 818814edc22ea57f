"""Pipeline rows of scripts/evaluate (issue 16): one process drives a 1F1B pipeline over the
devices of one simulated node (chameleon-train-sim --pipeline N, one stage per device), at a
per-device limit that only device 0 exceeds (halfway between its peak and the largest of the
others'). Unlimited, plain (out of memory on device 0), the safety net alone (policy off) and
the daemon's policy, which plans device 0, the one the shim's executor serves (docs/policy.md,
"Several devices in one process"), twice: with node placement (the daemon lends the process's
room on its other devices to its own swaps, docs/daemon.md "A process's own devices") and with
CHAMELEON_PLACEMENT=host. Each against the pipeline's transfer bound from `chameleon-bound
pipeline` (policy::ComputeTransferBound(PipelineBoundInput), tested) over its own link: the host
link, or NVLink for the peer run."""
import os
import re
import tempfile
from dataclasses import dataclass, field

from . import llm, runs

DEVICE_PEAK_RE = re.compile(r"^device (\d+) peak (\d+)$")
DEVICE_BUSY_RE = re.compile(r"^device (\d+) busy ([0-9.]+)$")


@dataclass
class Case:
    name: str
    machine: str
    args: list
    devices: int
    steps: int = 20     # daemon run
    off_steps: int = 4  # safety net alone


@dataclass
class Row:
    case: Case
    ref: runs.Result = None
    plain: runs.Result = None
    off: runs.Result = None
    swap: runs.Result = None   # node placement (the default)
    host: runs.Result = None   # CHAMELEON_PLACEMENT=host
    limit: int = 0
    peaks: dict = field(default_factory=dict)  # device -> bytes (unlimited run)
    busy: dict = field(default_factory=dict)   # device -> compute seconds per step
    bound: dict = field(default_factory=dict)       # over the host link
    peer_bound: dict = field(default_factory=dict)  # over NVLink
    steady: dict = field(default_factory=dict)  # the node-placement run's
    stable_at: int = None
    planned_device: dict = field(default_factory=dict)  # the daemon's view while STABLE
    reference: dict = field(default_factory=dict)       # "off"/"swap": unlimited checksums
    notes: list = field(default_factory=list)


def cases(quick):
    if quick:  # the code path only (scripts/test)
        return [Case("Llama-2 7B S256, 2 stages x 4 micro-batches (quick)", "h200-sxm",
                     "--model llama2-7b --micro-batch 1 --seq 256 --pipeline 2 "
                     "--micro-batches 4".split(), 2, steps=4, off_steps=2)]
    base = "--model llama2-7b --micro-batch 1 --pipeline 4 --micro-batches 8"
    return [Case(f"Llama-2 7B S{seq}, 4 stages x 8 micro-batches", "h200-sxm",
                 f"{base} --seq {seq}".split(), 4, steps=steps)
            for seq, steps in ((1024, 20), (4096, 16))]


def env_for(build, case, memory):
    env = llm.env_for(build, case, memory)
    env["SIMGPU_DEVICES"] = str(case.devices)
    return env


def argv(build, case, steps):
    return [build.bin("chameleon-train-sim"), *case.args, "--steps", str(steps)]


def bound(build, row, out_bw, in_bw):
    cmd = [build.bin("chameleon-bound"), "--limit", str(row.limit),
           "--unlimited-s", f"{row.ref.times[-1]:.9f}", "pipeline"]
    for d in sorted(row.peaks):
        cmd += ["--stage", f"peak={row.peaks[d]},compute={row.busy.get(d, 0.0):.9f},"
                f"out-bw={int(out_bw)},in-bw={int(in_bw)}"]
    return llm.run_bound(cmd)


def measure(cfg, case):
    row = Row(case)
    b = cfg.build
    cfg.log(f"  {case.name}: unlimited")
    row.ref = runs.run(argv(b, case, 3), env_for(b, case, llm.UNLIMITED), cfg.timeout)
    if not row.ref.ok:
        row.notes.append(f"unlimited run failed (rc {row.ref.rc})")
        return row
    for line in row.ref.stdout.splitlines():
        if (m := DEVICE_PEAK_RE.match(line)):
            row.peaks[int(m.group(1))] = int(m.group(2))
        elif (m := DEVICE_BUSY_RE.match(line)):
            row.busy[int(m.group(1))] = float(m.group(2))
    others = max((p for d, p in row.peaks.items() if d != 0), default=0)
    if row.peaks.get(0, 0) <= others:
        row.notes.append("device 0 is not the fullest: no limit only it exceeds")
        return row
    row.limit = others + (row.peaks[0] - others) // 2
    try:
        figures = llm.machine_figures(llm.machine_file(b, case.machine))
        row.bound = bound(b, row, figures["device_to_host_bandwidth"],
                          figures["host_to_device_bandwidth"])
        if (nvlink := figures.get("peer_link_bandwidth")):
            row.peer_bound = bound(b, row, nvlink, nvlink)
    except (OSError, ValueError) as e:
        row.bound = {"status": "error", "error": str(e)}
        row.notes.append(f"no transfer bound: {e}")
    cfg.log(f"  {case.name}: plain at {row.limit} B per device")
    row.plain = runs.run(argv(b, case, 2), env_for(b, case, row.limit), cfg.timeout)
    if not cfg.executor:
        return row
    with tempfile.TemporaryDirectory(prefix="chameleon-pipeline-") as tmp:
        cfg.log(f"  {case.name}: policy off")
        env = env_for(b, case, row.limit)
        env.update(llm.shim(b, row.limit, os.path.join(tmp, "off.jsonl"), policy=False))
        row.off = runs.run(argv(b, case, case.off_steps), env, cfg.timeout)
        for which, placement in (("swap", None), ("host", "host")):
            cfg.log(f"  {case.name}: Chameleon + daemon, {placement or 'node'} placement, "
                    f"{case.steps} steps")
            stats = os.path.join(tmp, f"{which}.jsonl")
            with runs.Daemon(b, {"CHAMELEON_TOPOLOGY": llm.machine_file(b, case.machine)}) as d:
                seen = {}

                def poll():  # the daemon's planned device while STABLE (the epilogue ends it)
                    d.poll()
                    if d.last.get("stage") == "STABLE" and "planned_device" in d.last:
                        seen.update(d.last["planned_device"])
                env = env_for(b, case, row.limit)
                env.update(llm.shim(b, row.limit, stats, d.socket))
                if placement:
                    env["CHAMELEON_PLACEMENT"] = placement
                result = runs.run(argv(b, case, case.steps), env, cfg.timeout, poll)
                result.daemon = d.last
                setattr(row, which, result)
                if which == "swap":
                    row.stable_at = d.first_stable()
                    row.planned_device = seen
                    row.steady = llm.steady(llm.read_stats(stats), row.limit, row.peaks[0])
    llm.failure_notes(row)
    return row


def references(cfg, rows):
    """Unlimited checksums for the step counts the Chameleon runs used."""
    for row in rows:
        if not row.ref or not row.ref.ok:
            continue
        for which, steps in (("off", row.case.off_steps), ("swap", row.case.steps)):
            r = runs.run(argv(cfg.build, row.case, steps),
                         env_for(cfg.build, row.case, llm.UNLIMITED), cfg.timeout)
            row.reference[which] = r.checksum if r.ok else None


def identical(row, which):
    r = getattr(row, which)
    # The host-placement run has as many steps as the node-placement one: the same reference.
    return r is not None and r.ok and r.checksum == row.reference.get(
        "swap" if which == "host" else which)


def _s(v):
    return "—" if v is None else f"{v:.3f} s"


def _x(a, b):
    return "—" if a is None or b is None or b == 0 else f"{a / b:.2f}×"


def _failure(r):
    return "out of memory" if r.oom_line() else f"failed (rc {r.rc})"


def _outcome(row, which):
    r = getattr(row, which)
    if r is None:
        return "—"
    if not r.ok:
        return _failure(r)
    return _s(r.steady_time()) + ("" if identical(row, which) else " (results differ!)")


def _plain(row):
    r = row.plain
    if r is None:
        return "—"
    return "trained (the limit did not bind)" if r.ok else _failure(r)


def _steady_time(r):
    return r.steady_time() if r is not None and r.ok else None


def _ratio(a, b):
    return "—" if a is None or b is None or b == 0 else f"{a / b:.0%}"


def section(rows):
    """The markdown of the pipeline rows."""
    out = ["", "## Pipeline parallelism: one process, several devices (issue 16)", "",
           "One process drives a 1F1B pipeline, one stage per simulated device "
           "(`chameleon-train-sim --pipeline N`, `SIMGPU_DEVICES=N`, `h200-sxm`), at a "
           "per-device limit halfway between device 0's peak and the largest of the others', so "
           "only device 0 overflows (X₀ = its peak − the limit). The shim's executor serves "
           "device 0; the daemon plans device 0's tensors over the whole op stream (docs/policy.md, "
           "\"Several devices in one process\"). *Peer*: node placement on (the default): the "
           "daemon lends the process's room on its other devices beyond its peak there to its own "
           "swaps, copied over NVLink (docs/daemon.md, \"A process's own devices\"); *host*: "
           "`CHAMELEON_PLACEMENT=host`, every swap over the host link. T_b: `chameleon-bound "
           "pipeline` with each stage's peak and compute time (`device <i> busy`), over the host "
           "link (host) or NVLink (peer). Step times: median of the last 4 steps; steady figures "
           "are the peer run's.", "",
           "| workload | limit per device | X₀ | unlimited | plain | policy off "
           "| Chameleon, host | T_b host | host / T_b | Chameleon, peer | T_b peer | peer / T_b "
           "| peer × host | swapped bytes to peers | swap-ins ahead | fault-ins / evictions per "
           "step | STABLE at | planned device |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        if row.notes and not row.limit:
            out.append(f"| {row.case.name} | — | — | {_s(row.ref.steady_time() if row.ref else None)}"
                       + " | —" * 13 + f" | {'; '.join(row.notes)} |")
            continue
        peer, host = _steady_time(row.swap), _steady_time(row.host)
        tb, tb_peer = row.bound.get("bound_s"), row.peer_bound.get("bound_s")
        st = row.steady or {}
        ahead, share = st.get("ahead"), st.get("peer_share")
        pd = row.planned_device
        out.append(
            f"| {row.case.name} | {row.limit / 1e9:.2f} GB | "
            f"{(row.peaks[0] - row.limit) / 1e9:.2f} GB | {_s(row.ref.steady_time())} | "
            f"{_plain(row)} | {_outcome(row, 'off')} | "
            f"{_outcome(row, 'host')} | {_s(tb)} | {_ratio(tb, host)} | "
            f"{_outcome(row, 'swap')} | {_s(tb_peer)} | {_ratio(tb_peer, peer)} | "
            f"{_x(host, peer)} | {'—' if share is None else f'{share:.0%}'} | "
            f"{'—' if ahead is None else f'{ahead:.0%}'} | "
            f"{st.get('fault_ins', 0):.1f} / {st.get('evictions', 0):.1f} | "
            f"{row.stable_at if row.stable_at is not None else 'never'} | "
            f"{pd.get('device', '—')} ({pd.get('other_device_tensors', 0)} tensors of other "
            f"devices left out) |")
    notes = [f"- {r.case.name}: {n}" for r in rows for n in r.notes if r.limit]
    if notes:
        out += ["", *notes]
    bounds = [b for r in rows for b in (r.bound, r.peer_bound) if b.get("command")]
    out += ["", "The bound commands: " + "; ".join(f"`{b['command']}`" for b in bounds) + ".", ""]
    return "\n".join(out)
