import { createReadStream } from "node:fs";
import { appendFile, mkdir, open } from "node:fs/promises";
import path from "node:path";
import { createInterface } from "node:readline";
import type { z } from "zod";

/** The non-blank lines of a JSONL file (or an open stream of one), numbered from 1 as editors do. */
export async function* jsonlLines(
  input: string | NodeJS.ReadableStream,
): AsyncGenerator<{ line: number; text: string }> {
  const stream = typeof input === "string" ? createReadStream(input) : input;
  let line = 0;
  for await (const text of createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY })) {
    line++;
    if (text.trim()) yield { line, text };
  }
}

/**
 * Reads the records of a JSONL file that a killed job may have left with a torn last line:
 * a line that does not parse is skipped and reported, never fatal. A missing file is empty.
 */
export async function readJsonlTolerant<T>(
  file: string,
  schema: z.ZodType<T>,
): Promise<{ records: T[]; bad: { line: number; reason: string }[] }> {
  const records: T[] = [];
  const bad: { line: number; reason: string }[] = [];
  let input: ReturnType<typeof createReadStream>;
  try {
    input = createReadStream(file);
    await new Promise<void>((resolve, reject) => input.once("open", () => resolve()).once("error", reject));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { records, bad };
    throw err;
  }
  for await (const { line, text } of jsonlLines(input)) {
    try {
      const parsed = schema.safeParse(JSON.parse(text));
      if (parsed.success) records.push(parsed.data);
      else
        bad.push({
          line,
          reason: `${parsed.error.issues[0]?.path.join(".")}: ${parsed.error.issues[0]?.message}`,
        });
    } catch {
      bad.push({ line, reason: "not JSON (torn write?)" });
    }
  }
  return { records, bad };
}

/** JSONL text: one JSON object per line, newline-terminated. */
export const jsonlText = (records: readonly unknown[]): string =>
  records.map((r) => `${JSON.stringify(r)}\n`).join("");

/**
 * Appends one record as a line; each call is one write, so a kill tears at most the last line. The
 * folder is made only when the write finds none: an evaluation appends hundreds of records, and a
 * recursive mkdir before each cost its client's busy thread ~0.7 ms (docs/engine.md).
 */
export async function appendJsonl(file: string, record: unknown): Promise<void> {
  const line = `${JSON.stringify(record)}\n`;
  try {
    await appendFile(file, line);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    await mkdir(path.dirname(file), { recursive: true });
    await appendFile(file, line);
  }
}

/**
 * Cuts a torn last line (a kill mid-write) so that appending resumes on a clean line boundary.
 * Returns whether anything was cut.
 */
export async function repairJsonlTail(file: string): Promise<boolean> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(file, "r+");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
  try {
    const { size } = await handle.stat();
    if (size === 0) return false;
    // Scan back from the end in blocks for the last newline.
    const block = Buffer.alloc(64 * 1024);
    let end = size;
    while (end > 0) {
      const start = Math.max(0, end - block.length);
      const { bytesRead } = await handle.read(block, 0, end - start, start);
      const lastNl = block.subarray(0, bytesRead).lastIndexOf(10);
      if (lastNl >= 0) {
        const keep = start + lastNl + 1;
        if (keep === size) return false;
        await handle.truncate(keep);
        return true;
      }
      end = start;
    }
    await handle.truncate(0);
    return true;
  } finally {
    await handle.close();
  }
}
