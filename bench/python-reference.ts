// The runtime benches (onnx, llama-cpp) take their reference from the engine itself: a Python script
// of bench/ run with the engine's package importable, whose last stdout line is one JSON object.

import { execFile } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { findPython } from "../src/model/index.js";

const exec = promisify(execFile);
const REPO = fileURLToPath(new URL("..", import.meta.url));

/** Runs `bench/<script> ...args` with the engine importable and parses its last line. */
export async function pythonReference<T>(script: string, args: string[]): Promise<T> {
  const { python } = await findPython();
  const { stdout } = await exec(python, [join(REPO, "bench", script), ...args], {
    env: { ...process.env, PYTHONPATH: join(REPO, "engine") },
    timeout: 600_000,
  });
  return JSON.parse(stdout.trim().split("\n").at(-1)!) as T;
}
