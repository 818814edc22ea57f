"""docs/evaluation.md and its plots from the measurements."""
import os
import subprocess
import tempfile

from .measure import HOST_LINK

NM = "not measured"

MODEL = [  # simgpu's defaults (docs/simgpu.md, "Default parameters and their calibration")
    ("device", "A100-SXM4-80GB attributes (compute capability 8.0, 108 SMs)"),
    ("peak_flops", "2.6e14 flop/s (fp16 tensor-core rate, one peak for all dtypes)"),
    ("hbm_bandwidth", "1.5e12 B/s"),
    ("host_link_bandwidth", "2.5e10 B/s per direction (PCIe Gen4 x16, achieved)"),
    ("launch_latency_ns / copy_latency_ns / host_call_ns", "2000 / 1000 / 1000"),
    ("kernel time", "launch latency + max(flops / peak_flops, bytes / hbm_bandwidth)"),
]


def ratio(a, b):
    return a / b if a is not None and b else None


def fx(v, digits=2):
    return f"{v:.{digits}f}×" if v is not None else NM


def ms(t):
    return f"{t * 1e3:.3f}" if t is not None else NM


def mib(b):
    return f"{b / 2**20:.1f}"


def span(values):
    vals = [v for v in values if v is not None]
    return f"{min(vals):.2f}× … {max(vals):.2f}×" if vals else NM


def goal_cell(values, goal):
    """'met' or the honest distance, over every workload that was measured."""
    vals = [v for v in values if v is not None]
    if not vals:
        return NM
    worst, best = min(vals), max(vals)
    span = f"{worst:.2f}× … {best:.2f}×" if len(vals) > 1 else f"{worst:.2f}×"
    if worst >= goal:
        return f"**met** ({span})"
    met = sum(v >= goal for v in vals)
    return f"**not met**: {span}; {met} of {len(vals)} reach {goal}×, worst is {goal / worst:.1f}× short"


def verdict(m, which):
    r = getattr(m, which)
    if r is None:
        return NM
    if not r.ok:
        return f"failed (exit {r.rc})"
    return "yes" if m.identical(which) else "**NO**"


def rows(ms_):
    out = []
    for m in ms_:
        t_unl, t_swap, t_off, t_rc = m.t("ref"), m.t("swap"), m.t("off"), m.t("recompute")
        bound = m.bound_time()
        rel = {k: m.rel(k) for k in ("swap", "off", "recompute")}
        out.append(dict(m=m, unl=t_unl, swap=t_swap, off=t_off, rc=t_rc, rel=rel,
                        vs_unl=rel["swap"], vs_off=ratio(rel["swap"], rel["off"]),
                        vs_rc=ratio(rel["swap"], rel["recompute"]), bound=ratio(t_unl, bound),
                        need_bw=m.bandwidth_for(0.9),
                        ws_binds=(m.working_set_time() or 0) >= (bound or 0) > 0))
    return out


def outcome_table(rs):
    h = ["| workload | peak MiB | device MiB | plain at the limit | `--recompute` at the limit | "
         "identical: Chameleon / policy off | daemon: generations (stage, shifts) | "
         "daemon's step time: predicted / measured ms |",
         "|" + "---|" * 8]
    for r in rs:
        m = r["m"]
        plain = (f"exit {m.plain.rc}" + (" (out of memory)" if m.plain.oom_line() else "")
                 if m.plain else NM)
        rc_lim = m.recompute_at_limit
        rc_cell = ("—" if m.workload.kind != "trainer" else NM if rc_lim is None else
                   "trains" if rc_lim.ok else
                   f"exit {rc_lim.rc}" + (" (out of memory)" if rc_lim.oom_line() else ""))
        d = m.swap.daemon if m.swap is not None else {}
        gens = d.get("policy", {}).get("generation")
        regen = (f"{gens} ({d.get('stage')}, {d.get('shifts', 0)} shifts)" if gens is not None
                 else NM)
        pol = d.get("policy") or {}
        chosen = pol.get("chosen") or pol.get("in_force") or {}
        pred = (f"{chosen['predicted_iteration_s'] * 1e3:.3f} / "
                f"{chosen['measured_iteration_s'] * 1e3:.3f}"
                if chosen.get("predicted_iteration_s") is not None
                and chosen.get("measured_iteration_s") is not None else NM)
        h.append(f"| {m.workload.name} | {mib(m.ref.peak)} | {mib(m.memory)} | {plain} | "
                 f"{rc_cell} | {verdict(m, 'swap')} / {verdict(m, 'off')} | {regen} | {pred} |")
    return "\n".join(h)


def performance_table(rs):
    h = ["| workload | step ms: unlimited / Chameleon / policy off / recompute | vs unlimited | "
         "vs recompute | vs policy off | transfer bound | stall fraction | "
         "swapped out MiB/step | counted stalls | host link for 0.9× |",
         "|" + "---|" * 10]
    for r in rs:
        m = r["m"]
        stall = (1 - r["vs_unl"]) if r["vs_unl"] is not None else None
        ex = m.swap.executor if m.swap is not None else {}
        steps = len(m.swap.times) if m.swap is not None and m.swap.times else 0
        out_mib = (f"{ex['swap_out_bytes'] / steps / 2**20:.1f}"
                   if ex.get("swap_out_bytes") is not None and steps else NM)
        need = f"{r['need_bw'] / 1e9:.0f} GB/s" if r["need_bw"] else NM
        h.append(f"| {m.workload.name} | "
                 f"{ms(r['unl'])} / {ms(r['swap'])} / {ms(r['off'])} / {ms(r['rc'])} | "
                 f"{fx(r['vs_unl'])} | {fx(r['vs_rc'])} | {fx(r['vs_off'])} | {fx(r['bound'])} | "
                 f"{f'{stall:.2f}' if stall is not None else NM} | {out_mib} | "
                 f"{ex.get('stalls', NM)} | {need} |")
    return "\n".join(h)


def capacity_rows(caps):
    h = ["| workload | dimension | device memory | plain: largest | Chameleon: largest | ratio | "
         "tried |", "|---|---|---|---|---|---|---|"]
    for c in caps:
        got = c["chameleon"]
        rat = f"{got / c['plain']:.0f}×" if got and c["plain"] else NM
        tried = ", ".join(f"{v}: {'ok' if ok else 'failed'}" for v, ok in c["tried"]) or NM
        memory = (f"{c['memory'] / 1e9:.1f} GB" if c["memory"] >= 1 << 30 else
                  f"{mib(c['memory'])} MiB")
        h.append(f"| {c.get('workload', NM)} | {c['dim']} | {memory} | {c['plain'] or NM} | "
                 f"{got or NM} | {rat} | {tried} |")
    return "\n".join(h)


def gnuplot(script, data, out_png):
    with tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False) as f:
        f.write(data)
    try:
        subprocess.run(["gnuplot"], input=script.replace("DATA", f.name).replace("OUT", out_png),
                       text=True, check=True, capture_output=True)
        return True
    except (OSError, subprocess.CalledProcessError) as e:
        return str(e)
    finally:
        os.unlink(f.name)


def plot_throughput(rs, out_png):
    lines = []
    for r in rs:
        v = [r["vs_unl"], r["rel"]["off"], r["rel"]["recompute"], r["bound"]]
        name = '"' + r["m"].workload.name.replace('"', "'") + '"'
        lines.append(name + " " + " ".join(f"{x:.4f}" if x is not None else "?" for x in v))
    script = """set terminal pngcairo size 1100,520 font ',10'
set output 'OUT'
set title 'Throughput relative to unlimited memory (simgpu, device memory = peak / 4)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set yrange [0:1.4]
set ylabel 'relative throughput (unlimited = 1)'
set xtics rotate by -25 noenhanced
set key top right
set datafile missing '?'
set arrow from graph 0, first 0.9 to graph 1, first 0.9 nohead dt 2 lc rgb 'red'
plot 'DATA' using 2:xtic(1) title 'Chameleon (daemon policy)', '' using 3 title 'policy off (safety net)', '' using 4 title '--recompute (unlimited memory)', '' using 5 title 'transfer bound at 25 GB/s'
"""
    return gnuplot(script, "\n".join(lines) + "\n", out_png)


def plot_bandwidth(sweep, out_png):
    """Measured points, and each workload's bound as a curve: t / max(t, bytes / bandwidth)."""
    blocks, plots = [], []
    for i, (name, sw) in enumerate(sweep.items()):
        blocks.append("\n".join(f"{b / 1e9:.2f} {r if r is not None else '?'}"
                                for b, r, _ in sorted(sw["points"])))
        curve = []
        for k in range(0, 61):  # 8 .. 512 GB/s, log-spaced
            bw = 8e9 * 2 ** (k / 10)
            if sw["t"]:
                curve.append(f"{bw / 1e9:.2f} {sw['t'] / max(sw['t'], sw['bytes'] / bw):.4f}")
        blocks.append("\n".join(curve) or "8 ?")
        plots.append(f"'DATA' index {2 * i} using 1:2 with points pt 7 ps 1.3 lc {i + 1} "
                     f"title '{name}: Chameleon'")
        plots.append(f"'DATA' index {2 * i + 1} using 1:2 with lines dt 2 lc {i + 1} "
                     f"title '{name}: transfer bound'")
    script = f"""set terminal pngcairo size 900,520 font ',10'
set output 'OUT'
set title 'Sensitivity to the host link bandwidth (device memory = peak / 4)'
set logscale x 2
set xrange [8:512]
set xlabel 'host link bandwidth per direction, GB/s'
set ylabel 'throughput relative to unlimited'
set yrange [0:1.2]
set key bottom right noenhanced
set datafile missing '?'
plot {', '.join(plots)}
"""
    return gnuplot(script, "\n\n\n".join(blocks) + "\n", out_png)


def goals(rs, caps):
    vs = lambda k: [r[k] for r in rs]  # noqa: E731
    cap_vals = [c["chameleon"] / c["plain"] for c in caps if c["chameleon"] and c["plain"]]
    replay_cap = [4.0 if r["m"].identical("swap") or r["m"].identical("off") else 0.0 for r in rs
                  if r["m"].workload.kind == "replay" and (r["m"].swap or r["m"].off)]
    trainer_rc = [r["vs_rc"] for r in rs if r["m"].workload.kind == "trainer"]
    return "\n".join([
        "| goal | result |", "|---|---|",
        f"| largest batch / sequence that trains, Chameleon vs plain, same device memory: ≥ 4× | "
        f"{goal_cell(cap_vals, 4)} (the small trainer and the model-shaped workloads, table "
        f"\"Largest shape\"); replay traces training at peak / 4: "
        f"{goal_cell(replay_cap, 4) if replay_cap else NM} |",
        f"| simulated throughput vs full recomputation (`--recompute`): ≥ 1.3× | "
        f"{goal_cell(trainer_rc, 1.3)} |",
        f"| vs the same shim with the policy off (safety net only): ≥ 2× | "
        f"{goal_cell(vs('vs_off'), 2)} |",
        f"| vs unlimited memory: ≥ 0.9× | {goal_cell(vs('vs_unl'), 0.9)} |",
        f"| (not a goal: the transfer bound, the best any policy can reach at 25 GB/s) | "
        f"{span(vs('bound'))} of unlimited |",
        f"| (not a goal: the most any policy could gain over policy off, bound / policy off) | "
        f"{span([ratio(r['bound'], r['rel']['off']) for r in rs])} |",
    ])


def sweep_table(sweep):
    h = ["| workload | host link GB/s | Chameleon vs unlimited | transfer bound |",
         "|---|---|---|---|"]
    for name, sw in sweep.items():
        for b, rel, bd in sorted(sw["points"]):
            h.append(f"| {name} | {b / 1e9:g} | {fx(rel)} | {fx(bd)} |")
    return "\n".join(h)


def notes(rs):
    out = []
    for r in rs:
        for n in r["m"].notes:
            out.append(f"- {r['m'].workload.name}: {n}")
    return "\n".join(out) or "- none"


def reading(rs):
    """The physics in one paragraph, from the measured numbers."""
    ws_low = [r for r in rs if r["bound"] is not None and r["bound"] < 0.9 and r["ws_binds"]]
    low = [r for r in rs if r["bound"] is not None and r["bound"] < 0.9 and not r["ws_binds"]]
    high = [r["m"].workload.name for r in rs if r["bound"] is not None and r["bound"] >= 0.9]
    eff = [r["vs_unl"] / r["bound"] for r in rs if r["vs_unl"] and r["bound"]]
    if not low and not high and not ws_low:
        return NM
    text = ""
    if low:
        bounds = [r["bound"] for r in low]
        need = [r["need_bw"] / 1e9 for r in low if r["need_bw"]] or [float("nan")]
        text += (f"For {len(low)} of the {len(low) + len(high) + len(ws_low)} workloads, at most "
                 f"{min(bounds):.2f}×–{max(bounds):.2f}× of the unlimited throughput is reachable "
                 f"by any swapping policy on this simulated machine: three quarters of the peak must "
                 f"leave over a 25 GB/s link before the peak and come back after it every step, and "
                 f"these workloads compute for far less time than that (small fp32 models whose "
                 f"kernels are mostly memory-bound at 1.5 TB/s; ResNet moves 2.2 GB each way in a "
                 f"20 ms step). 0.9× would need "
                 f"{min(need):.0f}–{max(need):.0f} GB/s per direction. For them the goals against "
                 f"unlimited memory and against `--recompute` (one extra forward pass) are out of "
                 f"reach for any policy. ")
    for r in ws_low:
        ws = r["m"].working_set
        need = f"{r['need_bw'] / 1e9:.0f} GB/s" if r["need_bw"] else "no host link"
        windows = ws.get("tensor_windows", 0)
        text += (f"For {r['m'].workload.name} the bytes are not the limit but the working sets: "
                 f"at {ws['boundaries']} pairs of consecutive ops the tensors of both do not fit "
                 f"the limit together, so {ws['out_bytes'] / 1e9:.1f} GB must leave between the "
                 f"two ops of each pair while the compute stream waits (a copy cannot start "
                 f"before the last kernel that may write its tensor)")
        if windows:
            text += (f", and {windows} tensors pushed out for a stretch of ops must come back "
                     f"after it and before their next read, with too little compute in between "
                     f"to hide the copies")
        text += (f": {ws['stall_s']:.3f} s of waiting a step on top of "
                 f"{ws['compute_s']:.3f} s of compute, at most {r['bound']:.2f}× of unlimited "
                 f"(the working-set bound, docs/policy.md); 0.9× would need {need}. ")
    if high:
        text += f"The link is not the limit for: {', '.join(high)}. "
    text += "What the implementation controls is how close it gets to the bound"
    text += (f": measured Chameleon throughput is {min(eff):.0%}–{max(eff):.0%} of it (at 400 GB/s "
             f"see the sweep below)." if eff else " (not measured).")
    off_eff = [r["rel"]["off"] / r["bound"] for r in rs if r["rel"]["off"] and r["bound"]]
    if off_eff:
        text += (f" The safety net alone (policy off) already reaches {min(off_eff):.0%}–"
                 f"{max(off_eff):.0%} of the bound where it moves little more than the bytes the "
                 f"bound moves, so the ≥ 2× goal over it is out of reach wherever that is above 50%.")
    return text


def markdown(meta, rs, caps, sweep):
    plots = []
    for png, res in zip(("evaluation.png", "evaluation-bandwidth.png"), meta["plots"]):
        plots.append(f"![{png}]({png})" if res is True else f"(plot {png} not drawn: {res})")
    model = "\n".join(f"| `{k}` | {v} |" for k, v in MODEL)
    executor = ("available" if meta["executor"] else
                "**not available** — every Chameleon column below is *not measured*")
    return f"""# Evaluation: training beyond device memory on simgpu

Generated by `{meta['command']}` on {meta['date']} (revision {meta['revision']}, {meta['cpus']}
CPUs, {meta['wall']:.0f} s). Do not edit by hand: re-run the script. Every time below is
**simgpu's virtual time**, not wall time, and no number comes from a real GPU. Unlimited,
`--recompute` and plain runs are exactly reproducible (virtual time depends only on the sequence
of driver calls). Chameleon runs are not quite: the executor's event polls and the step at which
the daemon's policy arrives depend on wall-clock progress, so those columns can move a little
from run to run (the results must still be identical, or the script fails).

Executor probe: {executor} ({meta['probe']}).

## The simulated machine (simgpu defaults, docs/simgpu.md)

| parameter | value |
|---|---|
{model}

Each workload runs with `SIMGPU_MEMORY` = its peak / 4 (the trainer's or replayer's own `peak`
line from an unlimited run). Columns:

- **plain at the limit**: the same command without Chameleon (exit 3 = the workload's own
  out-of-memory error).
- **Chameleon**: `LD_PRELOAD=libchameleon.so`, `CHAMELEON_DEVICE_LIMIT` = the device memory, a
  private `chameleond` generating policies; **policy off**: the same with `CHAMELEON_SWAP_POLICY=off`
  (fault-in and OOM eviction only, no daemon). *Identical* = every `step … loss`, `shift`, `peak`
  and `checksum` line equals the unlimited run's.
- **step ms**: mean virtual step time over the last steps (the daemon reaches STABLE once every
  candidate policy has been measured, around step 30); recompute is `--recompute` with unlimited
  memory. The expandable row runs on a device as large as its peak with only
  `CHAMELEON_DEVICE_LIMIT` at peak / 4: that style sizes its address reservations by the device's
  memory (as PyTorch does), so a device of the limit's size stops it before the executor can help.
- **transfer bound**: the best any swapping policy can do on this machine. At the step's peak
  at least peak − limit bytes are off the device, so they leave and come back every step, each
  direction at the host link's bandwidth: a step takes at least (peak − limit) / 25 GB/s. Of
  those bytes, all but the ones live between steps (`persistent`, which the trainer and the
  replayer print) belong to this step alone: written before the peak (forward) and read after it
  (backward), so their way out ends before the peak and their way back starts after it, and the
  two directions cannot overlap for them. Hence a step takes at least max(unlimited step,
  (peak − limit) / bw, 2 · (peak − limit − persistent) / bw). For a replayed trace also the
  **working-set bound** (`chameleon-bound --profile`, docs/policy.md): where the tensors of two
  consecutive ops do not fit the limit together, whole tensors of the first must leave after it
  ends and before the second starts, while the compute stream waits; and a tensor that some op
  between two of its uses leaves no room for must leave after the first use and come back after
  that op, before the second, with only the ops in between to hide the copies (the replay's per-op
  times). The step is at least its compute plus those stalls. The column is the tighter of the two.
  **host link for 0.9×**: the bandwidth at which that bound reaches 0.9×.
- **stall fraction** = 1 − unlimited / Chameleon step time: the share of the step the compute stream
  waits (for transfers, or for the shim's own driver calls at 1 µs each). **Counted stalls**: the
  executor's synchronous waits (fault-ins, forced unmaps), from the shim's exit line.
- **generations**: policy generations the daemon published (its stage at the last poll before the
  process exited, sequence shifts seen); **predicted / measured**: the chosen candidate's iteration
  time as the policy simulator predicted it and as the shim measured it.

## Goals

{goals(rs, caps)}

{reading(rs)}

## Workloads at peak / 4

{outcome_table(rs)}

{performance_table(rs)}

{plots[0]}

## Largest shape that trains at a fixed device memory

Trainer `--layers 4 --hidden 64`, batch doubled at `--seq 256`, sequence doubled at `--batch 8`;
and model-shaped workloads on `h200-sxm` (`chameleon-train-sim --model …`, docs/trainer.md):
GPT-2 XL's micro-batch at sequence 1,024 and its sequence at micro-batch 8 (its positions stop
at 1,024), and on a whole H200 (150.8 GB, the preset's device memory) the micro-batch at sequence
4,096 of Llama-2 7B and of Llama-2 13B's shard under tensor parallelism of degree 2 (`--tp 2`). "Trains" = 2 steps complete with results identical to an unlimited run of the
same shape (the small trainer: every loss line; the model-shaped ones: the checksum), plain with
`SIMGPU_MEMORY` = the device memory, Chameleon on the same device with the executor limited to it
(safety net, `CHAMELEON_SWAP_POLICY=off` — capacity does not depend on the policy, only speed).
The search doubles from the plain maximum and stops at 8×.

{capacity_rows(caps) if caps else NM + " (skipped in --quick)"}

## Sensitivity to the host link

`SIMGPU_TOPOLOGY` with only `host_link_bandwidth` set: ×0.5 and ×2 for trainer S, and ×16 (400
GB/s, about a coherent CPU–GPU link such as NVLink-C2C) for S and ResNet, to separate what the
link allows from what the implementation reaches; everything else as above. (simgpu already had
the knob, so nothing was added to it.)

{sweep_table(sweep)}

{plots[1]}

## Notes from the runs

{notes(rs)}
"""
