#!/usr/bin/env bash
# Real-GPU check of a prebuilt Chameleon (builds nothing; not run in CI). One call shows the
# machine's figures, interposition and swapping:
#  1. chameleon-probe: host<->device bandwidth per NUMA node, peer bandwidth, VMM call latency
#     (table and SIMGPU_TOPOLOGY YAML);
#  2. train_tiny.py with and without LD_PRELOAD=libchameleon.so in three PyTorch allocator modes
#     (default, expandable_segments:True, no caching via PYTORCH_NO_CUDA_MEMORY_CACHING=1);
#  3. once more under CHAMELEON_DEVICE_LIMIT = half of the loop's peak (through chameleon-run,
#     with a private chameleond, when it is found next to the shim);
#  4. compare.py: the table and RESULT: PASS/FAIL (exit status 0/1). See README.md.
#
#   tests/gpu/run_gpu_check.sh --shim /path/to/libchameleon.so [--bin DIR] [--python python3]
#                              [--steps 40] [--out DIR] [--socket PATH] [--dry-run]
# --bin: the folder holding chameleon-probe and chameleon-run (default: the shim's ../bin).
# --out: where everything is written (default: $OUT if set, else gpu-check-out).
# --dry-run: check the arguments and print the commands instead of running them.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
shim=""
bin=""
python="python3"
steps=40
out="${OUT:-gpu-check-out}"
socket=""
dry=0
per_run_s=120  # one run of train_tiny.py takes well under a minute on a current GPU

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
need_value() { [[ $# -ge 2 && -n "$2" ]] || { echo "error: $1 needs a value" >&2; exit 2; }; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --shim) need_value "$@"; shim="$2"; shift 2 ;;
    --bin) need_value "$@"; bin="$2"; shift 2 ;;
    --python) need_value "$@"; python="$2"; shift 2 ;;
    --steps) need_value "$@"; steps="$2"; shift 2 ;;
    --out) need_value "$@"; out="$2"; shift 2 ;;
    --socket) need_value "$@"; socket="$2"; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "error: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
if [[ -z "$shim" || ! -f "$shim" ]]; then
  echo "error: --shim /path/to/libchameleon.so is required (got '${shim}')" >&2
  exit 2
fi
if ! [[ "$steps" =~ ^[0-9]+$ ]] || (( steps < 12 || steps > 10000 )); then
  echo "error: --steps must be an integer in 12..10000 (10 warm-up steps are not timed)" >&2
  exit 2
fi
shim="$(cd "$(dirname "$shim")" && pwd)/$(basename "$shim")"
bin="${bin:-$(dirname "$(dirname "$shim")")/bin}"
probe="$bin/chameleon-probe"
runner="$bin/chameleon-run"
if [[ ! -x "$probe" ]]; then
  echo "error: $probe not found (pass --bin DIR, the build's bin/ folder)" >&2
  exit 2
fi
[[ -x "$runner" ]] || runner=""

# run FILE CMD...: CMD's stdout to FILE (stderr to FILE.err), bounded by per_run_s; in a dry
# run only printed. A failed run is recorded in FILE.rc and judged by compare.py, not here.
run() {
  local file="$1"; shift
  if (( dry )); then
    printf '+'; printf ' %q' "$@"; printf ' > %q\n' "$file"
    return 0
  fi
  local rc=0
  timeout "$per_run_s" "$@" >"$file" 2>"$file.err" || rc=$?
  echo "$rc" >"$file.rc"
  (( rc == 0 )) || echo "  (exit status $rc: see $file.err)"
}

mkdir -p "$out"
echo "output: $out"
if (( ! dry )); then
  echo "shim: $shim"; ldd "$shim" | sed 's/^/  /'
  "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
fi

echo "== 1. chameleon-probe"
run "$out/probe.txt" "$probe"
run "$out/probe.yaml" "$probe" --yaml
(( dry )) || cat "$out/probe.txt"

# Without a daemon the shim tracks but publishes nothing; --socket points it at a running
# chameleond. A socket that does not exist costs nothing.
sock="${socket:-$out/no-daemon.sock}"
common=(CUBLAS_WORKSPACE_CONFIG=:4096:8)
shim_env=(LD_PRELOAD="$shim" CHAMELEON_SOCKET="$sock" CHAMELEON_DEBUG=stats CHAMELEON_LOG_LEVEL=warn)
for mode in default expandable nocache; do
  case "$mode" in
    default) alloc=() ;;
    expandable) alloc=(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) ;;
    nocache) alloc=(PYTORCH_NO_CUDA_MEMORY_CACHING=1) ;;
  esac
  echo "== 2. $mode ${alloc[*]:-}"
  run "$out/$mode.plain.out" env -u PYTORCH_CUDA_ALLOC_CONF -u PYTORCH_NO_CUDA_MEMORY_CACHING \
    "${common[@]}" "${alloc[@]}" "$python" "$here/train_tiny.py" --steps "$steps"
  run "$out/$mode.shim.out" env -u PYTORCH_CUDA_ALLOC_CONF -u PYTORCH_NO_CUDA_MEMORY_CACHING \
    "${common[@]}" "${alloc[@]}" "${shim_env[@]}" CHAMELEON_LOG_FILE="$out/$mode.shim.log" \
    "$python" "$here/train_tiny.py" --steps "$steps"
done

# Half of the default mode's peak (torch.cuda.max_memory_allocated of the plain run).
peak="$(awk '/^peak_bytes /{ print $2 }' "$out/default.plain.out" 2>/dev/null || true)"
if (( dry )); then peak="${peak:-2000000}"; fi
if [[ -z "$peak" ]]; then
  echo "error: no peak_bytes line in $out/default.plain.out; cannot choose the limit" >&2
else
  limit=$((peak / 2))
  echo "$limit" >"$out/limited.limit"
  limited_env=(CHAMELEON_DEBUG=stats CHAMELEON_LOG_LEVEL=warn CHAMELEON_LOG_FILE="$out/limited.shim.log"
               CHAMELEON_STATS_FILE="$out/limited.stats.jsonl")
  if [[ -n "$runner" ]]; then
    echo "== 3. limited: chameleon-run --limit $limit (peak $peak / 2)"
    sock_arg=()
    [[ -n "$socket" ]] && sock_arg=(--socket "$socket")
    run "$out/limited.shim.out" env -u PYTORCH_CUDA_ALLOC_CONF -u PYTORCH_NO_CUDA_MEMORY_CACHING \
      "${common[@]}" "${limited_env[@]}" CHAMELEON_LIBRARY="$shim" \
      "$runner" --limit "$limit" "${sock_arg[@]}" -- "$python" "$here/train_tiny.py" --steps "$steps"
  else
    echo "== 3. limited: CHAMELEON_DEVICE_LIMIT=$limit (peak $peak / 2; no chameleon-run in $bin)"
    run "$out/limited.shim.out" env -u PYTORCH_CUDA_ALLOC_CONF -u PYTORCH_NO_CUDA_MEMORY_CACHING \
      "${common[@]}" "${limited_env[@]}" LD_PRELOAD="$shim" CHAMELEON_SOCKET="$sock" \
      CHAMELEON_DEVICE_LIMIT="$limit" "$python" "$here/train_tiny.py" --steps "$steps"
  fi
fi

echo "== 4. comparison"
if (( dry )); then
  printf '+ %q %q %q\n' "$python" "$here/compare.py" "$out"
  exit 0
fi
"$python" "$here/compare.py" "$out"
