import { afterEach, describe, expect, it } from "vitest";
import { openModel } from "./open.js";
import { FixtureServer } from "./testing/index.js";

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
