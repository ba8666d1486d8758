import { resolve } from 'node:path';
import { resolveDamperConfig, withDamperConfig } from './damper-config.js';
import { type Json, parseJson } from './scenario.js';
import { checkScenario, type Scenario } from './world/worlds.js';

/**
 * A scenario together with the document it was parsed from. A sweep's field
 * axis (`--axis servers.workers=2..8`) sets a field of the file as written and
 * has the world's schema check the result again, so that a cell's scenario
 * is exactly what the user would get by editing the file: defaults filled,
 * ranges and rules across fields checked, every problem named by field.
 */
export interface ScenarioSource {
  /** The document parsed and checked, its `damper.config` absolute. */
  readonly scenario: Scenario;
  /** The document as written (or with `damper.config` overridden, absolute). */
  readonly doc: Json;
  /** The file as problems name it (`retry-storm.json`, or the path given). */
  readonly where: string;
  /** The file's path on disk: a relative `damper.config` is resolved against it. */
  readonly path: string;
}

/** Parses a scenario file's text; every problem is a ScenarioError naming its field. */
export function scenarioSource(text: string, where: string, path: string): ScenarioSource {
  const doc = parseJson(text, where);
  return { scenario: reparse(doc, where, path), doc, where, path };
}

/**
 * The scenario a document describes (the file's, or a variant of it):
 * checked by its world's schema, problems named `where` (which says what
 * was changed), a relative `damper.config` resolved against the file at `path`.
 */
export function reparse(doc: Json, where: string, path: string): Scenario {
  return resolveDamperConfig(checkScenario(doc, where), path);
}

/** The source with its damper configuration module set to `file` (`--damper-config`), in the document too, so every cell reparsed from it keeps it. */
export function sourceWithDamperConfig(source: ScenarioSource, file: string): ScenarioSource {
  return {
    ...source,
    scenario: withDamperConfig(source.scenario, file),
    doc: { ...(source.doc as Record<string, Json>), damper: { config: resolve(file) } },
  };
}
