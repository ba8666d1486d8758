/**
 * damper/otel: what damper's caches, guards and balancers do, as
 * OpenTelemetry metrics, including the characteristic metrics that show a
 * feedback loop forming (docs/observability.md). Needs the optional peer
 * dependency `@opentelemetry/api`.
 */
export { type CharacteristicAlert, characteristicAlerts, RATIO_WINDOW_MS } from './alerts.js';
export { instrument, type Instrumentable, type InstrumentOptions } from './instrument.js';
export { RollingRatio } from './rolling-ratio.js';
