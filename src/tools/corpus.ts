import { isUtf8 } from "node:buffer";
import { createReadStream } from "node:fs";
import { createGunzip } from "node:zlib";
import { type CorpusDoc, CorpusError } from "./corpus-doc.js";
import { isGzip, layoutOf, parseJsonRow, parseTsvRow } from "./corpus-formats.js";

export { CorpusDoc, CorpusError } from "./corpus-doc.js";

/** Rows longer than this are refused: a 10 MB "passage" is a broken dump, not something to search. */
export const DEFAULT_MAX_ROW_BYTES = 4 * 2 ** 20;

/** One corpus row: its document, or why it could not be read. `end` is the (uncompressed) byte after it. */
export type CorpusRow = { line: number; end: number } & ({ doc: CorpusDoc } | { error: string });

export interface ReadCorpusOptions {
  /** Uncompressed byte offset and line number to start after (a previous read's `end` and `line`). */
  from?: { byte: number; line: number };
  maxRowBytes?: number;
  /** Called with the bytes of the file read so far (compressed bytes for a `.gz` file). */
  onRead?: (fileBytes: number) => void;
}

/**
 * Streams the rows of a corpus file (layout from its name: `.jsonl`, `.tsv`, either `.gz`) with
 * constant memory: blank lines and a TSV header are skipped, a bad row (invalid JSON or UTF-8, a
 * missing field, over `maxRowBytes`) comes back as an error naming its line, and reading goes on.
 */
export async function* readCorpus(path: string, opts: ReadCorpusOptions = {}): AsyncGenerator<CorpusRow> {
  const layout = layoutOf(path);
  const maxRowBytes = opts.maxRowBytes ?? DEFAULT_MAX_ROW_BYTES;
  const file = createReadStream(path);
  let fileBytes = 0;
  file.on("data", (chunk) => {
    fileBytes += chunk.length;
  });
  const stream: AsyncIterable<Buffer> = isGzip(path) ? file.pipe(createGunzip()) : file;
  let skip = opts.from?.byte ?? 0;
  let line = opts.from?.line ?? 0;
  let offset = skip;
  let pending: Buffer[] = [];
  let pendingLength = 0;
  const rowOf = (buf: Buffer, length: number): CorpusRow | null => {
    line += 1;
    offset += length + 1;
    const where = `${path}:${line}`;
    const end = offset;
    if (length > maxRowBytes) {
      return { line, end, error: `${where}: row of ${length} bytes is over the limit of ${maxRowBytes}` };
    }
    if (!isUtf8(buf)) return { line, end, error: `${where}: not valid UTF-8` };
    const text = buf.toString("utf8").replace(/\r$/, "");
    if (text.trim() === "") return null;
    try {
      const doc = layout === "tsv" ? parseTsvRow(text, where) : parseJsonRow(text, where);
      return doc && { line, end, doc };
    } catch (err) {
      if (err instanceof CorpusError) return { line, end, error: err.message };
      throw err;
    }
  };
  try {
    for await (let chunk of stream) {
      opts.onRead?.(fileBytes);
      if (skip > 0) {
        const dropped = Math.min(skip, chunk.length);
        skip -= dropped;
        chunk = chunk.subarray(dropped);
      }
      let from = 0;
      for (let nl = chunk.indexOf(10, from); nl !== -1; nl = chunk.indexOf(10, from)) {
        const piece = chunk.subarray(from, nl);
        const length = pendingLength + piece.length;
        // An over-long row is only counted, never held: memory stays bounded whatever the input.
        const buf = length > maxRowBytes ? piece : pendingLength ? Buffer.concat([...pending, piece]) : piece;
        pending = [];
        pendingLength = 0;
        from = nl + 1;
        const row = rowOf(buf, length);
        if (row) yield row;
      }
      if (from < chunk.length) {
        if (pendingLength <= maxRowBytes) pending.push(chunk.subarray(from));
        pendingLength += chunk.length - from;
      }
    }
    if (pendingLength) {
      const row = rowOf(
        pendingLength > maxRowBytes ? Buffer.alloc(0) : Buffer.concat(pending),
        pendingLength,
      );
      // No newline after the last row: `end` must not point past the file.
      if (row) yield { ...row, end: row.end - 1 };
    }
  } catch (err) {
    if (err instanceof Error && "code" in err && typeof err.code === "string" && err.code.startsWith("Z_")) {
      throw new CorpusError(`${path}: not a readable gzip file (${err.message})`);
    }
    throw err;
  } finally {
    file.destroy();
  }
}
