export { Bm25Mode } from "./bm25.js";
export { type CodeArgs, createCodeTool } from "./code-tool.js";
export { CorpusDoc, CorpusError } from "./corpus.js";
export {
  type BuildProgress,
  CorpusIndex,
  DEFAULT_BM25,
  defaultIndexDir,
  type IndexManifest,
  MemoryIndex,
  type OpenIndexOptions,
} from "./corpus-index.js";
export { type CrawlArgs, createCrawlTool } from "./crawl-tool.js";
export { truncateText, withDeadline } from "./guard.js";
export {
  type KilledBy,
  type PythonRun,
  probeSandbox,
  type RunPythonRequest,
  runPython,
  SandboxLimits,
  SandboxOptions,
  SandboxUnavailableError,
  WARM_SANDBOX_MARK,
} from "./sandbox.js";
export { formatHits, type SearchHit } from "./search-results.js";
export { createSearchTool, type SearchArgs } from "./search-tool.js";
export { ToolCaller, type ToolCallOutcome } from "./tool-caller.js";
export { createToolset, prepareToolset, ToolsetConfig } from "./toolset.js";
export * from "./types.js";
export { type SearchBackend, searxngBackend, serperBackend } from "./web-search.js";
