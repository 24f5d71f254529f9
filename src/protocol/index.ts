export * from "./steps.js";
export * from "./tags.js";
export * from "./trajectory.js";
