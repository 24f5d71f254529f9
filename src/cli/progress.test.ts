import { describe, expect, it } from "vitest";
import { itemProgress } from "./progress.js";

function plain(label: string, opts: Parameters<typeof itemProgress>[1] = {}) {
  const lines: string[] = [];
  const progress = itemProgress(label, { tty: false, print: (l) => lines.push(l), ...opts });
  return { progress, lines };
}

describe("itemProgress without a TTY", () => {
  it("prints counts, rate, ETA and the note every n items and once at the end", () => {
    const { progress, lines } = plain("sft", { every: { items: 2 } });
    for (let done = 1; done <= 5; done++) progress.update(done, 5, `loss ${done}`);
    progress.update(5, 5, "loss 5");
    progress.stop();
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^sft: 2\/5 \| \d+\.\d\d\/s \| eta (\d+[smh]|\?) \(loss 2\)$/);
    expect(lines[1]).toMatch(/^sft: 4\/5 /);
    expect(lines[2]).toMatch(/^sft: 5\/5 \| \d+\.\d\d\/s \(loss 5\)$/);
  });

  it("shows a percentage at each crossed part of the total", () => {
    const { progress, lines } = plain("indexing", { every: { parts: 10 }, percent: true });
    for (const bytes of [50, 120, 130, 450, 1000]) progress.update(bytes, 1000, `${bytes} docs`);
    expect(lines[0]).toMatch(/^indexing: 12% \| eta \S+ \(120 docs\)$/);
    expect(lines.slice(1).map((l) => l.replace(/ \| eta \S+/, ""))).toEqual([
      "indexing: 45% (450 docs)",
      "indexing: 100% (1000 docs)",
    ]);
  });

  it("throttles by time by default but always prints the first and the last update", () => {
    const { progress, lines } = plain("teach");
    for (let done = 1; done <= 100; done++) progress.update(done, 100);
    expect(lines.map((l) => l.split(" |")[0])).toEqual(["teach: 1/100", "teach: 100/100"]);
  });
});
