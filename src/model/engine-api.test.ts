import { describe, expect, it } from "vitest";
import { engineLoadLine } from "./engine-api.js";

describe("engineLoadLine", () => {
  it("says how busy the engine was, where the time went and how full its batch ran", () => {
    const counters = {
      generated_tokens: 3200,
      decode_steps: 200,
      generation_seconds: 8,
      admit_seconds: 2,
      decode_seconds: 5,
      trained_tokens: 0,
      train_seconds: 0,
    };
    expect(engineLoadLine(counters, 10)).toBe(
      "engine: 3200 tokens generated in 8.0 s busy of 10.0 s: admitting 2.0 s, decoding 5.0 s, sampling 1.0 s " +
        "(400 tok/s while busy, 16.0 tokens a decode step)",
    );
    expect(engineLoadLine({ ...counters, stepped_prefills: 12 }, 10)).toContain(
      "decoding 5.0 s (12 prompts' ids among them), sampling 1.0 s",
    );
    // The busy thread's time on a core: the rest it waited for one.
    expect(engineLoadLine({ ...counters, generation_cpu_seconds: 6.54 }, 10)).toContain(
      "in 8.0 s busy (6.5 s on a core) of 10.0 s: admitting",
    );
  });

  it("counts the drafted ids that speculative decoding fed and kept", () => {
    const counters = {
      generated_tokens: 3200,
      decode_steps: 100,
      generation_seconds: 8,
      drafted_tokens: 4000,
      accepted_tokens: 1700,
      trained_tokens: 0,
      train_seconds: 0,
    };
    expect(engineLoadLine(counters, 10)).toBe(
      "engine: 3200 tokens generated in 8.0 s busy of 10.0 s " +
        "(400 tok/s while busy, 32.0 tokens a decode step, 1700 of 4000 drafted ids accepted)",
    );
  });

  it("leaves out what an older engine does not report", () => {
    const counters = { generated_tokens: 0, generation_seconds: 0, trained_tokens: 0, train_seconds: 0 };
    expect(engineLoadLine(counters, 1)).toBe(
      "engine: 0 tokens generated in 0.0 s busy of 1.0 s (0 tok/s while busy)",
    );
  });
});
