#!/usr/bin/env bash
# Real-GPU check of a prebuilt libchameleon.so (builds nothing; not run in CI).
# Runs train_tiny.py with and without LD_PRELOAD=libchameleon.so under the three PyTorch
# allocator modes and prints a comparison (compare.py). See README.md.
#
#   tests/gpu/run_gpu_check.sh --shim /path/to/libchameleon.so [--python python3] [--steps 60]
#                              [--out DIR] [--socket /run/chameleon/chameleond.sock]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
shim=""
python="python3"
steps=60
out="gpu-check-out"
socket=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --shim) shim="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --socket) socket="$2"; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
if [[ -z "$shim" || ! -f "$shim" ]]; then
  echo "error: --shim /path/to/libchameleon.so is required" >&2
  exit 2
fi
shim="$(cd "$(dirname "$shim")" && pwd)/$(basename "$shim")"
mkdir -p "$out"
echo "shim: $shim"; ldd "$shim" | sed 's/^/  /'
"$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'

declare -A conf=(
  [default]=""
  [cudaMallocAsync]="backend:cudaMallocAsync"
  [expandable]="expandable_segments:True"
)
# Without a daemon the shim tracks but publishes nothing; pass --socket to a running chameleond
# to exercise the whole path. A socket that does not exist costs nothing.
sock="${socket:-$out/no-daemon.sock}"
for mode in default cudaMallocAsync expandable; do
  echo "== $mode (PYTORCH_CUDA_ALLOC_CONF='${conf[$mode]}')"
  env PYTORCH_CUDA_ALLOC_CONF="${conf[$mode]}" CUBLAS_WORKSPACE_CONFIG=:4096:8 \
    "$python" "$here/train_tiny.py" --steps "$steps" > "$out/$mode.plain.out"
  env PYTORCH_CUDA_ALLOC_CONF="${conf[$mode]}" CUBLAS_WORKSPACE_CONFIG=:4096:8 \
    LD_PRELOAD="$shim" CHAMELEON_SOCKET="$sock" CHAMELEON_DEBUG=stats \
    CHAMELEON_LOG_LEVEL=warn CHAMELEON_LOG_FILE="$out/$mode.shim.log" \
    "$python" "$here/train_tiny.py" --steps "$steps" > "$out/$mode.shim.out"
done
"$python" "$here/compare.py" "$out"
