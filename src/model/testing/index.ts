// Test doubles for model clients, kept out of the folder's public face (../index.ts): a scripted
// in-process model, a loopback fixture server, fakes of the server families coa talks to, and a look
// at the engine processes a test left running.
export * from "./engine-children.js";
export * from "./fixture-server.js";
export * from "./scripted.js";
export * from "./servers.js";
