import { z } from "zod";

/** One document of a search corpus. */
export const CorpusDoc = z.object({
  id: z.string().min(1),
  title: z.string(),
  text: z.string(),
  url: z.string().min(1).optional(),
});
export type CorpusDoc = z.infer<typeof CorpusDoc>;

/** A corpus that could not be read; the message names file, line and field. */
export class CorpusError extends Error {
  override name = "CorpusError";
}
