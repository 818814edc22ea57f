"""scripts/evaluate's helpers: run workloads on simgpu, with and without Chameleon, and report."""
