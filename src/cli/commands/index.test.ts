import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { commands, registerCommands } from "./index.js";

const names = (program: Command) => program.commands.map((c) => c.name());

describe("registerCommands", () => {
  it("registers only the named command, which is the one its module defines", async () => {
    for (const { name } of commands) {
      const program = new Command();
      await registerCommands(program, name);
      expect(names(program)).toEqual([name]);
    }
  });

  it("registers every command, in pipeline order, when no command is named", async () => {
    for (const first of [undefined, "--help", "help", "evl"]) {
      const program = new Command();
      await registerCommands(program, first);
      expect(names(program)).toEqual(commands.map((c) => c.name));
    }
  });
});
