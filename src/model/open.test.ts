import { afterEach, describe, expect, it } from "vitest";
import { openModel, parseModelSpec } from "./open.js";
import { FixtureServer } from "./testing/index.js";

describe("parseModelSpec", () => {
  it.each([
    ["http://127.0.0.1:8000/v1", { kind: "http", baseUrl: "http://127.0.0.1:8000/v1" }],
    ["https://api.example.com", { kind: "http", baseUrl: "https://api.example.com" }],
    ["engine", { kind: "engine", source: { preset: "micro" } }],
    ["engine:tiny", { kind: "engine", source: { preset: "tiny" } }],
    ["engine:hf:Qwen/Qwen2.5-0.5B", { kind: "engine", source: { hfModel: "Qwen/Qwen2.5-0.5B" } }],
    ["engine:runs/sft/ckpt", { kind: "engine", source: { checkpoint: "runs/sft/ckpt" } }],
    ["engine:ckpt", { kind: "engine", source: { checkpoint: "ckpt" } }],
  ])("reads %s", (spec, expected) => {
    expect(parseModelSpec(spec)).toEqual(expected);
  });

  it("rejects anything else with the accepted forms", () => {
    expect(() => parseModelSpec("gpt-4o")).toThrow(
      /--model must be an http\(s\) base URL, engine, engine:<preset>/,
    );
  });
});

describe("openModel", () => {
  let fixture: FixtureServer | undefined;
  afterEach(() => fixture?.close());

  it("asks an HTTP server for its model when none is named", async () => {
    fixture = await FixtureServer.start({
      "GET /v1/models": () => ({ json: { data: [{ id: "served-model" }] } }),
    });
    const model = await openModel(`${fixture.url}/v1`);
    expect(model.name).toBe("served-model");
    expect((await openModel(fixture.url, { modelName: "named" })).name).toBe("named");
  });

  it("uses the byte tokenizer for text-only servers", async () => {
    // Both forced, so nothing is asked of the (absent) server.
    const model = await openModel("http://127.0.0.1:9/v1", {
      modelName: "m",
      textOnly: true,
      api: "completions",
    });
    expect(model.tokenizer).toBe("coa-byte-v1");
    expect(await model.tokenize("<answer>")).toHaveLength(1);
  });
});
