import { createReadStream } from "node:fs";
import { open } from "node:fs/promises";
import { z } from "zod";

/** One document of a search corpus: a JSONL row. */
export const CorpusDoc = z.object({
  id: z.string().min(1),
  title: z.string(),
  text: z.string(),
  url: z.string().min(1).optional(),
});
export type CorpusDoc = z.infer<typeof CorpusDoc>;

/** A corpus row that could not be read; the message names file, line and field. */
export class CorpusError extends Error {
  override name = "CorpusError";
}

/** Where a row sits in the corpus file, so its text can be read back without loading the corpus. */
export interface CorpusRow {
  doc: CorpusDoc;
  line: number;
  offset: number;
  length: number;
}

/** Streams the corpus rows with their byte positions; throws CorpusError on the first bad row. */
export async function* readCorpus(path: string): AsyncGenerator<CorpusRow> {
  let line = 0;
  let offset = 0;
  let pending: Buffer[] = [];
  let pendingLength = 0;
  const parseLine = (buf: Buffer, start: number): CorpusRow | null => {
    line += 1;
    const text = buf.toString("utf8").replace(/\r$/, "");
    if (text.trim() === "") return null;
    return { doc: parseCorpusLine(text, `${path}:${line}`), line, offset: start, length: buf.length };
  };
  for await (const chunk of createReadStream(path) as AsyncIterable<Buffer>) {
    let from = 0;
    for (let nl = chunk.indexOf(10, from); nl !== -1; nl = chunk.indexOf(10, from)) {
      const piece = chunk.subarray(from, nl);
      const lineBuf = pendingLength ? Buffer.concat([...pending, piece]) : piece;
      const row = parseLine(lineBuf, offset);
      offset += lineBuf.length + 1;
      pending = [];
      pendingLength = 0;
      from = nl + 1;
      if (row) yield row;
    }
    if (from < chunk.length) {
      pending.push(chunk.subarray(from));
      pendingLength += chunk.length - from;
    }
  }
  if (pendingLength) {
    const row = parseLine(Buffer.concat(pending), offset);
    if (row) yield row;
  }
}

/** Parses one JSONL row; `where` ("file:line") prefixes every error message. */
export function parseCorpusLine(text: string, where: string): CorpusDoc {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new CorpusError(`${where}: invalid JSON: ${err instanceof Error ? err.message : err}`);
  }
  const parsed = CorpusDoc.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue.path.length ? issue.path.join(".") : "(row)";
    throw new CorpusError(`${where}: field "${field}": ${issue.message}`);
  }
  return parsed.data;
}

/** Reads rows back by their byte positions (as recorded by `readCorpus`), with one file handle. */
export async function readCorpusRows(
  path: string,
  positions: ReadonlyArray<{ offset: number; length: number }>,
): Promise<CorpusDoc[]> {
  const handle = await open(path, "r");
  try {
    const docs: CorpusDoc[] = [];
    for (const { offset, length } of positions) {
      const buf = Buffer.alloc(length);
      const { bytesRead } = await handle.read(buf, 0, length, offset);
      docs.push(parseCorpusLine(buf.subarray(0, bytesRead).toString("utf8"), `${path} (byte ${offset})`));
    }
    return docs;
  } finally {
    await handle.close();
  }
}
