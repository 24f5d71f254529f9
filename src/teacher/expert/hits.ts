/** One search result as the expert reads it off an observation. */
export interface Hit {
  rank: number;
  title: string;
  url: string;
  snippet: string;
}

const HEAD = /^\s*(\d+)\.\s+(.*?)(?:\s+\((\S+)\))?\s*$/;

/**
 * Reads numbered search results ("1. Title (url)" then indented snippet lines) out of an
 * observation; anything else yields no hits.
 */
export function parseHits(observation: string): Hit[] {
  const hits: Hit[] = [];
  for (const line of observation.split("\n")) {
    const head = /^\s{0,1}\d+\.\s/.test(line) ? HEAD.exec(line) : null;
    if (head) {
      hits.push({ rank: Number(head[1]), title: head[2], url: head[3] ?? "", snippet: "" });
    } else if (hits.length && line.trim()) {
      const last = hits.at(-1)!;
      last.snippet = last.snippet ? `${last.snippet} ${line.trim()}` : line.trim();
    }
  }
  return hits;
}

/** Lower case, no quotes, single spaces: how two titles are compared. */
export function normTitle(s: string): string {
  return s.toLowerCase().replace(/["“”]/g, "").replace(/\s+/g, " ").trim();
}

export function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0];
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const cur = row[j];
      row[j] = Math.min(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = cur;
    }
  }
  return row[b.length];
}

/** The encyclopedia keeps its articles under /wiki/; everything else is a page of lesser weight. */
export const isArticle = (h: Hit): boolean => /\/wiki\//.test(h.url);

/** What kind of page a result is, in words: "the encyclopedia", "a fan page", "a blog post", … */
export function pageKind(h: Hit): string {
  if (isArticle(h)) return "the encyclopedia";
  const section = /^https?:\/\/[^/]+\/([^/]+)\//.exec(h.url)?.[1];
  const kinds: Record<string, string> = {
    fans: "a fan page",
    blog: "a blog post",
    forum: "a forum post",
    news: "a news page",
  };
  return (section && kinds[section]) ?? "a web page";
}

/** Exactly the subject's own article. */
export const isOwnArticle = (h: Hit, subject: string): boolean =>
  isArticle(h) && normTitle(h.title) === normTitle(subject);

/**
 * A result a skimming reader could take for the subject: an article whose title is a few letters
 * off ("Varen Hold" for "Varen Holt"), or another page that names the subject in its title.
 */
export function looksLike(h: Hit, subject: string): boolean {
  const [t, s] = [normTitle(h.title), normTitle(subject)];
  if (!isArticle(h)) return t.includes(s);
  return editDistance(t, s) <= (s.length <= 5 ? 1 : 2) || t === `the ${s}` || s === `the ${t}`;
}
