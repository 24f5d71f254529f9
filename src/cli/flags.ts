import type { z } from "zod";

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
