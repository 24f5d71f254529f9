import { z } from "zod";

/** One chat turn, as OpenAI-compatible servers and chat templates take it. */
export const ChatMessage = z.object({ role: z.enum(["system", "user", "assistant"]), content: z.string() });
export type ChatMessage = z.infer<typeof ChatMessage>;

export const CompletionRequest = z
  .object({
    /** Text prompt; exactly one of `prompt` and `promptIds` is given. */
    prompt: z.string().optional(),
    /** Token ids of the prompt, for token-exact multi-turn generation. */
    promptIds: z.array(z.number().int().nonnegative()).optional(),
    /** Stop strings; a matched stop string is kept at the end of the returned text and ids. */
    stop: z.array(z.string()).default([]),
    maxTokens: z.number().int().positive(),
    temperature: z.number().min(0).default(1),
    topP: z.number().gt(0).max(1).default(1),
    n: z.number().int().positive().default(1),
    logprobs: z.boolean().default(false),
    seed: z.number().int().optional(),
    /**
     * The prompt came from `chatPrompt(messages)`: its first `promptTokens` ids are that conversation
     * and the rest is the assistant's reply so far. A client that cannot send ids (a chat-only server)
     * sends the messages plus that reply as an assistant message to continue.
     */
    chat: z
      .object({ messages: z.array(ChatMessage).min(1), promptTokens: z.number().int().nonnegative() })
      .optional(),
  })
  .refine((r) => (r.prompt === undefined) !== (r.promptIds === undefined), {
    message: "give exactly one of prompt and promptIds",
  });
export type CompletionRequest = z.input<typeof CompletionRequest>;

export const FinishReason = z.enum(["stop", "length"]);
export type CompletionFinishReason = z.infer<typeof FinishReason>;

export const CompletionChoice = z.object({
  text: z.string(),
  tokenIds: z.array(z.number().int()),
  /** Logprob of each generated token under the sampling distribution; present when asked for. */
  logprobs: z.array(z.number()).optional(),
  finishReason: FinishReason,
  /** The stop string that ended generation, if one did. */
  stopSequence: z.string().nullable().default(null),
  /**
   * False when the server returned no ids and `tokenIds` were re-tokenized from the text, so they may
   * differ from what was sampled. Absent means exact.
   */
  exactIds: z.boolean().optional(),
});
export type CompletionChoice = z.infer<typeof CompletionChoice>;

export const Usage = z.object({
  promptTokens: z.number().int().nonnegative(),
  completionTokens: z.number().int().nonnegative(),
});
export type Usage = z.infer<typeof Usage>;

export const CompletionResult = z.object({
  model: z.string(),
  choices: z.array(CompletionChoice).min(1),
  usage: Usage,
});
export type CompletionResult = z.infer<typeof CompletionResult>;

export interface CallOptions {
  signal?: AbortSignal;
}

/** A conversation rendered by the model's chat template, up to where the assistant's reply begins. */
export interface ChatPrompt {
  ids: number[];
  /** False when the ids are not the ones the server reads (a chat-only server; see `chatPrompt`). */
  exact: boolean;
}

/**
 * Anything that completes text: a vLLM/SGLang/OpenAI-compatible server, the embedded engine, or a
 * scripted model in tests. The runtime cannot tell them apart.
 */
export interface ModelClient {
  /** Model name as reported in records. */
  readonly name: string;
  /** Identifies the vocabulary of returned ids (see Trajectory.tokenizer). */
  readonly tokenizer: string;
  /**
   * Tokens the model can attend to (prompt plus completion), where the client knows it: an episode
   * stops at this length as at a token budget rather than sending a request the server must refuse.
   */
  readonly contextLength?: number;
  complete(request: CompletionRequest, options?: CallOptions): Promise<CompletionResult>;
  tokenize(text: string, options?: CallOptions): Promise<number[]>;
  detokenize(ids: readonly number[], options?: CallOptions): Promise<string>;
  /**
   * The prompt ids of `messages` through the model's own chat template, with the assistant's header
   * added; null when the model has no template to apply (then prompts are plain text). Absent on
   * clients that never have one (the embedded engine, scripted models).
   */
  chatPrompt?(messages: readonly ChatMessage[], options?: CallOptions): Promise<ChatPrompt | null>;
  /** Releases connections or child processes; safe to call twice. */
  close?(): Promise<void>;
}
