import type { ModelClient } from "../../model/index.js";
import { closeTag, TOOL_TAGS } from "../../protocol/index.js";
import type { Task } from "../../tasks/index.js";
import type { AgentCall, AgentReply, Driver, DriverEpisode } from "../agents.js";
import { ReplyCache } from "./cache.js";

export interface LlmDriverOptions {
  model: ModelClient;
  /** Where replies are cached; no cache when absent. */
  cacheDir?: string;
  maxTokens?: number;
  temperature?: number;
  seed?: number;
}

/** Workers stop right after a tool call's closing tag, so a model cannot invent the observation. */
const WORKER_STOPS = TOOL_TAGS.map(closeTag);

/**
 * Every agent is one completion by the model: the agent's context (role prompt + its messages) is the
 * prompt. Retries and concurrency are the client's; replies are cached on disk by request.
 */
export class LlmDriver implements Driver {
  readonly name = "llm" as const;
  readonly model: string;
  readonly tokenizer: string;
  private readonly cache: ReplyCache | null;

  constructor(private readonly options: LlmDriverOptions) {
    this.model = options.model.name;
    this.tokenizer = options.model.tokenizer;
    this.cache = options.cacheDir ? new ReplyCache(options.cacheDir) : null;
  }

  episode(_task: Task): DriverEpisode {
    return { call: (call) => this.call(call) };
  }

  private async call(call: AgentCall): Promise<AgentReply> {
    const started = performance.now();
    const { model } = this.options;
    const request = {
      prompt: call.context,
      stop: call.role === "searcher" || call.role === "coder" ? WORKER_STOPS : [],
      maxTokens: this.options.maxTokens ?? 384,
      temperature: this.options.temperature ?? 0,
      ...(this.options.seed === undefined ? {} : { seed: this.options.seed }),
    };
    const key = ReplyCache.key({ model: model.name, ...request });
    const cached = await this.cache?.get(key);
    if (cached) return { ...cached, ms: 0 };
    const result = await model.complete(request);
    const text = result.choices[0].text;
    // Counted on this call's own context with the model's tokenizer; the server's usage when it has none.
    const [tokensIn, tokensOut] = await Promise.all([
      model.tokenize(call.context).then(
        (ids) => ids.length,
        () => result.usage.promptTokens,
      ),
      model.tokenize(text).then(
        (ids) => ids.length,
        () => result.usage.completionTokens,
      ),
    ]);
    await this.cache?.put(key, { text, tokensIn, tokensOut });
    return { text, tokensIn, tokensOut, ms: performance.now() - started };
  }
}
