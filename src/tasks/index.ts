export * from "./task.js";
