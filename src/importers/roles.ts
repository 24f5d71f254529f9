import { readFile } from "node:fs/promises";
import { z } from "zod";
import { TOOL_TAGS, type ToolTag } from "../protocol/index.js";

/**
 * What an agent of the user's team is to the distiller. "planner" writes plans (→ <plan>), "critic"
 * reviews (→ <reflection>), "verifier" scores answers (→ <double_check>), "manager" delegates and
 * answers, "searcher" and "coder" are workers whose reports become the model's own conclusions.
 */
export const TeamRole = z.enum(["manager", "planner", "searcher", "coder", "critic", "verifier"]);
export type TeamRole = z.infer<typeof TeamRole>;

/** `--roles roles.json`: exact agent and tool names; anything not named falls back to the defaults. */
export const RoleTable = z
  .object({
    agents: z.record(z.string(), TeamRole).default({}),
    tools: z.record(z.string(), z.enum(TOOL_TAGS)).default({}),
  })
  .strict();
export type RoleTable = z.infer<typeof RoleTable>;

// Name patterns for teams that bring no table; the first match wins, so narrower words come first.
const AGENT_PATTERNS: readonly [RegExp, TeamRole][] = [
  [/plan/i, "planner"],
  [/critic|review|reflect/i, "critic"],
  [/verif|judge|grader|check/i, "verifier"],
  [/cod(e|er|ing)|python|program|math|calc/i, "coder"],
  [/search|research|brows|retriev|web|wiki|read/i, "searcher"],
  [/manag|orchestr|triage|lead|supervis|coordinat|router/i, "manager"],
];

const TOOL_PATTERNS: readonly [RegExp, ToolTag][] = [
  [/wiki/i, "wiki_search"],
  [/search|query|lookup|retriev/i, "web_search"],
  [/crawl|fetch|browse|open|page|url|visit|scrape/i, "crawl_page"],
  [/code|python|exec|interpreter|sandbox|run_/i, "code"],
];

/** How a name was resolved: from the user's table, a name pattern, or neither. */
export type Resolution<T> = { value: T; by: "table" | "pattern" } | { value: null; by: "none" };

export function resolveAgent(table: RoleTable, name: string): Resolution<TeamRole> {
  const named = table.agents[name];
  if (named) return { value: named, by: "table" };
  const hit = AGENT_PATTERNS.find(([re]) => re.test(name));
  return hit ? { value: hit[1], by: "pattern" } : { value: null, by: "none" };
}

export function resolveTool(table: RoleTable, name: string): Resolution<ToolTag> {
  const named = table.tools[name];
  if (named) return { value: named, by: "table" };
  if ((TOOL_TAGS as readonly string[]).includes(name)) return { value: name as ToolTag, by: "pattern" };
  const hit = TOOL_PATTERNS.find(([re]) => re.test(name));
  return hit ? { value: hit[1], by: "pattern" } : { value: null, by: "none" };
}

export async function loadRoleTable(file: string): Promise<RoleTable> {
  let data: unknown;
  try {
    data = JSON.parse(await readFile(file, "utf8"));
  } catch (err) {
    throw new Error(`--roles ${file}: ${(err as Error).message}`);
  }
  const parsed = RoleTable.safeParse(data);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`--roles ${file}: ${issue.path.join(".") || "(root)"}: ${issue.message}`);
  }
  return parsed.data;
}
