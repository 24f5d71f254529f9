export * from "./charts.js";
export { type ChartOptions, renderVegaLite } from "./render.js";
