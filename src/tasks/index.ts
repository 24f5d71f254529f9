export { articleTypes } from "./article-types.js";
export * from "./loaders/index.js";
export * from "./task.js";
export * from "./world/index.js";
