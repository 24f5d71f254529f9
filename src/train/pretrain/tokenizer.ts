import { type Tokenizer, tokenizerFlag, trainBpe } from "../../model/index.js";
import type { PretrainCorpus } from "./corpus.js";
import { docText } from "./drills.js";

/**
 * The vocabulary of a fresh base model: `bpe:N` learns a byte-level BPE (the one `coa distill
 * --tokenizer bpe:N` learns) from the training worlds' text only, so its fertility on the held-out
 * world shows whether unseen names still split into known pieces; anything else is a tokenizer file.
 */
export async function pretrainTokenizer(flag: string, corpus: PretrainCorpus): Promise<Tokenizer> {
  const wanted = await tokenizerFlag(flag);
  if (!("train" in wanted)) return wanted;
  return trainBpe(
    (function* () {
      for (const doc of corpus.train) yield docText(doc);
    })(),
    wanted.train,
  );
}
