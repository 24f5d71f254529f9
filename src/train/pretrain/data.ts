import type { SftSequence, Tokenizer } from "../../model/index.js";
import { deriveSeed, shuffled } from "../seeds.js";
import { packInOrder } from "../sft/batches.js";
import { type BatchSource, memoEpochs } from "../step-loop.js";
import type { PretrainConfig } from "./config.js";
import type { PretrainCorpus } from "./corpus.js";
import { DOC_KINDS, type DocKind, docText, type PretrainDoc } from "./drills.js";
import { type Fertility, fertility } from "./fertility.js";
import { encodeDoc, PackedStream, streamIds } from "./packing.js";

/** What `data.json` records about the text of a run. */
export interface PretrainData {
  tokenizer: { name: string; vocabSize: number };
  worlds: { train: number[]; eval: number };
  /** Training documents per kind (after the mix) and their tokens, EOS included. */
  documents: Partial<Record<DocKind, { documents: number; tokens: number }>>;
  /** One pass over the training text: its tokens in whole sequences, and the steps it makes. */
  epoch: { tokens: number; sequences: number; steps: number; sequencesPerStep: number };
  /** On the training worlds' text and names, and on the held-out world's, which the tokenizer never saw. */
  fertility: { train: Fertility; heldOut: Fertility };
  eval: {
    sequences: number;
    copyExamples: number;
    copyTokens: number;
    readExamples: number;
    readTokens: number;
    numberExamples: number;
    numberTokens: number;
  };
}

/** The tokenized text of a run: training batches, held-out sets, and their description. */
export interface PretrainText {
  batches: BatchSource;
  evals: {
    eval_loss: SftSequence[][];
    eval_copy_loss: SftSequence[][];
    eval_read_loss: SftSequence[][];
    eval_number_loss: SftSequence[][];
  };
  data: PretrainData;
}

type TextConfig = Pick<
  PretrainConfig,
  "worlds" | "batchTokens" | "maxLength" | "evalTokens" | "copyExamples" | "seed"
>;

/** Loss on every token that has a prefix to be predicted from. */
const allTokens = (ids: number[]): SftSequence => ({
  input_ids: ids,
  loss_mask: ids.map((_, i) => (i ? 1 : 0)),
});

function chunk<T>(xs: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < xs.length; i += size) out.push(xs.slice(i, i + size));
  return out;
}

/**
 * The held-out copy examples: each drill alone, loss only on the names and values it copies (the
 * question's entity into the first lookup, a name read into the next), cut to the sequence length.
 */
function copySequences(tok: Tokenizer, docs: readonly PretrainDoc[], maxLength: number): SftSequence[] {
  return docs.flatMap((doc) => {
    const { ids, copy } = encodeDoc(tok, doc);
    const seq = { input_ids: ids.slice(0, maxLength), loss_mask: copy.slice(0, maxLength) };
    seq.loss_mask[0] = 0;
    return seq.loss_mask.includes(1) ? [seq] : [];
  });
}

/** `copyExamples` of the held-out drills, drawn by `name`, batched for a copy loss. */
function heldOutCopies(
  tok: Tokenizer,
  drills: readonly PretrainDoc[],
  name: string,
  config: Pick<TextConfig, "copyExamples" | "batchTokens" | "maxLength" | "seed">,
) {
  const picked = shuffled(drills, deriveSeed(config.seed, name)).slice(0, config.copyExamples);
  const seqs = copySequences(tok, picked, config.maxLength);
  const batches = packInOrder(
    seqs.map((_, i) => i),
    seqs.map((s) => s.input_ids.length),
    config.batchTokens,
  ).map((b) => b.map((i) => seqs[i]));
  return {
    batches,
    examples: seqs.length,
    tokens: seqs.reduce((sum, s) => sum + s.loss_mask.filter((m) => m).length, 0),
  };
}

/**
 * Tokenizes a run's text. Pass `epoch` lays the training documents end to end in an order drawn from
 * (seed, epoch) and cuts `maxLength`-token sequences; a step takes floor(batchTokens / maxLength) of
 * them. Held out: the first `evalTokens` of the held-out world's text, packed the same way, and
 * `copyExamples` of its lookup and chain drills for the copy loss, of its search drills for the
 * read loss, and of its compute drills for the number loss.
 */
export function pretrainText(config: TextConfig, tok: Tokenizer, corpus: PretrainCorpus): PretrainText {
  const docs = corpus.train.map((d) => streamIds(tok, d));
  const perStep = Math.floor(config.batchTokens / config.maxLength);
  const pass = memoEpochs(
    (epoch) =>
      new PackedStream(
        docs,
        shuffled(
          docs.map((_, i) => i),
          deriveSeed(config.seed, "order", epoch),
        ),
        config.maxLength,
      ),
  );
  const steps = Math.floor(pass(0).count / perStep);
  if (steps === 0)
    throw new Error(
      `the training text holds ${pass(0).count} sequences of ${config.maxLength} tokens; one step takes ${perStep}`,
    );

  const evalDocs = corpus.eval.map((d) => streamIds(tok, d));
  const evalOrder = shuffled(
    evalDocs.map((_, i) => i),
    deriveSeed(config.seed, "eval"),
  );
  const evalPass = new PackedStream(evalDocs, evalOrder, config.maxLength);
  const evalSeqs = Array.from(
    { length: Math.min(evalPass.count, Math.ceil(config.evalTokens / config.maxLength)) },
    (_, k) => allTokens(evalPass.sequence(k)),
  );
  const copy = heldOutCopies(tok, corpus.copy, "copy", config);
  const read = heldOutCopies(tok, corpus.read, "read", config);
  const numbers = heldOutCopies(tok, corpus.numbers, "numbers", config);

  const size = (list: readonly PretrainDoc[], ids: readonly Int32Array[]) => ({
    chars: list.reduce((sum, d) => sum + docText(d).length, 0),
    tokens: ids.reduce((sum, x) => sum + x.length - 1, 0),
  });
  const documents: PretrainData["documents"] = {};
  corpus.train.forEach((d, i) => {
    const k = documents[d.kind] ?? { documents: 0, tokens: 0 };
    documents[d.kind] = { documents: k.documents + 1, tokens: k.tokens + docs[i].length };
  });
  return {
    batches: {
      count: () => steps,
      at: (epoch, index) =>
        Array.from({ length: perStep }, (_, j) => allTokens(pass(epoch).sequence(index * perStep + j))),
    },
    evals: {
      eval_loss: chunk(evalSeqs, perStep),
      eval_copy_loss: copy.batches,
      eval_read_loss: read.batches,
      eval_number_loss: numbers.batches,
    },
    data: {
      tokenizer: { name: tok.name, vocabSize: tok.vocabSize },
      worlds: { train: [...config.worlds.train], eval: config.worlds.eval },
      documents: Object.fromEntries(DOC_KINDS.filter((k) => documents[k]).map((k) => [k, documents[k]])),
      epoch: {
        tokens: pass(0).count * config.maxLength,
        sequences: pass(0).count,
        steps,
        sequencesPerStep: perStep,
      },
      fertility: {
        train: fertility(tok, size(corpus.train, docs), corpus.names.train),
        heldOut: fertility(tok, size(corpus.eval, evalDocs), corpus.names.eval),
      },
      eval: {
        sequences: evalSeqs.length,
        copyExamples: copy.examples,
        copyTokens: copy.tokens,
        readExamples: read.examples,
        readTokens: read.tokens,
        numberExamples: numbers.examples,
        numberTokens: numbers.tokens,
      },
    },
  };
}
