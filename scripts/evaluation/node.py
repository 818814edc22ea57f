"""Two-process rows of scripts/evaluate (issue 16): two trainers on two devices of one simulated
node (SIMGPU_DEVICES=2, one SIMGPU_NODE ledger, so each device's capacity is shared by both
processes as on a real node), one chameleond. Trainer A, a model-shaped workload on device 0,
runs under a limit far below its peak, where the host link alone cannot hide its swaps; trainer
B, a small one on device 1 (CUDA_VISIBLE_DEVICES=1), leaves most of that device free. With
node placement the daemon, whose config opts device 1 in for lending, leases B's spare HBM to A
and A's swaps go over NVLink (docs/daemon.md, "Node placement and leases"); with
`lending.placement: host` every swap goes over the host link. Each against A's transfer bound
over its link (`chameleon-bound`, policy::ComputeTransferBound, tested): T_b over the host
link, T_b over NVLink for the node-placement run."""
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from . import llm, runs

LENT_GPU = "0000:19:00.0"  # node device 1's PCI bus id (docs/simgpu.md: 0000:<0x18 + index>:00.0)
HELPER = "--layers 1 --hidden 64 --seq 128 --batch 8".split()  # B: well under 1 GB


@dataclass
class Row:
    a: llm.Row                                  # A's unlimited run, limit and host-link bound
    peer_bound: dict = field(default_factory=dict)
    runs: dict = field(default_factory=dict)    # placement -> runs.Result of A
    steady: dict = field(default_factory=dict)  # placement -> llm.steady() figures
    stable_at: dict = field(default_factory=dict)
    lease_bytes: int = 0                        # the largest lease on device 1 seen
    reference: str = None                       # the unlimited checksum of A's step count
    notes: list = field(default_factory=list)


def cases(quick):
    if quick:  # the code path only (scripts/test)
        return [llm.Case("GPT-2 XL B1 S256 (quick)", "h200-sxm",
                         "--model gpt2-xl --micro-batch 1 --seq 256".split(), 0.5, steps=4)]
    return [llm.Case("GPT-2 XL B8 S1024", "h200-sxm",
                     "--model gpt2-xl --micro-batch 8 --seq 1024".split(), 0.25, steps=20)]


def node_env(build, case, node):
    """The node both trainers see (no SIMGPU_MEMORY: each device has the preset's capacity)."""
    return {"LD_LIBRARY_PATH": build.simgpu_dir, "SIMGPU_MACHINE": case.machine,
            "SIMGPU_DEVICES": "2", "SIMGPU_NODE": node,
            "CHAMELEON_TOPOLOGY": llm.machine_file(build, case.machine)}


def _client_count(daemon):
    return len(daemon.ctl("clients").get("clients", []))


def _run_pair(cfg, row, placement, tmp):
    """B, then A under the limit, one daemon lending device 1 with `placement`; A's result."""
    b, case = cfg.build, row.a.case
    node = f"eval{os.getpid()}{placement}"
    config = os.path.join(tmp, f"{placement}.yaml")
    with open(config, "w") as f:
        f.write(f"lending:\n  placement: {placement}\n  gpus: [\"{LENT_GPU}\"]\n")
    stats = os.path.join(tmp, f"{placement}.jsonl")
    stop = os.path.join(tmp, f"stop-{placement}")
    env_b = dict(os.environ, **node_env(b, case, node))
    helper = None
    try:
        # A is the daemon's client 2: B connects first.
        with runs.Daemon(b, {"CHAMELEON_TOPOLOGY": llm.machine_file(b, case.machine)},
                         ["--config", config], client=2) as d:
            env_b.update({"LD_PRELOAD": b.shim, "CHAMELEON_SOCKET": d.socket,
                          "CUDA_VISIBLE_DEVICES": "1"})
            # B's own throughput is not measured: nice, so that A gets the cores it would have
            # on a node where each process has its own.
            helper = subprocess.Popen(["nice", "-n", "19", b.bin("chameleon-train-sim"), *HELPER,
                                       "--steps", "10000000", "--stop-file", stop],
                                      env=env_b, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 60
            while _client_count(d) < 1 and helper.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            if helper.poll() is not None or _client_count(d) < 1:
                row.notes.append(f"{placement}: the helper trainer did not connect")
                return None
            env = node_env(b, case, node)
            env.update(llm.shim(b, row.a.limit, stats, d.socket))
            poll_daemon = runs.start_poller(d)

            def poll():
                poll_daemon()
                for lease in d.ctl("leases").get("leases", []):
                    row.lease_bytes = max(row.lease_bytes, int(lease.get("bytes", 0)))
            cfg.log(f"  {case.name}: two processes, {placement} placement, {case.steps} steps")
            # Twice the per-process budget: A shares the machine with B.
            result = runs.run(llm.argv(b, case, case.steps), env, 2 * cfg.timeout, poll)
            d.poll()
            result.daemon = d.last
            row.stable_at[placement] = d.first_stable()
            row.steady[placement] = llm.steady(llm.read_stats(stats), row.a.limit,
                                               row.a.ref.peak)
            return result
    finally:
        if helper is not None:
            open(stop, "w").close()
            try:
                helper.wait(timeout=60)
            except subprocess.TimeoutExpired:
                helper.kill()
                helper.wait()
        ledger = f"/dev/shm/simgpu-node-{node}-{os.getuid()}"
        if os.path.exists(ledger):
            os.remove(ledger)


def measure(cfg, case):
    row = Row(llm.Row(case))
    if not llm.unlimited(cfg, row.a):
        return row
    try:
        figures = llm.machine_figures(llm.machine_file(cfg.build, case.machine))
        nvlink = figures["peer_link_bandwidth"]
        row.peer_bound = llm.bound(cfg.build, row.a, {"device_to_host_bandwidth": nvlink,
                                                      "host_to_device_bandwidth": nvlink})
    except (OSError, ValueError, KeyError) as e:
        row.peer_bound = {"status": "error", "error": str(e)}
        row.notes.append(f"no NVLink bound: {e}")
    if not cfg.executor:
        return row
    with tempfile.TemporaryDirectory(prefix="chameleon-node-") as tmp:
        for placement in ("node", "host"):
            result = _run_pair(cfg, row, placement, tmp)
            if result is not None:
                row.runs[placement] = result
                if not result.ok:
                    row.notes.append(f"{placement}: rc {result.rc}: "
                                     f"{result.oom_line() or result.stderr.strip()[-200:]}")
    r = runs.run(llm.argv(cfg.build, case, case.steps),
                 llm.env_for(cfg.build, case, llm.UNLIMITED), cfg.timeout)
    row.reference = r.checksum if r.ok else None
    return row


def identical(row, placement):
    r = row.runs.get(placement)
    return r is not None and r.ok and r.checksum == row.reference


def _time(row, placement):
    r = row.runs.get(placement)
    return r.steady_time() if r is not None and r.ok else None


def _s(v):
    return "—" if v is None else f"{v:.3f} s"


def _of(bound, t):
    return "—" if bound is None or not t else f"{bound / t:.0%}"


def _outcome(row, placement):
    r = row.runs.get(placement)
    if r is None:
        return "—"
    if not r.ok:
        return "out of memory" if r.oom_line() else f"failed (rc {r.rc})"
    return _s(r.steady_time()) + ("" if identical(row, placement) else " (results differ!)")


def section(rows):
    """The markdown of the two-process rows."""
    out = ["", "## Two processes on one node: peer HBM lent over NVLink (issue 16)", "",
           "Trainer A (the workload below, `h200-sxm`) on node device 0 under a limit far below "
           "its peak; trainer B (`chameleon-train-sim " + " ".join(HELPER) + "`, under the shim, "
           "no limit, `nice 19`) on node device 1 (`CUDA_VISIBLE_DEVICES=1`), which it leaves "
           "almost empty. One chameleond, lending device 1 (`lending.gpus`). *Node*: "
           "`lending.placement: node` (the daemon leases B's spare HBM to A, whose swaps go over "
           "NVLink at 370 GB/s); *host*: `lending.placement: host` (every swap over the host "
           "link, 46.8 / 54.8 GB/s). T_b and T_w as in the LLM rows, over the host link for the "
           "host run and over NVLink both ways for the node run. Step times: median of the last "
           "4 steps; STABLE at: A's iterations when a poll first saw it STABLE.", "",
           "| workload (A) | limit / peak | unlimited | Chameleon, host | T_b / T_w host "
           "| of T_w host | Chameleon, node | T_b / T_w NVLink | of T_w NVLink | node × host "
           "| lease on device 1 | swapped bytes to the peer | swap-ins ahead | fault-ins / "
           "evictions per step | STABLE at: host / node |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        a = row.a
        if not a.limit:
            why = "; ".join(row.notes + a.notes) or "not measured"
            out.append(f"| {a.case.name} |" + " — |" * 13 + f" {why} |")
            continue
        host, node = _time(row, "host"), _time(row, "node")
        tb, tw = a.bound.get("bound_s"), a.bound.get("windowed_s")
        pb, pw = row.peer_bound.get("bound_s"), row.peer_bound.get("windowed_s")
        st = row.steady.get("node") or {}
        share, ahead = st.get("peer_share"), st.get("ahead")
        stable = " / ".join("never" if row.stable_at.get(p) is None else str(row.stable_at[p])
                            for p in ("host", "node"))
        out.append(
            f"| {a.case.name} | {a.case.fraction:.2f} ({a.limit / 1e9:.1f} of "
            f"{a.ref.peak / 1e9:.1f} GB) | {_s(a.ref.steady_time())} | {_outcome(row, 'host')} | "
            f"{_s(tb)} / {_s(tw)} | {_of(tw, host)} | {_outcome(row, 'node')} | "
            f"{_s(pb)} / {_s(pw)} | {_of(pw, node)} | "
            f"{'—' if not host or not node else f'{host / node:.2f}×'} | "
            f"{row.lease_bytes / 1e9:.1f} GB | {'—' if share is None else f'{share:.0%}'} | "
            f"{'—' if ahead is None else f'{ahead:.0%}'} | "
            f"{st.get('fault_ins', 0):.1f} / {st.get('evictions', 0):.1f} | {stable} |")
    notes = [f"- {r.a.case.name}: {n}" for r in rows for n in r.notes + r.a.notes]
    if notes:
        out += ["", *notes]
    cmds = [b["command"] for r in rows for b in (r.a.bound, r.peer_bound) if b.get("command")]
    if cmds:
        out += ["", "The bound commands: " + "; ".join(f"`{c}`" for c in cmds) + "."]
    return "\n".join(out) + "\n"
