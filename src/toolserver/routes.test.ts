import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROUTES, type RunningToolServer, startToolServer } from "./index.js";
import { post, worldConfig } from "./testing.js";

let server: RunningToolServer;
let url: string;

beforeAll(async () => {
  server = await startToolServer(await worldConfig(), { host: "127.0.0.1", port: 0, routes: ROUTES });
  url = server.url;
});
afterAll(() => server.close());

describe("tool server routes in the shapes trainers send", () => {
  it("POST /retrieve answers Search-R1's request with scored documents", async () => {
    const { status, json } = await post(`${url}/retrieve`, {
      queries: ["mayor of Veltmoor", "glass bridge length"],
      topk: 2,
      return_scores: true,
    });
    expect(status).toBe(200);
    expect(json.result).toHaveLength(2);
    const [first] = json.result[0];
    expect(Object.keys(first).sort()).toEqual(["document", "score"]);
    expect(first.document.id).toMatch(/^w\d$/);
    expect(first.document.contents).toMatch(/^"[^"\n]+"\n/);
    expect(first.score).toBeGreaterThan(0);
    expect(json.result[1][0].document).toEqual({
      id: "w4",
      contents:
        '"Glass bridge of Veltmoor"\nThe glass bridge crosses the river Sable at Veltmoor. It opened in 1899 and is 120 metres long.',
    });
    for (const docs of json.result) expect(docs.length).toBeLessThanOrEqual(2);
  });

  it("POST /retrieve without scores gives bare document lists, the server's topk by default", async () => {
    const { json } = await post(`${url}/retrieve`, { queries: ["Arden province"], topk: null });
    expect(json.result[0]).toHaveLength(3);
    for (const doc of json.result[0]) expect(Object.keys(doc).sort()).toEqual(["contents", "id"]);
  });

  it("POST /search answers in Serper's shape", async () => {
    const { status, json } = await post(`${url}/search`, { q: "Ilse Brandt chemistry", num: 2 });
    expect(status).toBe(200);
    expect(json.organic.length).toBeGreaterThan(0);
    expect(json.organic.length).toBeLessThanOrEqual(2);
    expect(json.organic[0]).toMatchObject({
      title: "Ilse Brandt",
      link: "https://world.local/wiki/Ilse_Brandt",
      position: 1,
    });
    expect(json.organic[0].snippet).toContain("Ilse Brandt");
  });

  it("POST /crawl_page reads corpus pages by URL, with AFM's extra fields", async () => {
    const { status, json } = await post(`${url}/crawl_page`, {
      urls: ["[Arden](https://world.local/wiki/Arden)", "https://world.local/wiki/Veltmoor/"],
      task: "What is the capital of Arden?",
      web_search_query: "Arden capital",
      think_content: "read the Arden page",
      summary_type: "page",
      chunk_size: 8192,
      do_last_summary: false,
      api_url: null,
      api_key: null,
      model: null,
    });
    expect(status).toBe(200);
    expect(json.success).toBe(true);
    expect(json.obs).toContain("Kestrel Bay");
    expect(json.obs).toContain("founded in 1712");
    expect(json.error_message).toBeUndefined();
    expect(typeof json.processing_time).toBe("number");
  });

  it("POST /crawl_page of a page not in the corpus fails with a reason, offline", async () => {
    const { json } = await post(`${url}/crawl_page`, { urls: ["https://example.com/nowhere"] });
    expect(json).toMatchObject({ success: false });
    expect(json.error_message).toMatch(/not in the local corpus/i);
    const none = await post(`${url}/crawl_page`, { urls: [" | "] });
    expect(none.json).toMatchObject({ success: false, obs: "", error_message: "No valid URL found" });
  });

  it("POST /run_code runs verl's sandbox-fusion request in the sandbox", async () => {
    const { status, json } = await post(`${url}/run_code`, {
      compile_timeout: 10,
      run_timeout: 5,
      code: "import sys\nprint(sum(map(int, sys.stdin.read().split())))",
      stdin: "2 3 4",
      memory_limit_MB: 512,
      language: "python",
      files: {},
      fetch_files: [],
    });
    expect(status).toBe(200);
    expect(json.status).toBe("Success");
    expect(json.run_result).toMatchObject({ status: "Finished", stdout: "9\n", stderr: "", return_code: 0 });
    expect(json.run_result.execution_time).toBeGreaterThan(0);
  });

  it("POST /run_code reports failures, time limits and other languages as sandbox-fusion does", async () => {
    const crash = await post(`${url}/run_code`, { code: "1/0" });
    expect(crash.json.status).toBe("Failed");
    expect(crash.json.run_result).toMatchObject({ status: "Finished", return_code: 1 });
    expect(crash.json.run_result.stderr).toContain("ZeroDivisionError");
    const slow = await post(`${url}/run_code`, { code: "while True: pass", run_timeout: 0.5 });
    expect(slow.json).toMatchObject({ status: "Failed", run_result: { status: "TimeLimitExceeded" } });
    const cpp = await post(`${url}/run_code`, { code: "int main(){}", language: "cpp" });
    expect(cpp.status).toBe(200);
    expect(cpp.json).toMatchObject({ status: "SandboxError", run_result: null });
    expect(cpp.json.message).toMatch(/python only/);
  });

  it("POST /score scores a verl row's ground truth or a coa task", async () => {
    const verl = await post(`${url}/score`, {
      data_source: "nq",
      ground_truth: ["Ilse Brandt"],
      solution_str: "<think>The page says so.</think>\n<answer>ilse brandt</answer>",
    });
    expect(verl.status).toBe(200);
    expect(verl.json).toMatchObject({ score: 1, error: null });
    const math = await post(`${url}/score`, {
      data_source: "math500",
      ground_truth: "\\frac{1}{2}",
      answer: "0.5",
    });
    expect(math.json).toMatchObject({ score: 1, scorer: "math" });
    const task = { id: "t1", question: "Founded?", answers: ["1712"], kind: "qa", source: "world" };
    expect((await post(`${url}/score`, { task, answer: "1899" })).json).toMatchObject({
      score: 0,
      error: null,
    });
    expect((await post(`${url}/score`, { task, solution_str: "no answer tag" })).json.score).toBe(0);
  });

  it("integrations/verl/coa_reward.py scores through POST /score with the standard library", async () => {
    const script = [
      "import sys",
      "sys.path.insert(0, 'integrations/verl')",
      "from coa_reward import compute_score",
      "print(compute_score('nq', '<answer>Ilse Brandt</answer>', {'target': ['Ilse Brandt']}))",
      "print(compute_score('nq', 'no answer', ['Ilse Brandt'], {'index': 3}))",
    ].join("\n");
    // Asynchronous: the server answering it runs in this process.
    const { stdout } = await promisify(execFile)("python3", ["-c", script], {
      env: { ...process.env, COA_SCORE_URL: `${url}/score` },
    });
    expect(stdout).toBe("1.0\n0.0\n");
  });

  it("GET /health says which routes this listener serves", async () => {
    const res = await fetch(`${url}/health`);
    expect(await res.json()).toMatchObject({ status: "healthy", routes: [...ROUTES] });
  });
});
