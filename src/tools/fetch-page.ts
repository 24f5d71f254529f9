import { open, realpath } from "node:fs/promises";
import { extname, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { ToolFailure } from "./guard.js";
import { htmlToText, type PageText } from "./html-text.js";
import { fetchOrFail, httpFailure, USER_AGENT } from "./http.js";

export interface FetchLimits {
  /** Bytes read from one page at most; the rest is dropped. */
  maxBytes: number;
  /** Directories `file://` URLs may read from; none means file URLs are refused. */
  fileRoots: readonly string[];
}

const TEXT_TYPES = /^(text\/|application\/(json|xml|xhtml\+xml|ld\+json|javascript)|[^;]*\+xml)/i;

/** Page text from the raw body, by content type: HTML through the reader, other text as is. */
function bodyToText(body: string, contentType: string): PageText {
  if (/html/i.test(contentType) || /^\s*<(!doctype html|html)/i.test(body)) return htmlToText(body);
  return { title: "", text: body.trim() };
}

function charsetOf(contentType: string): string {
  const m = /charset=["']?([\w-]+)/i.exec(contentType);
  if (!m) return "utf-8";
  try {
    new TextDecoder(m[1]);
    return m[1];
  } catch {
    return "utf-8";
  }
}

async function readCapped(res: Response, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  if (!res.body) return Buffer.alloc(0);
  const reader = res.body.getReader();
  while (size < maxBytes) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(Buffer.from(value));
    size += value.length;
  }
  await reader.cancel().catch(() => {});
  return Buffer.concat(chunks).subarray(0, maxBytes);
}

async function fetchHttp(url: string, limits: FetchLimits, signal: AbortSignal): Promise<PageText> {
  const res = await fetchOrFail("Fetching the page", url, {
    headers: { "User-Agent": USER_AGENT, Accept: "text/html,text/plain;q=0.9,*/*;q=0.5" },
    redirect: "follow",
    signal,
  });
  if (!res.ok) {
    await res.body?.cancel().catch(() => {});
    throw httpFailure("Fetching the page", res);
  }
  const contentType = res.headers.get("content-type") ?? "";
  if (contentType && !TEXT_TYPES.test(contentType)) {
    await res.body?.cancel().catch(() => {});
    throw new ToolFailure(
      "unsupported_content_type",
      `Cannot read ${contentType.split(";")[0]} pages, only HTML and text.`,
    );
  }
  const body = await readCapped(res, limits.maxBytes);
  return bodyToText(new TextDecoder(charsetOf(contentType)).decode(body), contentType);
}

function isInside(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}

async function readFileUrl(url: string, limits: FetchLimits): Promise<PageText> {
  if (limits.fileRoots.length === 0) {
    throw new ToolFailure("file_access_disabled", "Reading file:// URLs is not enabled here.");
  }
  let path: string;
  try {
    path = await realpath(fileURLToPath(url));
  } catch {
    throw new ToolFailure("not_found", `No such file: ${url}`);
  }
  const roots = await Promise.all(limits.fileRoots.map((r) => realpath(r).catch(() => r)));
  if (!roots.some((root) => isInside(path, root))) {
    throw new ToolFailure("file_access_denied", `${url} is outside the directories this tool may read.`);
  }
  const body = await readHead(path, limits.maxBytes).catch((err: NodeJS.ErrnoException) => {
    throw new ToolFailure("unreadable", `Cannot read ${url} (${err.code ?? err.message}).`);
  });
  if (body.subarray(0, 1024).includes(0)) {
    throw new ToolFailure("unsupported_content_type", `${url} is a binary file, not HTML or text.`);
  }
  const ext = extname(path).toLowerCase();
  return bodyToText(body.toString("utf8"), ext === ".html" || ext === ".htm" ? "text/html" : "text/plain");
}

async function readHead(path: string, maxBytes: number): Promise<Buffer> {
  const handle = await open(path, "r");
  try {
    const buf = Buffer.alloc(maxBytes);
    const { bytesRead } = await handle.read(buf, 0, maxBytes, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/** Reads an http(s) or file URL and returns its readable text. Failures are ToolFailures. */
export async function fetchPage(url: string, limits: FetchLimits, signal: AbortSignal): Promise<PageText> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ToolFailure("invalid_url", `Not a URL: ${url}`);
  }
  if (parsed.protocol === "http:" || parsed.protocol === "https:") return fetchHttp(url, limits, signal);
  if (parsed.protocol === "file:") return readFileUrl(url, limits);
  throw new ToolFailure("unsupported_url", `Cannot read ${parsed.protocol} URLs, only http(s) and file.`);
}
