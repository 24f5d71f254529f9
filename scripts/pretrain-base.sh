#!/usr/bin/env bash
# Reproduces models/base, the base model `coa demo` starts from: next-token pretraining of the
# `micro` engine model on 39 generated worlds (seeds 201-239; 240 held out for the eval losses;
# never the demo's test seed 1), then a weights-only release. About 35 minutes on 2 CPU cores.
# Bits differ between CPUs (fp32 or bf16 kernels), the procedure does not.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-runs/base-micro}"
npx coa train pretrain --seeds 201-240 --exclude-seeds 1 --size small --max-hops 2 \
  --preset micro --context 1024 --tokenizer bpe:2048 \
  --steps 1500 --lr 3e-3 --batch-tokens 8192 --eval-every 100 --out "$out"
npx coa engine release "$out/last" --out models/base
