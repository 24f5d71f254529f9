// Test doubles for model clients, kept out of the folder's public face (../index.ts): a scripted
// in-process model, a loopback fixture server, and fakes of the server families coa talks to.
export * from "./fixture-server.js";
export * from "./scripted.js";
export * from "./servers.js";
