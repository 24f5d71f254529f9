import { spawnSync } from "node:child_process";
import { appendFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { CorpusIndex, defaultIndexDir, MemoryIndex, normalizeUrl } from "./corpus-index.js";
import { WORLD_DOCS, writeCorpusFile } from "./test-corpus.js";

const row = (id: string, title: string, text: string) => JSON.stringify({ id, title, text });

/** Many small documents, so that a tiny segment size makes a build of several segments. */
const manyDocs = (n: number, from = 0) =>
  Array.from({ length: n }, (_, i) => ({
    id: `d${from + i}`,
    title: `Town ${from + i}`,
    text: `Town ${from + i} lies on the river ${["Sable", "Tarn", "Esk"][(from + i) % 3]}; its number is ${from + i}.`,
  }));

describe("MemoryIndex", () => {
  it.each(["coa", "pyserini"] as const)(
    "ranks and snippets documents in memory exactly as the persisted index does (%s mode)",
    async (bm25) => {
      const docs = [...WORLD_DOCS, ...manyDocs(40)];
      const { index } = await CorpusIndex.open(await writeCorpusFile(docs), { segmentPostings: 50, bm25 });
      expect(index.manifest.segments).toBeGreaterThan(3);
      const memory = new MemoryIndex(docs, bm25);
      for (const query of [
        "Ilse Brandt",
        "bridge",
        "mining village",
        "the of and",
        "town river Sable 7",
        "Tarn Tarn Esk",
      ]) {
        expect(memory.rank(query, 10)).toEqual(index.rank(query, 10));
        expect(memory.search(query, 5)).toEqual(await index.search(query, 5));
      }
    },
  );
});

describe("CorpusIndex", () => {
  it("ranks by BM25 with titles boosted (coa mode, the default), and snippets the relevant sentence", async () => {
    const { index, reused } = await CorpusIndex.open(await writeCorpusFile());
    expect(reused).toBe(false);
    expect(index.manifest.bm25).toBe("coa");
    expect(index.size).toBe(5);
    const hits = await index.search("Ilse Brandt", 3);
    expect(hits[0]).toEqual({
      title: "Ilse Brandt",
      url: "https://world.local/wiki/Ilse_Brandt",
      snippet: expect.stringContaining("Ilse Brandt (born 1970)"),
    });
    expect(hits.map((h) => h.title)).toContain("Veltmoor");
    // "bridge" is in two texts; the document titled with it comes first.
    expect((await index.search("bridge", 5))[0].title).toBe("Glass bridge of Veltmoor");
    // Documents without a url have none in their hits.
    expect(await index.search("mining village", 1)).toEqual([
      { title: "Dunmere", snippet: "Dunmere is a mining village in Arden. Its population was 830 in 2020." },
    ]);
    expect(await index.search("the of and", 5)).toEqual([]);
    const retrieved = await index.retrieve("Kestrel Bay", 2);
    expect(retrieved[0].doc.id).toBe("w3");
    expect(retrieved[0].score).toBeGreaterThan(0);
  });

  it("keeps the BM25 mode it was built with: reused without a mode, rebuilt when another is named", async () => {
    const corpus = await writeCorpusFile();
    const built = await CorpusIndex.open(corpus, { bm25: "pyserini" });
    expect(built.index.manifest.bm25).toBe("pyserini");
    expect(built.index.manifest.fields).toHaveLength(1);
    const again = await CorpusIndex.open(corpus);
    expect(again).toMatchObject({ reused: true, index: { manifest: { bm25: "pyserini" } } });
    expect(await again.index.retrieve("Veltmoor bridge", 5)).toEqual(
      await built.index.retrieve("Veltmoor bridge", 5),
    );
    const coa = await CorpusIndex.open(corpus, { bm25: "coa" });
    expect(coa).toMatchObject({ reused: false, continued: false, index: { manifest: { bm25: "coa" } } });
    expect(coa.index.manifest.fields).toHaveLength(2);
    // The two rankings differ: Pyserini has no title boost and saturates term frequency sooner.
    const scores = async (index: CorpusIndex) =>
      (await index.retrieve("Veltmoor bridge", 5)).map((r) => r.score);
    expect(await scores(coa.index)).not.toEqual(await scores(built.index));
  });

  it("answers hostile queries without error: FTS and SQL syntax, quotes, empty, 100 KB", async () => {
    const { index } = await CorpusIndex.open(await writeCorpusFile());
    for (const q of [
      '"',
      "NEAR(a b)",
      "title:Arden OR *",
      "'); DROP TABLE docs; --",
      "",
      "  \t",
      "\u0000\uffff",
    ]) {
      expect(Array.isArray(await index.search(q, 5))).toBe(true);
    }
    expect((await index.search('Arden" AND (', 1))[0].title).toBe("Arden");
    expect((await index.search(`${"zebra ".repeat(20_000)} Dunmere`, 1))[0].title).toBe("Dunmere");
    expect((await index.search(`${"x".repeat(100_000)} Dunmere`, 1))[0].title).toBe("Dunmere");
    // Past 256 distinct terms the rest of a query is ignored, so a 100 KB query costs 256 lookups at most.
    const distinct = Array.from({ length: 300 }, (_, i) => `w${i}`).join(" ");
    const started = performance.now();
    expect(await index.search(`${distinct} Dunmere`, 1)).toEqual([]);
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it("persists next to the corpus, reloads without re-indexing, and indexes only appended rows", async () => {
    const corpus = await writeCorpusFile();
    const built = await CorpusIndex.open(corpus, { onProgress: () => {} });
    expect(built.index.manifest).toMatchObject({ corpus: { path: corpus }, docCount: 5, complete: true });
    const again = await CorpusIndex.open(corpus, { onProgress: () => expect.fail("must not re-index") });
    expect(again.reused).toBe(true);
    expect(again.index.manifest.builtAt).toBe(built.index.manifest.builtAt);
    expect(await again.index.search("capital Kestrel Bay", 1)).toEqual(
      await built.index.search("capital Kestrel Bay", 1),
    );

    await appendFile(corpus, `${row("w6", "Kestrel Bay", "The capital of Arden.")}\n`);
    const grown = await CorpusIndex.open(corpus);
    expect(grown).toMatchObject({ reused: false, continued: true });
    expect(grown.index.size).toBe(6);
    expect(grown.index.manifest.segments).toBe(2);
    expect((await grown.index.search("Kestrel Bay", 1))[0].title).toBe("Kestrel Bay");
    // The same as building the grown corpus from scratch.
    const fresh = await CorpusIndex.open(corpus, { rebuild: true });
    expect(fresh.continued).toBe(false);
    expect(await grown.index.retrieve("Arden capital town", 6)).toEqual(
      await fresh.index.retrieve("Arden capital town", 6),
    );

    // A corpus rewritten in place (not appended to) is rebuilt.
    await writeFile(corpus, `${row("z1", "Zed", "only one")}\n`);
    const replaced = await CorpusIndex.open(corpus);
    expect(replaced).toMatchObject({ reused: false, continued: false });
    expect(replaced.index.size).toBe(1);
  });

  it("rebuilds a damaged index instead of trusting it, and honours an explicit index dir", async () => {
    const corpus = await writeCorpusFile();
    const indexDir = join(corpus, "..", "my-index");
    await CorpusIndex.open(corpus, { indexDir });
    await writeFile(join(indexDir, "index.sqlite"), "{ broken");
    const reopened = await CorpusIndex.open(corpus, { indexDir });
    expect(reopened.reused).toBe(false);
    expect((await reopened.index.search("Dunmere", 1))[0].title).toBe("Dunmere");
  });

  it("survives a build killed mid-transaction (SIGKILL): refused as incomplete, then resumed", async () => {
    const docs = manyDocs(6000);
    const corpus = await writeCorpusFile(docs);
    const script = join(corpus, "..", "build.mts");
    // The child kills itself with a segment half written: SQLite must roll that transaction back.
    await writeFile(
      script,
      `import { CorpusIndex } from ${JSON.stringify(join(import.meta.dirname, "corpus-index.ts"))};
      await CorpusIndex.open(process.argv[2], { segmentPostings: 3000, onProgress: (p) => {
        if (p.docs >= 4000) process.kill(process.pid, "SIGKILL");
      } });`,
    );
    const child = spawnSync(process.execPath, ["--import", "tsx", script, corpus], { encoding: "utf8" });
    expect(child.signal).toBe("SIGKILL");
    expect(() => CorpusIndex.openDir(defaultIndexDir(corpus))).toThrow(/incomplete/);
    const resumed = await CorpusIndex.open(corpus, { segmentPostings: 3000 });
    expect(resumed.continued).toBe(true);
    expect(resumed.added).toBeLessThan(6000);
    expect(resumed.index.size).toBe(6000);
    const fresh = new MemoryIndex(docs);
    for (const q of ["Town 5999", "river Tarn 40", "Esk"])
      expect(await resumed.index.search(q, 5)).toEqual(fresh.search(q, 5));
  });

  it("stops at the first bad row by default; with badRows 'skip' counts every bad row by line", async () => {
    const corpus = await writeCorpusFile();
    const lines = [
      row("a", "Alpha", "first"),
      '{"title":"no id","text":"t"}',
      row("a", "Alpha again", "duplicate"),
      "not json",
      JSON.stringify({ id: "big", title: "Big", text: "x ".repeat(600) }),
      row("b", "Beta", "second"),
    ];
    await writeFile(
      corpus,
      Buffer.concat([Buffer.from(`${lines.join("\n")}\n`), Buffer.from([0x7b, 0xff, 0xfe, 0x0a])]),
    );
    await expect(CorpusIndex.open(corpus)).rejects.toThrow(`${corpus}:2: field "id"`);
    const { index } = await CorpusIndex.open(corpus, { badRows: "skip", maxRowBytes: 1000 });
    expect(index.size).toBe(2);
    expect(index.manifest.complete).toBe(true);
    expect(index.manifest.skipped.count).toBe(5);
    expect(index.manifest.skipped.examples).toEqual([
      `${corpus}:2: field "id": expected a non-empty string or an integer`,
      `${corpus}:3: field "id": duplicate id "a" (first on line 1)`,
      expect.stringMatching(new RegExp(`^${corpus}:4: invalid JSON`)),
      `${corpus}:5: row of 1236 bytes is over the limit of 1000`,
      `${corpus}:7: not valid UTF-8`,
    ]);
  });

  it("reads Search-R1 JSONL, DPR TSV and gzip corpora", async () => {
    const base = await writeCorpusFile();
    const searchR1 = `${base}.r1.jsonl.gz`;
    await writeFile(
      searchR1,
      gzipSync(
        [
          JSON.stringify({ id: "0", contents: '"Aaron"\nAaron is a prophet in the Hebrew Bible.' }),
          JSON.stringify({ id: 1, contents: '"Abba (band)"\nABBA is a Swedish pop group.' }),
        ].join("\n"),
      ),
    );
    const r1 = (await CorpusIndex.open(searchR1)).index;
    expect(await r1.retrieve("Swedish pop", 1)).toMatchObject([
      { doc: { id: "1", title: "Abba (band)", text: "ABBA is a Swedish pop group." } },
    ]);
    const dpr = `${base}.psgs.tsv`;
    await writeFile(
      dpr,
      'id\ttext\ttitle\n1\t"Aaron ( or ; ""Ahärôn"") is a prophet"\tAaron\n2\tABBA is a pop group\tABBA\n',
    );
    const tsv = (await CorpusIndex.open(dpr)).index;
    expect(await tsv.retrieve("Aharon prophet", 1)).toMatchObject([
      { doc: { id: "1", title: "Aaron", text: 'Aaron ( or ; "Ahärôn") is a prophet' } },
    ]);
    await writeFile(`${base}.bad.jsonl.gz`, "not gzip");
    await expect(CorpusIndex.open(`${base}.bad.jsonl.gz`)).rejects.toThrow(/not a readable gzip file/);
  });

  it("finds documents by url, tolerating trailing slashes, fragments and percent-encoding", async () => {
    const { index } = await CorpusIndex.open(await writeCorpusFile());
    expect((await index.documentByUrl("https://world.local/wiki/Ilse_Brandt/#early-life"))?.id).toBe("w2");
    expect((await index.documentByUrl("https://WORLD.local/wiki/Veltmoor"))?.id).toBe("w1");
    expect(await index.documentByUrl("https://world.local/wiki/Nowhere")).toBeUndefined();
    expect(normalizeUrl("https://a.org/x%20y/")).toBe("https://a.org/x y");
  });

  it("keeps the documents in the index: an index reads without its corpus", async () => {
    const corpus = await writeCorpusFile();
    const { index } = await CorpusIndex.open(corpus);
    await writeFile(corpus, "");
    expect((await index.search("Veltmoor", 1))[0].title).toBe("Veltmoor");
    const alone = CorpusIndex.openDir(defaultIndexDir(corpus));
    expect(await alone.search("Dunmere", 1)).toEqual(await index.search("Dunmere", 1));
  });
});
