import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { secureHeaders } from "hono/secure-headers";
import { hostAllowed, hostCheck, hostForm } from "./host-check.js";
import { renderIndexPage, renderRecordPage, STYLE_HASH } from "./html.js";
import { listenOn } from "./listen.js";
import { type LoadedRecords, loadRecords } from "./records.js";

export interface ViewerOptions {
  paths: string[];
  /** Folder that file names are shown relative to. */
  root?: string;
  host?: string;
  /** 0 picks a free port. */
  port?: number;
}

export interface RunningViewer {
  url: string;
  records: number;
  close(): Promise<void>;
}

/** Pages are static HTML with one hashed style sheet: no scripts, no other sources, no framing. */
const CONTENT_SECURITY_POLICY = {
  defaultSrc: ["'none'"],
  styleSrc: [STYLE_HASH],
  formAction: ["'self'"],
  baseUri: ["'none'"],
  frameAncestors: ["'none'"],
};

/** The viewer takes no request bodies at all. */
const NO_BODY = bodyLimit({
  maxSize: 0,
  onError: (c) => c.text("413: coa view takes no request body\n", 413),
});

/**
 * Builds the viewer's routes over records loaded on each listing, so a running job's new lines show up.
 * `allowHost` judges each request's Host header (see hostAllowed).
 */
export function viewerApp(opts: {
  paths: string[];
  root: string;
  allowHost: (header: string | undefined) => boolean;
}): Hono {
  let cache: LoadedRecords | null = null;
  const load = async (fresh: boolean) => {
    if (fresh || !cache) cache = await loadRecords(opts.paths);
    return cache;
  };
  return new Hono()
    .use(hostCheck(opts.allowHost))
    .use(NO_BODY)
    .use(secureHeaders({ contentSecurityPolicy: CONTENT_SECURITY_POLICY }))
    .get("/", async (c) =>
      c.html(renderIndexPage(await load(true), { root: opts.root, query: c.req.query("q") ?? "" })),
    )
    .get("/r/:index", async (c) => {
      const index = Number(c.req.param("index"));
      const loaded = await load(false);
      const rec = loaded.records[index];
      if (!rec) return c.html(`<p>No record ${index}. <a href="/">Back to the list</a></p>`, 404);
      return c.html(renderRecordPage(rec, index, { root: opts.root, tokenizers: loaded.tokenizers }));
    });
}

export async function startViewer(opts: ViewerOptions): Promise<RunningViewer> {
  const root = opts.root ?? process.cwd();
  const loaded = await loadRecords(opts.paths);
  if (loaded.files.length === 0) throw new Error(`no .jsonl files found under ${opts.paths.join(", ")}`);
  const host = opts.host ?? "127.0.0.1";
  // The port is known once listening, before any request can arrive.
  let allowHost: (header: string | undefined) => boolean = () => false;
  const app = viewerApp({ paths: opts.paths, root, allowHost: (h) => allowHost(h) });
  const { server, port } = await listenOn(app.fetch, host, opts.port ?? 0);
  allowHost = hostAllowed(host, port);
  return {
    url: `http://${hostForm(host)}:${port}/`,
    records: loaded.records.length,
    close: () =>
      new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve()))),
  };
}
