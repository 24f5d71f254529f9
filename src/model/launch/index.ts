// The engine's launch alone, a second public face of src/model beside ../index.ts: what `coa` needs to
// start its engine before any other module loads. It loads no package (zod alone takes ~0.1 s of a
// CLI's start) and none of the model's clients; `launchModel` and `Engine.open` take the launch over.
export {
  EngineLaunch,
  type EngineOptions,
  type EngineSource,
  type ModelSpec,
  parseModelSpec,
} from "../engine-launch.js";
