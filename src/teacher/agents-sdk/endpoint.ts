import { createRequire } from "node:module";
import { getCurrentSpan, type OpenAIClient, OpenAIProvider } from "@openai/agents";
import { OpenAICompatibleClient, serverRoot } from "../../model/index.js";

export interface EndpointOptions {
  /** The server's base URL, with or without `/v1`. */
  baseUrl: string;
  apiKey?: string;
  /** Default: the first model the server lists (`GET /v1/models`). */
  modelName?: string;
  /** Limit for one attempt of one request. */
  timeoutMs?: number;
  /** Retries after a transient failure (the OpenAI client's own policy). */
  maxRetries?: number;
}

type OpenAIConstructor = new (options: {
  apiKey: string;
  baseURL: string;
  timeout?: number;
  maxRetries?: number;
  fetch?: typeof fetch;
}) => OpenAIClient;

/**
 * The `openai` client class the SDK itself is built on (coa has no `openai` of its own at run time,
 * and the SDK's may be another major version than a copy elsewhere in node_modules).
 */
function sdkOpenAI(): OpenAIConstructor {
  const here = createRequire(import.meta.url);
  const agents = createRequire(here.resolve("@openai/agents"));
  const openaiProvider = createRequire(agents.resolve("@openai/agents-openai"));
  return (openaiProvider("openai") as { OpenAI: OpenAIConstructor }).OpenAI;
}

/**
 * fetch, noting the tool definitions a chat-completions request sends on the generation span it runs
 * in: the SDK's chat-completions model traces the messages but not the tools, and the importer bills
 * every call's tools with its messages (docs/import.md, "Costs").
 */
const fetchNotingTools: typeof fetch = (url, init) => {
  const span = getCurrentSpan();
  if (span?.spanData.type === "generation" && typeof init?.body === "string") {
    try {
      const tools = (JSON.parse(init.body) as { tools?: unknown }).tools;
      if (Array.isArray(tools)) span.spanData.model_config = { ...span.spanData.model_config, tools };
    } catch {
      // Not JSON: nothing to note.
    }
  }
  return fetch(url, init);
};

/**
 * The SDK's own OpenAI provider on an OpenAI-compatible endpoint, in chat-completions mode (what
 * vLLM, SGLang, llama.cpp and Ollama serve), and the model name every agent asks it for. A server
 * that cannot list its models, or lists none, is an error naming `--model`.
 */
export async function endpointProvider(
  opts: EndpointOptions,
): Promise<{ provider: OpenAIProvider; model: string }> {
  if (!/^https?:\/\//i.test(opts.baseUrl))
    throw new Error(`--model: an http(s) base URL of an OpenAI-compatible server; got "${opts.baseUrl}"`);
  const root = serverRoot(opts.baseUrl);
  let model = opts.modelName;
  if (!model) {
    const lister = new OpenAICompatibleClient({
      baseUrl: root,
      model: "",
      apiKey: opts.apiKey,
      timeoutMs: opts.timeoutMs,
      maxRetries: opts.maxRetries,
    });
    let listed: string[];
    try {
      listed = await lister.listModels();
    } catch (err) {
      throw new Error(
        `--model: ${opts.baseUrl} did not list its models (GET /v1/models): ${(err as Error).message}; check the URL, or name the model with --model-name`,
      );
    }
    model = listed[0];
    if (!model) throw new Error(`--model: ${opts.baseUrl} lists no models; name one with --model-name`);
  }
  const OpenAI = sdkOpenAI();
  const client = new OpenAI({
    baseURL: `${root}/v1`,
    // A local server takes any key; the client refuses to start without one.
    apiKey: opts.apiKey ?? "none",
    // coa's defaults for a model server (`--request-timeout`, `--retries`), not the client's 10 minutes.
    timeout: opts.timeoutMs ?? 120_000,
    maxRetries: opts.maxRetries ?? 3,
    fetch: fetchNotingTools,
  });
  return { provider: new OpenAIProvider({ openAIClient: client, useResponses: false }), model };
}
