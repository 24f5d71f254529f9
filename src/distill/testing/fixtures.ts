import type { AgentName, MasMessage, MasTrace, MessageKind } from "../../teacher/index.js";

/**
 * Small hand-written MAS traces for tests and docs examples: what a teacher run writes, one trace
 * per JSONL line. `say` numbers messages in order.
 */
export function traceOf(messages: MasMessage[], over: Partial<MasTrace> = {}): MasTrace {
  return {
    version: 1,
    taskId: "t1",
    question: "Which city was the founder of Acme Robotics born in?",
    answers: ["Lyon"],
    taskKind: "multihop",
    source: "world",
    driver: "expert",
    model: "expert-v1",
    tokenizer: "coa-byte-v1",
    messages,
    finalAnswer: "Lyon",
    reward: 1,
    error: null,
    stats: {
      agentCalls: 8,
      toolCalls: 2,
      replans: 0,
      reflections: 1,
      tokensIn: 900,
      tokensOut: 300,
      tokensCached: 0,
      wallMs: 1200,
    },
    ...over,
  };
}

type Extra = Partial<Pick<MasMessage, "tool" | "score" | "ok" | "ms">>;

/** Builds a message list with consecutive indices. */
export function conversation(
  ...turns: [from: AgentName, to: AgentName, kind: MessageKind, content: string, extra?: Extra][]
): MasMessage[] {
  return turns.map(([from, to, kind, content, extra], index) => ({
    index,
    from,
    to,
    kind,
    content,
    tokensIn: from === "tool" ? 0 : 50,
    tokensOut: from === "tool" ? 0 : 20,
    tokensCached: 0,
    ms: 10,
    ...extra,
  }));
}

/** Every message kind once or more: a search, a failed program, the critic's fix, a rejected and an accepted answer. */
export function fullTrace(over: Partial<MasTrace> = {}): MasTrace {
  return traceOf(
    conversation(
      ["user", "manager", "task", "Which city was the founder of Acme Robotics born in?"],
      [
        "manager",
        "searcher",
        "plan",
        "1. Find who founded Acme Robotics. 2. Find where that person was born.",
      ],
      ["manager", "searcher", "delegate", "Find the founder of Acme Robotics."],
      ["searcher", "searcher", "reasoning", "A search for the company should name its founder."],
      [
        "searcher",
        "tool",
        "tool_call",
        "searching",
        { tool: { name: "web_search", args: "Acme Robotics founder" } },
      ],
      [
        "tool",
        "searcher",
        "observation",
        "1. Acme Robotics — https://w/acme\n   Founded in 1999 by Mara Quist.\n",
        { ok: true, ms: 40 },
      ],
      ["searcher", "manager", "report", "Acme Robotics was founded by Mara Quist."],
      ["manager", "coder", "delegate", "Check the founding year arithmetic."],
      [
        "coder",
        "tool",
        "tool_call",
        "running",
        { tool: { name: "code", args: "```python\nprint(2024 - 1999\n```" } },
      ],
      ["tool", "coder", "observation", "SyntaxError: '(' was never closed", { ok: false, ms: 30 }],
      ["critic", "manager", "reflection", "The program had a syntax error; close the parenthesis and rerun."],
      [
        "coder",
        "tool",
        "tool_call",
        "running",
        { tool: { name: "code", args: "```python\nprint(2024 - 1999)\n```" } },
      ],
      ["tool", "coder", "observation", "25", { ok: true, ms: 30 }],
      ["coder", "manager", "report", "The company is 25 years old."],
      ["manager", "verifier", "proposal", "Paris"],
      ["verifier", "manager", "verdict", "No source says Mara Quist was born in Paris.", { score: 2 }],
      ["manager", "searcher", "plan", "Search for Mara Quist's birthplace directly."],
      [
        "searcher",
        "tool",
        "tool_call",
        "searching",
        { tool: { name: "web_search", args: "Mara Quist born" } },
      ],
      [
        "tool",
        "searcher",
        "observation",
        "1. Mara Quist — https://w/mara\n   Born in Lyon in 1970.",
        { ok: true },
      ],
      ["searcher", "manager", "report", "Mara Quist was born in Lyon."],
      ["critic", "manager", "reflection", "The first proposal was a guess; the new source settles it."],
      ["manager", "verifier", "proposal", "Lyon"],
      ["verifier", "manager", "verdict", "The page states Lyon. Score: 5", { score: 5 }],
      ["manager", "user", "final", "Lyon"],
    ),
    over,
  );
}

/** The shortest trace that passes every default filter: plan, one search, checked answer. */
export function shortTrace(over: Partial<MasTrace> = {}, question = "Who founded Acme Robotics?"): MasTrace {
  return traceOf(
    conversation(
      ["user", "manager", "task", question],
      ["manager", "searcher", "plan", "Search for the founder."],
      ["searcher", "tool", "tool_call", "", { tool: { name: "web_search", args: question } }],
      ["tool", "searcher", "observation", "1. Acme Robotics — founded by Mara Quist.", { ok: true }],
      ["manager", "verifier", "proposal", "Mara Quist"],
      ["verifier", "manager", "verdict", "The result names her.", { score: 4 }],
      ["manager", "user", "final", "Mara Quist"],
    ),
    { question, answers: ["Mara Quist"], finalAnswer: "Mara Quist", ...over },
  );
}
