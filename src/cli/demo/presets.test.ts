import { expect, it } from "vitest";
import { parseSeeds } from "../../tasks/index.js";
import { checkPresetSeeds, DEMO_PRESETS } from "./presets.js";

it("every preset tests on a world none of its stages trains on, and a config that breaks this is refused", () => {
  for (const p of Object.values(DEMO_PRESETS)) {
    expect(checkPresetSeeds(p)).toBe(p);
    expect(parseSeeds(p.trainSeeds).length).toBeGreaterThan(1);
  }
  expect(() => checkPresetSeeds({ ...DEMO_PRESETS.quick, trainSeeds: "1-3" })).toThrow("must be unseen");
});
