#!/usr/bin/env bash
# Reproduces models/base, the base model `coa demo` starts from: next-token pretraining of the
# `micro` engine model on 39 generated worlds (seeds 201-239; 240 held out for the eval losses;
# never the demo's test seed 1) in two stages (articles and copy drills, then search-reading drills),
# then a weights-only release. About an hour on 2 CPU cores. Bits differ between CPUs (fp32 or bf16
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
npx coa engine release "$out/base-read/last" --out models/base
