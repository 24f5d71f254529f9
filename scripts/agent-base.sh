#!/usr/bin/env bash
# Reproduces models/agent-base, the base `coa demo` and `--quick` start from: models/base mid-trained on
# CoA trajectories the teacher MAS wrote on the train split of 24 of the base's own pretraining
# worlds (seeds 201-224: never the demo's training worlds 101-124 nor its test world 1), with the
# default demo's SFT recipe, then a weights-only release. World 240 (held out of the base's
# pretraining too) gives the learning curve. About 30 minutes on 2 CPU cores. Bits differ between
# CPUs (fp32 or bf16 kernels), the procedure does not. models/agent-base/BASE.md records what it measured.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-runs/agent-base}"
npx coa world generate --seeds 201-224 --size small --max-hops 2 --out "$out/worlds"
npx coa world generate --seed 240 --size small --max-hops 2 --out "$out/dev-world"
npx coa teach --tasks "$out/worlds" --split train --driver expert --limit 9600 --search-top-k 3 \
  --out "$out/teach"
npx coa distill --traces "$out/teach" --max-tokens 8192 --tokenizer models/base/tokenizer.json \
  --out "$out/data"
npx coa train sft --data "$out/data" --from models/base --context 2048 --steps 2500 --max-length 2048 \
  --lr 2e-3 --batch-tokens 8192 --dev-tasks "$out/dev-world" --dev-every 625 --dev-limit 20 \
  --max-turns 8 --max-tokens-per-turn 512 --search-top-k 3 --out "$out/sft"
npx coa engine release "$out/sft/last" --out models/agent-base
