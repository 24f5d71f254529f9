import { appendFile, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CorpusIndex, defaultIndexDir, MemoryIndex, normalizeUrl } from "./corpus-index.js";
import { WORLD_DOCS, writeCorpusFile } from "./test-corpus.js";

describe("MemoryIndex", () => {
  it("ranks and snippets documents in memory exactly as the persisted index does", async () => {
    const { index } = await CorpusIndex.open(await writeCorpusFile());
    const memory = new MemoryIndex(WORLD_DOCS);
    for (const query of ["Ilse Brandt", "bridge", "mining village", "the of and"])
      expect(memory.search(query, 3)).toEqual(await index.search(query, 3));
  });
});

describe("CorpusIndex", () => {
  it("ranks by BM25 with titles boosted, and snippets the relevant sentence", async () => {
    const { index, reused } = await CorpusIndex.open(await writeCorpusFile());
    expect(reused).toBe(false);
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
  });

  it("persists next to the corpus and reloads without re-indexing while the corpus is unchanged", async () => {
    const corpus = await writeCorpusFile();
    const built = await CorpusIndex.open(corpus, { onProgress: () => {} });
    const dir = defaultIndexDir(corpus);
    const manifest = JSON.parse(await readFile(join(dir, "manifest.json"), "utf8"));
    expect(manifest).toMatchObject({
      corpus: { path: corpus },
      docCount: 5,
      library: { name: "minisearch" },
    });

    const again = await CorpusIndex.open(corpus, { onProgress: () => expect.fail("must not re-index") });
    expect(again.reused).toBe(true);
    expect(again.index.manifest.builtAt).toBe(built.index.manifest.builtAt);
    expect(await again.index.search("capital Kestrel Bay", 1)).toEqual(
      await built.index.search("capital Kestrel Bay", 1),
    );

    await appendFile(
      corpus,
      `${JSON.stringify({ id: "w6", title: "Kestrel Bay", text: "The capital of Arden." })}\n`,
    );
    const changed = await CorpusIndex.open(corpus);
    expect(changed.reused).toBe(false);
    expect(changed.index.size).toBe(6);
  });

  it("rebuilds a damaged index instead of trusting it, and honours an explicit index dir", async () => {
    const corpus = await writeCorpusFile();
    const indexDir = join(corpus, "..", "my-index");
    await CorpusIndex.open(corpus, { indexDir });
    await writeFile(join(indexDir, "index.json"), "{ broken");
    const reopened = await CorpusIndex.open(corpus, { indexDir });
    expect(reopened.reused).toBe(false);
    expect((await reopened.index.search("Dunmere", 1))[0].title).toBe("Dunmere");
  });

  it("rejects duplicate ids naming both lines", async () => {
    const corpus = await writeCorpusFile([...WORLD_DOCS, { ...WORLD_DOCS[2], title: "Arden (again)" }]);
    await expect(CorpusIndex.open(corpus)).rejects.toThrow(
      `${corpus}:6: field "id": duplicate id "w3" (first on line 3)`,
    );
  });

  it("finds documents by url, tolerating trailing slashes, fragments and percent-encoding", async () => {
    const { index } = await CorpusIndex.open(await writeCorpusFile());
    expect((await index.documentByUrl("https://world.local/wiki/Ilse_Brandt/#early-life"))?.id).toBe("w2");
    expect((await index.documentByUrl("https://WORLD.local/wiki/Veltmoor"))?.id).toBe("w1");
    expect(await index.documentByUrl("https://world.local/wiki/Nowhere")).toBeUndefined();
    expect(normalizeUrl("https://a.org/x%20y/")).toBe("https://a.org/x y");
  });

  it("says to re-index when the corpus changed under a loaded index", async () => {
    const corpus = await writeCorpusFile();
    const { index } = await CorpusIndex.open(corpus);
    await writeFile(
      corpus,
      [...WORLD_DOCS]
        .reverse()
        .map((d) => JSON.stringify(d))
        .join("\n"),
    );
    await expect(index.search("Veltmoor", 1)).rejects.toThrow(/changed since it was indexed|coa index/);
  });
});
