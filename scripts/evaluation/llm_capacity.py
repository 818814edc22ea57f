"""Capacity of model-shaped workloads (issue 18's goal: >= 4x plain): at a fixed device memory,
the largest micro-batch or sequence that trains plain and under Chameleon, each run's checksum
equal to an unlimited run of the same shape and steps. Chameleon runs the safety net without a
daemon (CHAMELEON_SWAP_POLICY=off): what fits does not depend on the policy, only how fast."""
import os
import tempfile
from dataclasses import dataclass

from . import llm, measure, runs

STEPS = 2


@dataclass
class Search:
    workload: str  # the row's name
    machine: str
    args: list     # the base shape; `dim` is set per try
    dim: str       # "micro-batch" or "seq"
    start: int     # the plain search doubles from here
    memory: int    # device memory (bytes), plain and Chameleon alike


def searches(quick):
    """Each dimension at a device memory where plain trains a few samples or tokens and stops
    before the model's own limits (GPT-2's 1,024 positions). Peaks (unlimited runs on h200-sxm):
    GPT-2 XL S1024 B4 33.4 GB, B8 44.9 GB; B8 S128 25.0 GB, S256 27.6 GB; Llama-2 7B S4096 B2
    130.0 GB, B4 165.7 GB, and Llama-2 13B's tensor-parallel shard (TP 2) S4096 B4 146.4 GB,
    against the H200's 150.8 GB."""
    if quick:
        return []
    gpt2 = "--model gpt2-xl --micro-batch 8 --seq 1024".split()
    llama = "--model llama2-7b --micro-batch 1 --seq 4096".split()
    llama13_tp2 = "--model llama2-13b --tp 2 --micro-batch 1 --seq 4096".split()
    return [
        Search("GPT-2 XL S1024", "h200-sxm", gpt2, "micro-batch", 1, 34_000_000_000),
        Search("GPT-2 XL B8", "h200-sxm", gpt2, "seq", 128, 26_000_000_000),
        Search("Llama-2 7B S4096", "h200-sxm", llama, "micro-batch", 1, 150_754_820_096),
        Search("Llama-2 13B TP2 S4096", "h200-sxm", llama13_tp2, "micro-batch", 1,
               150_754_820_096),
    ]


def search(cfg, s):
    """One capacity row, in the shape measure.capacity returns."""
    b = cfg.build

    def case(v):
        args = list(s.args)
        i = args.index("--" + s.dim)
        args[i + 1] = str(v)
        return llm.Case(f"{s.workload} {s.dim} {v}", s.machine, args, 1.0)

    def trains(v, chameleon):
        c = case(v)
        cfg.log(f"  {c.name}: {'Chameleon' if chameleon else 'plain'} at {s.memory} B")
        env = llm.env_for(b, c, s.memory)
        with tempfile.TemporaryDirectory(prefix="chameleon-capacity-") as tmp:
            if chameleon:
                env.update(llm.shim(b, s.memory, os.path.join(tmp, "stats.jsonl"), policy=False))
            r = runs.run(llm.argv(b, c, STEPS), env, cfg.timeout)
        if not r.ok:
            return False
        ref = runs.run(llm.argv(b, c, STEPS), llm.env_for(b, c, llm.UNLIMITED), cfg.timeout)
        return ref.ok and ref.checksum == r.checksum

    out = {"workload": f"{s.workload} ({s.machine})", "dim": s.dim, "memory": s.memory}
    out.update(measure.largest(trains, s.start, cfg.executor))
    return out
