export * from "./trace.js";
