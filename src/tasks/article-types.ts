import { articleId, buildWorld, type EntityType, type WorldSize } from "./world/index.js";

/**
 * The entity type of every encyclopedia article of the world (seed, size), by corpus id. An article
 * does not say what it is about, and `readFact` must be told; text generators (pretraining drills)
 * need it to ask an article the questions it answers.
 */
export function articleTypes(seed: number, size: WorldSize): Map<string, EntityType> {
  return new Map(buildWorld(seed, size).entities.map((e) => [articleId(e.name), e.type]));
}
