import { register } from 'node:module';
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type AdmissionOptions, type CacheOptions, type Clock, DamperError, type DependencyOptions, forbidRealTime, RealTimeInSimulationError } from 'damper';
import { type ScenarioCommon } from './schema/common.js';

/**
 * A user's own damper configuration, as code (issue 12): an ES module whose
 * default export receives `{ clock, scenario }` and returns the pieces the
 * damper variant is built from. The lab runs the user's real configuration
 * code in virtual time, so "is my configuration safe?" is answered about
 * the configuration the service ships, not about a transcription of it.
 *
 * Every role is a factory, because a world may need several of a piece (a
 * guard per client tier, an admission guard per server, a cache per
 * process); a role the module leaves out keeps the lab's own settings. Which
 * world uses which role is in docs/lab.md ("Your damper configuration").
 */
export interface DamperSettings {
  /**
   * The options of client tier `tier`'s `Dependency` (0: the outermost, the
   * users' own client), laid over the lab's own: what a service passes to
   * `new Dependency(…)` or `HttpDependency` for the tier below it. Its
   * `retry`, `budget`, `breaker`, `throttle`, `balancer`, `timeout` are the
   * user's; the world keeps `clock` and `upstreams`.
   */
  readonly dependency?: (tier: number) => Partial<DependencyOptions<unknown>>;
  /** The options of server number `server`'s `Admission` (0, 1, …), laid over the lab's own: its `limiter`, `timeout`, `retryAfter`. The world keeps `clock`. */
  readonly admission?: (server: number) => Partial<AdmissionOptions>;
  /**
   * The options of process number `process`'s cache, laid over the lab's own
   * (a field left out keeps the lab's): its `guard` is the origin budget. The
   * world's own fields win over these: `clock` (virtual time) and `shared`
   * (the world's shared tier, when it has one).
   */
  readonly cache?: (process: number) => Partial<CacheOptions<unknown>>;
}

/**
 * What a configuration module's default export is. `clock` is the run's: a
 * `VirtualClock` in a simulation, the system clock in a real run (`damper
 * lab real`), so the same module configures both.
 */
export type DamperConfigFunction = (context: { readonly clock: Clock; readonly scenario: ScenarioCommon }) => DamperSettings;

const ROLES = ['dependency', 'admission', 'cache'] as const;

/** Roles of an earlier release, and what took their place: a module that still returns one is told, not ignored. */
const RENAMED: Readonly<Record<string, string>> = {
  client: 'client(tier) returned a Guard; the role is now dependency(tier), returning the options of that tier\'s Dependency (retry, budget, breaker, throttle, balancer, timeout)',
  balancer: 'balancer() is now part of dependency(tier): its `balancer` field',
};

/**
 * A configuration module that cannot be used, or that misbehaved during a
 * run (read the real clock, set a real timer, drew from `Math.random`,
 * threw): the message names the module's file and what went wrong.
 */
export class DamperConfigError extends DamperError {
  readonly file: string;

  constructor(file: string, problem: string, options?: { cause?: unknown }) {
    super('DAMPER_CONFIG', `damper config ${file}: ${problem}`, options);
    this.file = file;
  }
}

/** The scenario with its damper configuration module set to `file` (resolved against the working directory): what `--damper-config` does. */
export function withDamperConfig<S extends ScenarioCommon>(scenario: S, file: string): S {
  return { ...scenario, damper: { config: resolve(file) } };
}

/** A scenario's `damper.config`, as written relative to the scenario file at `scenarioFile`, made absolute. */
export function resolveDamperConfig<S extends ScenarioCommon>(scenario: S, scenarioFile: string): S {
  const config = scenario.damper?.config;
  if (config === undefined || isAbsolute(config)) return scenario;
  return { ...scenario, damper: { config: resolve(scenarioFile, '..', config) } };
}

/**
 * `import 'damper'` inside a configuration module must give the very copy of
 * the library the lab is running: its `VirtualClock`, its error classes
 * (`instanceof OverloadedError` decides what a world counts as shed). Node
 * would resolve `damper` from the module's own folder, which may hold another
 * copy or none at all. So the lab adds one resolve hook, once per thread,
 * that sends the bare specifier `damper` to the copy the lab imports (its
 * own dependency). Other specifiers resolve as Node resolves them.
 * The hook is a data: URL so that it loads the same way from the sources
 * (tsx), a test build and an install.
 */
let hooked = false;
function resolveDamperToThisCopy(): void {
  if (hooked) return;
  hooked = true;
  // The copy the lab itself imports: its own dependency, whatever folder the user's module sits in.
  const index = import.meta.resolve('damper');
  const hook = `let index; export function initialize(data) { index = data.index; }
export async function resolve(specifier, context, next) {
  return specifier === 'damper' ? { url: index, shortCircuit: true } : next(specifier, context);
}`;
  register(`data:text/javascript,${encodeURIComponent(hook)}`, { data: { index } });
}

/** The module at `file`, its default export checked. */
async function importConfig(file: string): Promise<DamperConfigFunction> {
  resolveDamperToThisCopy();
  let module: { default?: unknown };
  try {
    module = (await import(pathToFileURL(file).href)) as { default?: unknown };
  } catch (error) {
    throw new DamperConfigError(file, `cannot be imported (${(error as Error)?.message ?? String(error)})`, { cause: error });
  }
  if (typeof module.default !== 'function') throw new DamperConfigError(file, `its default export must be a function ({ clock, scenario }) => settings, got ${describe(module.default)}`);
  return module.default as DamperConfigFunction;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : typeof value === 'undefined' ? 'nothing' : `a ${typeof value}`;
}

/**
 * Runs `body`, a call into the user's module, with real time forbidden, and
 * turns what goes wrong into a DamperConfigError naming the module's file
 * (the call is part of the run: principle 8 holds for the user's code too).
 */
function inModule<T>(file: string, what: string, body: () => T): T {
  const ban = forbidRealTime();
  let value: T;
  try {
    value = body();
  } catch (error) {
    ban();
    if (error instanceof DamperConfigError) throw error;
    if (error instanceof RealTimeInSimulationError) throw realTimeError(file, error);
    throw new DamperConfigError(file, `${what} threw: ${(error as Error)?.message ?? String(error)}`, { cause: error });
  }
  ban();
  if (ban.violation !== undefined) throw realTimeError(file, ban.violation);
  return value;
}

/** The error for a run of `file`'s configuration that read real time: the first frame in the module, when the stack has one. */
export function realTimeError(file: string, offence: RealTimeInSimulationError): DamperConfigError {
  const url = pathToFileURL(file).href;
  const frame = offence.stack?.split('\n').find((line) => line.includes(url))?.trim();
  const where = frame === undefined ? ' (its code, or a damper object it built without the `clock` it was given)' : ` (${frame})`;
  return new DamperConfigError(file, `${offence.message}${where}`, { cause: offence });
}

function isOptions(value: unknown): value is object {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The damper variant's settings for one run of `scenario`: the roles its
 * configuration module returns (none when it names no module), each wrapped
 * so that a call checks what the module built and names the module when it
 * misbehaves. Call once per run, with that run's clock.
 */
export async function damperSettings(scenario: ScenarioCommon, clock: Clock): Promise<DamperSettings> {
  const file = scenario.damper?.config;
  if (file === undefined) return {};
  const configure = await importConfig(file);
  const settings: unknown = inModule(file, 'its default export', () => configure({ clock, scenario }));
  if (!isOptions(settings)) throw new DamperConfigError(file, `its default export must return an object of roles (${ROLES.join(', ')}), got ${describe(settings)}`);
  const renamed = Object.keys(settings).find((k) => RENAMED[k] !== undefined);
  if (renamed !== undefined) throw new DamperConfigError(file, `role ${JSON.stringify(renamed)} is gone: ${RENAMED[renamed]!} (docs/lab.md, "Your damper configuration")`);
  const unknown = Object.keys(settings).filter((k) => !(ROLES as readonly string[]).includes(k));
  if (unknown.length > 0) throw new DamperConfigError(file, `unknown role ${unknown.map((k) => JSON.stringify(k)).join(', ')} (known: ${ROLES.join(', ')})`);
  const roles = settings as Record<(typeof ROLES)[number], unknown>;
  for (const role of ROLES) {
    if (roles[role] !== undefined && typeof roles[role] !== 'function') throw new DamperConfigError(file, `${role} must be a function, got ${describe(roles[role])}`);
  }
  const factory = <A extends unknown[], R>(role: (typeof ROLES)[number], ok: (value: unknown) => value is R, expected: string) => {
    const make = roles[role] as ((...args: A) => unknown) | undefined;
    if (make === undefined) return undefined;
    return (...args: A): R => {
      const value = inModule(file, `${role}(${args.join(', ')})`, () => make(...args));
      if (!ok(value)) throw new DamperConfigError(file, `${role}(${args.join(', ')}) must return ${expected}, got ${describe(value)}`);
      return value;
    };
  };
  const dependency = factory<[number], Partial<DependencyOptions<unknown>>>('dependency', isOptions, 'an object of DependencyOptions');
  const admission = factory<[number], Partial<AdmissionOptions>>('admission', isOptions, 'an object of AdmissionOptions');
  const cache = factory<[number], Partial<CacheOptions<unknown>>>('cache', isOptions, 'an object of CacheOptions');
  return {
    ...(dependency === undefined ? {} : { dependency }),
    ...(admission === undefined ? {} : { admission }),
    ...(cache === undefined ? {} : { cache }),
  };
}

/**
 * Process `process`'s cache options: the lab's own (`lab`), the user's laid
 * over them, and the world's over both: its `clock`, and its shared tier
 * (`shared`, or none in a world without one: the world says which tiers
 * exist, and a user's Redis has no place in virtual time). Where the world
 * has a shared tier, the user's `shared` settings (its timeout, breaker,
 * bus) apply to it; its store and namespace stay the world's.
 */
export function cacheOptions<V>(settings: DamperSettings, process: number, lab: CacheOptions<V>, world: Pick<CacheOptions<V>, 'clock'> & Partial<Pick<CacheOptions<V>, 'shared'>>): CacheOptions<V> {
  const { shared, ...user }: Partial<CacheOptions<V>> = { ...(settings.cache?.(process) as Partial<CacheOptions<V>> | undefined) };
  if (world.shared === undefined) return { ...lab, ...user, ...world };
  const { store, namespace } = world.shared;
  return { ...lab, ...user, ...world, shared: { ...shared, store, ...(namespace === undefined ? {} : { namespace }) } };
}

/** Tier `tier`'s `Dependency` options: the lab's own, the user's laid over them; the world keeps its `clock` and `upstreams`. */
export function dependencyOptions<U>(settings: DamperSettings, tier: number, lab: Omit<DependencyOptions<U>, 'upstreams' | 'clock'>, world: Required<Pick<DependencyOptions<U>, 'clock' | 'upstreams'>>): DependencyOptions<U> {
  const user = (settings.dependency?.(tier) ?? {}) as Partial<DependencyOptions<U>>;
  return { ...lab, ...user, ...world };
}

/** Server `server`'s `Admission` options: the lab's own, the user's laid over them; the world keeps its `clock`. */
export function admissionOptions(settings: DamperSettings, server: number, lab: Omit<AdmissionOptions, 'clock'>, world: Required<Pick<AdmissionOptions, 'clock'>>): AdmissionOptions {
  return { ...lab, ...settings.admission?.(server), ...world };
}
