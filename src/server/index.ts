export { hostAllowed, hostCheck, hostForm } from "./host-check.js";
export { type Listening, listenOn } from "./listen.js";
export { findJsonlFiles, type LoadedRecords, loadRecords, type ViewRecord } from "./records.js";
export { type RunningViewer, startViewer, type ViewerOptions, viewerApp } from "./viewer.js";
