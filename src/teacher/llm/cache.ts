import { createHash } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";

export const CachedReply = z.object({
  text: z.string(),
  tokensIn: z.number().int().nonnegative(),
  tokensOut: z.number().int().nonnegative(),
});
export type CachedReply = z.infer<typeof CachedReply>;

/**
 * Model replies on disk, one file per request, keyed by a hash of everything that shapes the reply
 * (model, prompt, stops, sampling), so a rerun of a teach job costs no model calls. A file that does
 * not parse (a kill mid-write cannot make one: writes go through a rename) counts as a miss.
 */
export class ReplyCache {
  constructor(private readonly dir: string) {}

  static key(request: unknown): string {
    return createHash("sha256").update(JSON.stringify(request)).digest("hex");
  }

  private file(key: string): string {
    return path.join(this.dir, key.slice(0, 2), `${key}.json`);
  }

  async get(key: string): Promise<CachedReply | null> {
    try {
      const parsed = CachedReply.safeParse(JSON.parse(await readFile(this.file(key), "utf8")));
      return parsed.success ? parsed.data : null;
    } catch {
      return null;
    }
  }

  async put(key: string, reply: CachedReply): Promise<void> {
    const file = this.file(key);
    await mkdir(path.dirname(file), { recursive: true });
    const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    await writeFile(tmp, JSON.stringify(reply));
    await rename(tmp, file);
  }
}
