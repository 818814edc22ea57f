"""The LLM-scale section of docs/evaluation.md (llm.py's rows): a table per point, the issue's
goals with met / missed, and one plot of throughput against limit / peak."""
from . import llm
from .report import NM, gnuplot

STAGE_BUDGET = 2 + 5 + 3  # m + n + 3 with the defaults m = 2, n = 5 (issue 18)


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def step_times(row):
    """Steady step times (virtual seconds): unlimited = its last step; policy off (under a daemon)
    and Chameleon = the last `window` steps of their runs."""
    t_ref = row.ref.times[-1] if row.ref and row.ref.ok and row.ref.times else None
    t_off = (mean(row.off.times[-row.case.window:]) if row.off is not None and row.off.ok
             else None)
    t_swap = (mean(row.swap.times[-row.case.window:]) if row.swap is not None and row.swap.ok
              else None)
    t_rc = (row.recompute.times[-1] if row.recompute is not None and row.recompute.ok
            and row.recompute.times else None)
    return t_ref, t_off, t_swap, t_rc


def figures(row):
    t_ref, t_off, t_swap, t_rc = step_times(row)
    ok = row.bound.get("status") == "ok"
    tb = row.bound.get("bound_s") if ok else None
    tw = row.bound.get("windowed_s", tb) if ok else None
    rel = lambda t: t_ref / t if t_ref and t else None  # noqa: E731
    return dict(t_ref=t_ref, t_off=t_off, t_swap=t_swap, t_rc=t_rc, tb=tb, tw=tw,
                reachable=(tb / tw if tb and tw else None),
                of_windowed_swap=(tw / t_swap if tw and t_swap else None),
                of_windowed_off=(tw / t_off if tw and t_off else None),
                rel_swap=rel(t_swap), rel_off=rel(t_off), rel_rc=rel(t_rc), rel_tb=rel(tb),
                of_bound_swap=(tb / t_swap if tb and t_swap else None),
                of_bound_off=(tb / t_off if tb and t_off else None))


def cell(v, fmt="{:.2f}"):
    return fmt.format(v) if v is not None else NM


def stable_at(row):
    """'STABLE at iteration N' from the daemon's polled views (runs.Daemon.first_stable), and the
    final generation in force (stats file)."""
    if row.swap is None:
        return None, None
    return (f"STABLE at it. {row.stable_at}" if row.stable_at is not None else "never STABLE",
            row.steady.get("generation"))


def table(rows):
    h = ["| workload | machine | limit / peak | peak GB | plain | `--recompute` at the limit | "
         "step s: unlimited / policy off / Chameleon | T_b s | T_w s | × unlimited: off / "
         "Chameleon / T_b | of T_b: off / Chameleon | of T_w: off / Chameleon | identical: off, closest size / off / Chameleon | daemon (final generation) | "
         "steady: ahead, fault-ins, evictions | "
         "out / (peak − limit): off, closest size / off / Chameleon | "
         "wait / predicted ms | wall s/step: Chameleon |",
         "|" + "---|" * 18]
    for row in rows:
        f = figures(row)
        c = row.case
        plain = NM if row.plain is None else ("fits" if row.plain.ok else
                                               "out of memory" if row.plain.oom_line() else
                                               f"exit {row.plain.rc}")
        rc = NM if row.recompute is None else (
            f"{f['rel_rc']:.2f}×" if f["rel_rc"] is not None else
            "out of memory" if row.recompute.oom_line() else f"exit {row.recompute.rc}")
        st = row.steady
        ahead = (f"{st['ahead']:.0%}, {st['fault_ins']:.0f}, {st['evictions']:.0f}"
                 if st.get("ahead") is not None else NM)
        # At limit = peak no byte must leave: the ratio has no denominator.
        out_cell = ("n/a (peak − limit = 0)" if row.ref and row.ref.peak <= row.limit else
                    f"{cell(closest_size_ratio(row))} / "
                    f"{cell(row.off_steady.get('out_per_excess'))} / "
                    f"{cell(st.get('out_per_excess'))}")
        wait = (f"{st['wait_s'] * 1e3:.1f} / {st['predicted_s'] * 1e3:.1f}"
                if st.get("iterations") else NM)
        stage, gen = stable_at(row)
        wall = (row.swap.wall_s / len(row.swap.times) if row.swap is not None and row.swap.times
                else None)
        ident = " / ".join(identical_cell(row, w) for w in ("off_closest", "off", "swap"))
        h.append(
            f"| {c.name} | {c.machine} | {c.fraction:.2f} | "
            f"{row.ref.peak / 1e9:.1f} | {plain} | {rc} | "
            f"{cell(f['t_ref'], '{:.3f}')} / {cell(f['t_off'], '{:.3f}')} / "
            f"{cell(f['t_swap'], '{:.3f}')} | {cell(f['tb'], '{:.3f}')} | "
            f"{cell(f['tw'], '{:.3f}')} | "
            f"{cell(f['rel_off'])} / {cell(f['rel_swap'])} / {cell(f['rel_tb'])} | "
            f"{cell(f['of_bound_off'], '{:.0%}')} / {cell(f['of_bound_swap'], '{:.0%}')} | "
            f"{cell(f['of_windowed_off'], '{:.0%}')} / {cell(f['of_windowed_swap'], '{:.0%}')} | "
            f"{ident} | {stage or NM} ({gen if gen is not None else NM}) | {ahead} | "
            f"{out_cell} | {wait} | {cell(wall, '{:.1f}')} |")
    return "\n".join(h)


def closest_size_ratio(row):
    """Bytes the safety net without a daemon (closest-size eviction) moved out per step, all its
    steps, over peak − limit, the bytes that must leave; None where none must (limit = peak: the
    ratio has no denominator). The daemon run's figure is its steady iterations' (llm.steady)."""
    r = row.off_closest
    if r is None or not r.ok or not r.times or not row.ref or row.ref.peak <= row.limit:
        return None
    return r.executor.get("swap_out_bytes", 0) / len(r.times) / (row.ref.peak - row.limit)


def identical_cell(row, which):
    r = getattr(row, which)
    if r is None:
        return NM
    if not r.ok:
        return f"failed (exit {r.rc})"
    return "yes" if llm.identical(row, which) else "**NO**"


def goal(values, target, fmt="{:.0%}", higher=True):
    vals = [v for v in values if v is not None]
    if not vals:
        return NM
    worst = min(vals) if higher else max(vals)
    best = max(vals) if higher else min(vals)
    met = sum((v >= target) if higher else (v <= target) for v in vals)
    rng = f"{fmt.format(worst)} … {fmt.format(best)}"
    return (f"**met** ({rng})" if met == len(vals) else
            f"**not met**: {rng}; {met} of {len(vals)} points")


def goals(rows):
    fs = [figures(r) for r in rows]
    ahead = [r.steady.get("ahead") for r in rows]
    evict = [r.steady.get("evictions") for r in rows if r.steady.get("iterations")]
    off_out = [r.off_steady.get("out_per_excess") for r in rows]
    wait = [abs(r.steady["wait_s"] - r.steady["predicted_s"]) / r.steady["predicted_s"]
            for r in rows if r.steady.get("iterations") and r.steady.get("predicted_s")]
    near = [f["rel_swap"] for f in fs if f["rel_tb"] is not None and f["rel_tb"] >= 0.97]
    return "\n".join([
        "| goal (issue 18) | result over the points above |", "|---|---|",
        f"| ≥ 90 % of the transfer bound, Chameleon | "
        f"{goal([f['of_bound_swap'] for f in fs], 0.9)} |",
        f"| (policy off, for comparison) | {goal([f['of_bound_off'] for f in fs], 0.9)} |",
        f"| (not a goal: the most of T_b any policy can reach, T_b / T_w) | "
        f"{goal([f['reachable'] for f in fs], 0.9)} |",
        f"| ≥ 90 % of the windowed bound T_w, Chameleon | "
        f"{goal([f['of_windowed_swap'] for f in fs], 0.9)} |",
        f"| (policy off, for comparison) | {goal([f['of_windowed_off'] for f in fs], 0.9)} |",
        f"| ≥ 0.95× unlimited where T_b allows ≥ 0.97× | {goal(near, 0.95, '{:.2f}×')} |",
        f"| prefetch ratio ≥ 95 % in steady state | {goal(ahead, 0.95)} |",
        f"| 0 evictions in steady state | {goal(evict, 0, '{:.0f}', higher=False)} |",
        f"| safety net ≤ 2 × (peak − limit) per step (Belady, under a daemon) | "
        f"{goal(off_out, 2.0, '{:.2f}', False)} |",
        f"| (closest-size rule, no daemon, for comparison) | "
        f"{goal([closest_size_ratio(r) for r in rows], 2.0, '{:.2f}', False)} |",
        f"| swap-in wait within ± 10 % of the plan's prediction | "
        f"{goal(wait, 0.10, '{:.0%}', higher=False)} |",
    ])


def plot(rows, out_png):
    """One panel line set per (workload, machine): Chameleon, policy off, recompute and T_b
    against limit / peak (1.0 = unlimited)."""
    groups = {}
    for r in rows:
        groups.setdefault((r.case.name, r.case.machine), []).append(r)
    blocks, plots = [], []
    for i, ((name, machine), rs) in enumerate(groups.items()):
        # 1.0 = unlimited, unless the grid measured the shim at limit = peak itself.
        lines = [] if any(r.case.fraction >= 1.0 for r in rs) else ["1.00 1 1 1 1"]
        for r in sorted(rs, key=lambda r: -r.case.fraction):
            f = figures(r)
            vals = [f["rel_swap"], f["rel_off"], f["rel_rc"], f["rel_tb"]]
            lines.append(f"{r.case.fraction:.2f} " +
                         " ".join(f"{v:.4f}" if v is not None else "?" for v in vals))
        blocks.append("\n".join(lines))
        label = f"{name} on {machine}"
        for col, what, style in ((2, "Chameleon", "lp pt 7"), (3, "policy off", "lp pt 4"),
                                 (4, "--recompute", "lp pt 2"), (5, "T_b", "l dt 2")):
            plots.append(f"'DATA' index {i} using 1:{col} with {style} lc {i + 1} "
                         f"title '{label}: {what}'")
    script = f"""set terminal pngcairo size 1000,600 font ',10'
set output 'OUT'
set title 'LLM scale: throughput relative to unlimited vs device limit / peak (simgpu)'
set xlabel 'device limit / peak'
set ylabel 'throughput (unlimited = 1)'
set xrange [1.05:0.2]
set yrange [0:1.1]
set key outside right noenhanced
set datafile missing '?'
plot {', '.join(plots)}
"""
    return gnuplot(script, "\n\n\n".join(blocks) + "\n", out_png)


def section(rows, png_name, plotted):
    if not rows:
        return ""
    cmds = sorted({r.bound.get("command", "") for r in rows if r.bound.get("command")})[:1]
    text = f"""
## LLM scale: model-shaped workloads against the transfer bound

`chameleon-train-sim --model …` (docs/trainer.md) on machine presets (docs/simgpu.md), unlimited
with `SIMGPU_MEMORY=4T`, then at limit = peak × fraction: plain, `--recompute` (plain, at the
limit), the shim with the policy off (the safety net alone), once under a private daemon, whose
boundaries give the default Belady eviction rule the previous iteration's op sequence (12 steps,
steady = the last 4; "off" in the columns), and once without a daemon, where no iteration is
known and the closest-size rule is used (3 steps, all counted; "off, closest size"), and the
shim with a private daemon and its policy (steady = the last 4 steps; the executor's per-iteration
records,
`CHAMELEON_STATS_FILE`, give the steady-state columns over the iterations under the final policy
generation after its first). **T_b** is `chameleon-bound` (policy::ComputeTransferBound, with the
preset's two host-link directions, the run's `optimizer-state` bytes and its `phases` forward
and backward times), e.g. `{cmds[0] if cmds else ''}`. "of T_b" = T_b / measured step (1 = the
bound reached). T_b lets the optimizer state (fp32 master weights and moments) cross the link at
any moment of the step; it cannot. Each of those bytes is updated by the optimizer phase that ends
every step and must be off the device at the next peak, so it can only leave between its update
and the peak (optimizer phase, then forward) and only come back between the peak and its next
update (backward, then optimizer phase). **T_w**, the windowed bound (`windowed_s` of the same
function, docs/policy.md "Transfer bound"), keeps those windows; it is never below T_b, and no
policy can be faster than T_w, so a point whose T_b / T_w is under 0.9 cannot reach 90 % of T_b.
"wait / predicted": the compute stream's virtual time waiting for swap-ins per steady step
(`swap_in_wait_ns`) against the installed plan's prediction of that wait (`predicted_in_wait_ns`:
the plan replayed on the executor's streams, docs/policy.md "Predicted stall"). The prediction
times each op of the profile by its own device time, measured with CUDA events during the
detailed iteration (docs/detection.md, "Per-op device time"). At limit / peak = 1.00 the limit
is the program's peak byte count and T_b the unlimited time: those rows show what the shim and its plan cost where
nothing must move (its footprint, whole 2 MiB chunks per tensor and the plan's reserve, is above
the program's bytes, so it still swaps a little; "out / (peak − limit)" has no denominator there).
That footprint is also why Chameleon's "out / (peak − limit)" stays above 1 with no fault-in:
T_b and T_w count the program's bytes, the plan must move the executor's. At GPT-2 XL B8
S1024's peak the executor holds 46.05 GB in whole chunks against the program's 44.90 GB, and
the plan keeps 1 % of the limit free (docs/policy.md, "Reserve"), so at 0.75 it moves 12.4 GB
where peak − limit is 11.2 GB (`chameleonctl dump-profile`, then `chameleon-policy`, 2026-12-06).

{table(rows)}

{goals(rows)}
"""
    if plotted is True:
        text += f"\n![LLM-scale throughput against limit / peak]({png_name})\n"
    notes = [f"- {r.case.name} on {r.case.machine} at {r.case.fraction:.2f}: {n}"
             for r in rows for n in r.notes]
    if notes:
        text += "\nNotes:\n" + "\n".join(notes) + "\n"
    return text
