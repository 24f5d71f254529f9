import type { Handler } from "hono";
import { z } from "zod";
import type { RetrievedDoc, ToolBackend } from "./backend.js";
import { withinDeadline } from "./deadline.js";
import { readBody } from "./errors.js";

/** Queries per request at most: Search-R1 clients batch a rollout step's queries into one call. */
const MAX_QUERIES = 1024;
const MAX_TOPK = 100;

/** Search-R1's retrieval request (`QueryRequest` of its retrieval server). */
export const RetrieveRequest = z.strictObject({
  queries: z.array(z.string().max(10_000)).min(1).max(MAX_QUERIES),
  topk: z.number().int().positive().max(MAX_TOPK).nullish(),
  return_scores: z.boolean().default(false),
});

/** A retrieval document as Search-R1's corpus rows hold it: the title in quotes on the first line. */
export const searchR1Document = (d: RetrievedDoc) => ({ id: d.id, contents: `"${d.title}"\n${d.text}` });

/** `{result: [per query: [{document, score}]]}`, or bare documents per query without scores. */
export function retrieveResponse(perQuery: RetrievedDoc[][], withScores: boolean) {
  return {
    result: perQuery.map((docs) =>
      docs.map((d) => (withScores ? { document: searchR1Document(d), score: d.score } : searchR1Document(d))),
    ),
  };
}

/** `POST /retrieve`; `defaultTopk` applies when the request leaves `topk` out, as the Search-R1 server's `--topk` does. */
export const retrieveHandler =
  (backend: ToolBackend, opts: { defaultTopk: number; timeoutMs: number }): Handler =>
  async (c) => {
    const req = await readBody(c, RetrieveRequest);
    const k = req.topk ?? opts.defaultTopk;
    const perQuery = await withinDeadline(c, opts.timeoutMs, () =>
      Promise.all(req.queries.map((q) => backend.retrieve(q, k))),
    );
    return c.json(retrieveResponse(perQuery, req.return_scores));
  };
