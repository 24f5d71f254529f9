import { z } from "zod";

/** Checks a subcommand's flags; a bad one is reported as the user typed it (`--max-turns: …`). */
export function parseFlags<S extends z.ZodType>(schema: S, raw: unknown): z.infer<S> {
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(
      `--${String(issue.path[0]).replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}: ${issue.message}`,
    );
  }
  return parsed.data;
}

/** `--search-top-k`: results per search call, shared by every command that runs the tools. */
export const SearchTopK = z.coerce.number().int().positive().max(20).optional();
export const SEARCH_TOP_K_OPTION = ["--search-top-k <n>", "results per search call (default 5)"] as const;
