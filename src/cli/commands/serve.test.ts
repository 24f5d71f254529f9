import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { register } from "./serve.js";

function program(): Command {
  const p = new Command().exitOverride();
  register(p);
  return p;
}

describe("coa serve", () => {
  it("takes coa run's model and tool flags, and shows examples in --help", () => {
    const p = program();
    let help = "";
    p.commands[0]!.configureOutput({ writeOut: (s) => (help += s) });
    expect(() => p.parse(["node", "coa", "serve", "--help"])).toThrow("(outputHelp)");
    for (const flag of [
      "--model",
      "--corpus",
      "--profile",
      "--port",
      "--host",
      "--api-key",
      "--concurrency",
      "--log",
    ])
      expect(help).toContain(flag);
    expect(help).toContain("Examples:");
    expect(help).toContain("delta.coa_step");
  });

  it("rejects bad flags with the flag's name before opening anything", async () => {
    await expect(
      program().parseAsync(["node", "coa", "serve", "--model", "engine", "--concurrency", "0"]),
    ).rejects.toThrow(/^--concurrency: /);
    await expect(
      program().parseAsync(["node", "coa", "serve", "--model", "engine", "--port", "http"]),
    ).rejects.toThrow(/^--port: /);
  });
});
