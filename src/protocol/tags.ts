import { z } from "zod";

/** Tags a model writes to show which agent role is speaking. */
export const ROLE_TAGS = [
  "think",
  "plan",
  "reflection",
  "suggested_answer",
  "double_check",
  "answer",
] as const;
/** Tags a model writes to call a tool agent; generation stops on their closing tag. */
export const TOOL_TAGS = ["web_search", "crawl_page", "code", "wiki_search"] as const;
/** Written by the runtime around every tool result, never by the model. */
export const OBSERVATION_TAG = "observation";

export const RoleTag = z.enum(ROLE_TAGS);
export type RoleTag = z.infer<typeof RoleTag>;
export const ToolTag = z.enum(TOOL_TAGS);
export type ToolTag = z.infer<typeof ToolTag>;
export type Tag = RoleTag | ToolTag | typeof OBSERVATION_TAG;

export const ALL_TAGS: readonly Tag[] = [...ROLE_TAGS, ...TOOL_TAGS, OBSERVATION_TAG];

export const ProfileName = z.enum(["web", "mhqa", "code", "all"]);
export type ProfileName = z.infer<typeof ProfileName>;

export interface Profile {
  readonly name: ProfileName;
  readonly roles: readonly RoleTag[];
  readonly tools: readonly ToolTag[];
}

const CORE_ROLES: readonly RoleTag[] = ["think", "plan", "answer"];
const VERIFYING_ROLES: readonly RoleTag[] = ["reflection", "suggested_answer", "double_check"];

/** Which tags each profile enables (docs/protocol.md, "Tags"). */
export const PROFILES: Readonly<Record<ProfileName, Profile>> = {
  web: { name: "web", roles: [...CORE_ROLES, ...VERIFYING_ROLES], tools: ["web_search", "crawl_page"] },
  mhqa: { name: "mhqa", roles: CORE_ROLES, tools: ["wiki_search"] },
  code: { name: "code", roles: CORE_ROLES, tools: ["code"] },
  all: { name: "all", roles: ROLE_TAGS, tools: TOOL_TAGS },
};

export const openTag = (tag: Tag): string => `<${tag}>`;
export const closeTag = (tag: Tag): string => `</${tag}>`;

/** Generation stops on the closing tag of every enabled tool and on `</answer>`; the tag is kept. */
export function stopSequences(profile: Profile | ProfileName): string[] {
  const p = typeof profile === "string" ? PROFILES[profile] : profile;
  return [...p.tools.map(closeTag), closeTag("answer")];
}

/** Every open and close tag as a string, in a fixed order: the tokenizer's special tokens. */
export function tagTokens(): string[] {
  return ALL_TAGS.flatMap((t) => [openTag(t), closeTag(t)]);
}
