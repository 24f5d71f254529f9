import { randomUUID } from "node:crypto";
import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import type { AgentRunner, EpisodeRequest } from "./agent.js";
import { ApiError, asApiError } from "./errors.js";
import { ChunkWriter } from "./stream.js";
import type { ServedTrajectory } from "./trajectory-store.js";
import { ChatRequest, completionBody, questionOf, type ReplyHead } from "./wire.js";

/** `POST /v1/chat/completions`: one agent episode per request, its answer as the reply. */
export async function chatCompletions(c: Context, agent: AgentRunner): Promise<Response> {
  const req = await readRequest(c);
  if (req.model !== agent.modelName)
    throw new ApiError(
      404,
      `model "${req.model}" is not served here; this server serves "${agent.modelName}" (GET /v1/models)`,
      "invalid_request_error",
      "model_not_found",
      "model",
    );
  const question = questionOf(req);
  if (question === undefined)
    throw new ApiError(
      400,
      "the last user message must have non-empty text content",
      "invalid_request_error",
      null,
      "messages",
    );

  const head: ReplyHead = {
    id: `chatcmpl-${randomUUID()}`,
    created: Math.floor(Date.now() / 1000),
    model: agent.modelName,
  };
  const episode: EpisodeRequest = {
    responseId: head.id,
    question,
    maxTokens: req.max_completion_tokens ?? req.max_tokens ?? undefined,
    temperature: req.temperature ?? undefined,
    topP: req.top_p ?? undefined,
    seed: req.seed ?? undefined,
    // Fires when the client disconnects: the running model call or tool is aborted, the episode ends.
    signal: c.req.raw.signal,
  };

  if (!req.stream) return c.json(completionBody(head, checked(await agent.run(episode))));

  return streamSSE(c, async (stream) => {
    const writer = new ChunkWriter(stream, head);
    writer.start();
    let trajectory: ServedTrajectory;
    try {
      trajectory = checked(await agent.run({ ...episode, onEvent: (e) => writer.event(e) }));
    } catch (err) {
      if (!c.req.raw.signal.aborted) await writer.fail(asApiError(err));
      return;
    }
    await writer.finish(trajectory, req.stream_options?.include_usage === true);
  });
}

/** The body as a checked request; every way it can be wrong is a 400 that says which. */
async function readRequest(c: Context): Promise<ChatRequest> {
  let body: unknown;
  try {
    body = JSON.parse(await c.req.text());
  } catch {
    throw new ApiError(400, "the request body is not valid JSON", "invalid_request_error");
  }
  const parsed = ChatRequest.safeParse(body);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  if (issue.code === "unrecognized_keys") {
    const key = issue.keys[0]!;
    throw new ApiError(
      400,
      `unsupported field "${key}"; see docs/serve.md for the fields this endpoint takes`,
      "invalid_request_error",
      null,
      [...issue.path, key].join("."),
    );
  }
  const param = issue.path.join(".") || null;
  throw new ApiError(400, `${param ?? "body"}: ${issue.message}`, "invalid_request_error", null, param);
}

/**
 * A model that failed ends the episode as `model_error`: recorded, but no answer to give, so the
 * reply is a 502 naming the trajectory that says what went wrong.
 */
function checked(t: ServedTrajectory): ServedTrajectory {
  if (t.finishReason !== "model_error") return t;
  const { responseId } = t.meta.serve;
  throw new ApiError(
    502,
    `the model failed: ${t.meta.runtime.error ?? "unknown error"} (trajectory: GET /v1/trajectories/${responseId})`,
    "server_error",
    "model_error",
  );
}
