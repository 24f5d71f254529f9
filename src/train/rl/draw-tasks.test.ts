import { describe, expect, it } from "vitest";
import type { Task } from "../../tasks/index.js";
import { drawTasks } from "./trainer.js";

const tasks: Task[] = Array.from({ length: 5 }, (_, i) => ({
  id: `t${i}`,
  question: `q${i}`,
  answers: ["a"],
  kind: "qa",
  source: "test",
  meta: {},
}));

describe("drawTasks", () => {
  it("walks a seeded order, each task once per epoch, wrapping into the next epoch", () => {
    const first = drawTasks(tasks, 3, { epoch: 0, position: 0 }, 9);
    const second = drawTasks(tasks, 3, first, 9);
    expect(new Set([...first.drawn, ...second.drawn.slice(0, 2)].map((t) => t.id)).size).toBe(5);
    expect(second).toMatchObject({ epoch: 1, position: 1 });
  });

  it("draws the same tasks from the same cursor (what makes resume exact)", () => {
    const cursor = { epoch: 2, position: 4 };
    expect(drawTasks(tasks, 4, cursor, 1)).toEqual(drawTasks(tasks, 4, cursor, 1));
    expect(drawTasks(tasks, 5, { epoch: 0, position: 0 }, 1).drawn).not.toEqual(
      drawTasks(tasks, 5, { epoch: 0, position: 0 }, 2).drawn,
    );
  });
});
