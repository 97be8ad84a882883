#!/usr/bin/env bash
# The CUDA path in one short run (see bench/gpu_check.py): vLLM on CUDA, FSDP2 in bf16 on nccl, nccl weight
# sync into vLLM. Needs the GPU install of the README (pip install -e ".[vllm]"); `--cpu` checks the script here.
set -euo pipefail
cd "$(dirname "$0")/.."
python - <<'PY'
import importlib.util, torch
print(f"torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}, devices: {torch.cuda.device_count()}")
print("vllm installed:", importlib.util.find_spec("vllm") is not None)
PY
exec python bench/gpu_check.py "$@"
