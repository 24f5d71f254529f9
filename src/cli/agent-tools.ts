import pc from "picocolors";
import type { RunOptions } from "../runtime/index.js";
import { CorpusIndex, createToolset } from "../tools/index.js";
import type { AgentFlags } from "./agent-flags.js";

/**
 * The profile's tools. The corpus index is opened now, so a bad corpus fails before the model runs
 * rather than inside a tool call.
 */
export async function openAgentTools(
  flags: AgentFlags,
  print: (line: string) => void,
): Promise<RunOptions["tools"]> {
  let index: CorpusIndex | undefined;
  if (flags.corpus) {
    const opened = await CorpusIndex.open(flags.corpus);
    if (!opened.reused) print(pc.dim(`indexed ${flags.corpus}`));
    index = opened.index;
  }
  return createToolset({
    profile: flags.profile,
    index,
    search: {
      provider: flags.search,
      baseUrl: flags.searchUrl,
      apiKey: flags.search === "serper" ? process.env.SERPER_API_KEY : undefined,
      topK: flags.searchTopK,
    },
    crawl: { offline: flags.offline },
    code: { unsafeNoSandbox: flags.unsafeNoSandbox },
  });
}
