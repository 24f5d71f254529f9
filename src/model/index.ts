export * from "./byte-tokenizer.js";
export * from "./types.js";
