export { buildWorld, SIZES, type SizeConfig, type World, WorldSize } from "./build.js";
export { readWorldManifest } from "./files.js";
export {
  type GeneratedWorld,
  generateWorld,
  SPLITS,
  Split,
  WORLD_CORPUS_FILE,
  WORLD_MANIFEST_FILE,
  WORLD_VERSION,
  WorldManifest,
  writeWorld,
} from "./generate.js";
export {
  type ComputeFn,
  comparedPick,
  computeValue,
  Plan,
  PlanRef,
  PlanStep,
  PlanSubject,
  ProgramName,
} from "./plan.js";
export { hashString, Rng } from "./prng.js";
export { inSentence, queryFor, readFact } from "./prose.js";
export { Attr, articleId, docUrl, EntityType, WORLD_HOST, WorldDoc } from "./schema.js";
export {
  interleave,
  isWorldSet,
  parseSeeds,
  readWorldSet,
  WORLD_SET_FILE,
  WorldSetManifest,
  worldDirName,
  writeWorldSet,
} from "./set.js";
export { formatStats, type SplitStats, splitStats } from "./stats.js";
