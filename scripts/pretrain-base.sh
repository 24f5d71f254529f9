#!/usr/bin/env bash
# Reproduces models/base, the base model `coa demo` starts from: next-token pretraining of the
# `micro` engine model on 39 generated worlds (seeds 201-239; 240 held out for the eval losses;
# never the demo's test seed 1) in three stages (articles and copy drills, then search-reading drills,
# then drills that copy numbers into computations), then a weights-only release. About 80 minutes
# on 2 CPU cores. Bits differ between CPUs (fp32 or bf16
# kernels), the procedure does not. models/base/BASE.md records what each stage measured.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-runs}"
worlds=(--seeds 201-240 --exclude-seeds 1 --size small --max-hops 2)
npx coa train pretrain "${worlds[@]}" --mix articles,pages,lookup,chain,facts \
  --preset micro --context 1024 --tokenizer bpe:2048 \
  --steps 1500 --lr 3e-3 --batch-tokens 8192 --eval-every 100 --out "$out/base-micro"
npx coa train pretrain --from "$out/base-micro/last" "${worlds[@]}" \
  --mix search:0.3,facts,chain:0.3,lookup:0.5,articles,pages \
  --steps 1200 --lr 2e-3 --batch-tokens 8192 --eval-every 100 --out "$out/base-read"
npx coa train pretrain --from "$out/base-read/last" "${worlds[@]}" \
  --mix compute,search:0.3,facts:0.5,chain:0.2,lookup:0.3,articles:0.5,pages:0.5 \
  --steps 900 --lr 2e-3 --batch-tokens 8192 --eval-every 100 --out "$out/base-compute"
npx coa engine release "$out/base-compute/last" --out models/base
