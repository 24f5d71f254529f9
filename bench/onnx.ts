// Issue 18's "measure an alternative runtime for generation": one decode step of `micro` and `tiny`
// exported to ONNX (bench/onnx_step.py) and run by ONNX Runtime for Node at batch 1, greedy, against
// the engine's own in-process decode of the same fresh model (fp32 and bf16, one thread): tokens per
// second, and whether the ids and logprobs agree. onnxruntime-node is not a dependency of coa (288 MB,
// and its install script downloads GPU files): `npm install --no-save --ignore-scripts
// onnxruntime-node`, then `npm run bench -- onnx`.

import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pythonReference } from "./python-reference.js";

/** What this bench uses of onnxruntime-node's API. */
interface Ort {
  InferenceSession: {
    create(
      file: string,
      options: { intraOpNumThreads: number; graphOptimizationLevel: "all" },
    ): Promise<Session>;
  };
  Tensor: new (type: string, data: Float32Array | BigInt64Array, dims: number[]) => OrtTensor;
}
interface OrtTensor {
  data: Float32Array;
}
interface Session {
  run(feeds: Record<string, OrtTensor>): Promise<Record<string, OrtTensor>>;
}

interface Reference {
  params: number;
  layers: number;
  heads: number;
  head_dim: number;
  prompt: number[];
  ids: number[];
  logprobs: number[];
  torch_tokens_per_s: { fp32: number; bf16: number };
}

/** Greedy decoding through the exported step: the prompt one id at a time, then `ref.ids.length` timed tokens. */
async function decode(ort: Ort, session: Session, ref: Reference) {
  const empty = () =>
    new ort.Tensor("float32", new Float32Array(0), [ref.layers, 1, ref.heads, 0, ref.head_dim]);
  let past = { k: empty(), v: empty() };
  let logp: ArrayLike<number> = [];
  const step = async (id: number) => {
    const ids = new ort.Tensor("int64", BigInt64Array.from([BigInt(id)]), [1, 1]);
    const out = await session.run({ ids, past_k: past.k, past_v: past.v });
    past = { k: out.present_k!, v: out.present_v! };
    logp = out.logp!.data;
  };
  for (const id of ref.prompt) await step(id);
  const ids: number[] = [];
  const logprobs: number[] = [];
  const started = performance.now();
  for (let s = 0; s < ref.ids.length; s++) {
    let best = 0;
    for (let i = 1; i < logp.length; i++) if (logp[i]! > logp[best]!) best = i;
    ids.push(best);
    logprobs.push(logp[best]!);
    await step(best);
  }
  return { ids, logprobs, tokensPerS: ref.ids.length / ((performance.now() - started) / 1000) };
}

export async function run(): Promise<void> {
  const name = "onnxruntime-node";
  const ort = (await import(name).catch(() => null)) as Ort | null;
  if (!ort) {
    console.log(`skipped: ${name} is not installed (npm install --no-save --ignore-scripts ${name})`);
    return;
  }
  const dir = await mkdtemp(join(tmpdir(), "coa-bench-onnx-"));
  for (const preset of ["micro", "tiny"]) {
    const file = join(dir, `${preset}.onnx`);
    const ref = await pythonReference<Reference>("onnx_step.py", [preset, file]);
    const torch = ref.torch_tokens_per_s;
    const parts = [
      `torch (engine decode, 1 thread) fp32 ${torch.fp32.toFixed(0)}, bf16 ${torch.bf16.toFixed(0)}`,
    ];
    for (const threads of [1, 2]) {
      const session = await ort.InferenceSession.create(file, {
        intraOpNumThreads: threads,
        graphOptimizationLevel: "all",
      });
      await decode(ort, session, ref); // warm-up
      const runs = [
        await decode(ort, session, ref),
        await decode(ort, session, ref),
        await decode(ort, session, ref),
      ];
      const best = Math.max(...runs.map((r) => r.tokensPerS));
      const last = runs.at(-1)!;
      const same = last.ids.every((t, i) => t === ref.ids[i]);
      const diff = Math.max(...last.logprobs.map((x, i) => Math.abs(x - ref.logprobs[i]!)));
      parts.push(
        `ONNX Runtime ${threads} thread${threads > 1 ? "s" : ""} ${best.toFixed(0)} (ids ${same ? "equal" : "differ"}, max |Δ logprob| ${diff.toExponential(1)})`,
      );
    }
    console.log(
      `${preset} ${(ref.params / 1e6).toFixed(2)}M params, batch 1, greedy tok/s: ${parts.join(" · ")}`,
    );
  }
  console.log("target (issue 18): tiny ≥ 2,000 tok/s at batch 1");
}
