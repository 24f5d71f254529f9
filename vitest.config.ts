import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["src/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Engine tests spawn PyTorch workers; two cores cannot feed many at once.
    maxWorkers: 2,
    globalSetup: ["vitest.temp-dir.ts"],
  },
});
