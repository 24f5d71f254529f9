// The corpus layouts `coa index` reads, one row (line) at a time, each turned into a CorpusDoc:
// - coa JSONL: {"id", "title", "text", "url"?}
// - Search-R1 / FlashRAG wiki JSONL: {"id", "contents": "\"Title\"\ntext"} (the title is the first line)
// - DPR TSV (psgs_w100.tsv): `id \t text \t title`, with a header row and CSV-style quoted fields

import { z } from "zod";
import { CorpusDoc, CorpusError } from "./corpus-doc.js";

export type CorpusLayout = "jsonl" | "tsv";

/** The layout of a corpus file from its name (a `.gz` suffix is looked through). */
export function layoutOf(path: string): CorpusLayout {
  return /\.tsv(\.gz)?$/i.test(path) ? "tsv" : "jsonl";
}

export const isGzip = (path: string): boolean => /\.gz$/i.test(path);

// Search-R1's corpora write ids as strings, other dumps as numbers: both are the same id.
const Id = z.union([z.string().min(1), z.number().int().transform(String)], {
  error: "expected a non-empty string or an integer",
});
const SearchR1Row = z.object({ id: Id, contents: z.string() });
const CoaRow = CorpusDoc.extend({ id: Id });

/** "\"Title\"\ntext" → title and text; a contents with no newline is all text. */
export function splitContents(contents: string): { title: string; text: string } {
  const nl = contents.indexOf("\n");
  if (nl === -1) return { title: "", text: contents };
  return { title: contents.slice(0, nl).replace(/^"(.*)"$/s, "$1"), text: contents.slice(nl + 1) };
}

function fieldError(where: string, error: z.ZodError): CorpusError {
  const issue = error.issues[0];
  const field = issue.path.length ? issue.path.join(".") : "(row)";
  return new CorpusError(`${where}: field "${field}": ${issue.message}`);
}

/** One JSONL row in either JSON layout; `where` ("file:line") prefixes every error message. */
export function parseJsonRow(text: string, where: string): CorpusDoc {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new CorpusError(`${where}: invalid JSON: ${err instanceof Error ? err.message : err}`);
  }
  if (value !== null && typeof value === "object" && "contents" in value && !("text" in value)) {
    const row = SearchR1Row.safeParse(value);
    if (!row.success) throw fieldError(where, row.error);
    return { id: row.data.id, ...splitContents(row.data.contents) };
  }
  const row = CoaRow.safeParse(value);
  if (!row.success) throw fieldError(where, row.error);
  return row.data;
}

/** A DPR TSV field: quoted fields lose their quotes and have `""` turned back into `"`. */
const unquote = (field: string): string =>
  field.length >= 2 && field.startsWith('"') && field.endsWith('"')
    ? field.slice(1, -1).replaceAll('""', '"')
    : field;

/** One DPR TSV row, or null for the header row. */
export function parseTsvRow(text: string, where: string): CorpusDoc | null {
  const fields = text.split("\t");
  if (fields.length !== 3) {
    throw new CorpusError(
      `${where}: expected 3 tab-separated fields (id, text, title), found ${fields.length}`,
    );
  }
  const [id, body, title] = fields.map(unquote);
  if (id === "id" && body === "text" && title === "title") return null;
  if (id === "") throw new CorpusError(`${where}: field "id": empty`);
  return { id, title, text: body };
}
