/**
 * damper/http: damper's guards in the shape HTTP users expect. Outgoing calls
 * go through an undici interceptor or a `fetch` wrapper (balancing, a breaker
 * and a throttle per upstream, retries under one budget, deadlines carried
 * downstream); incoming calls on node:http are admitted by priority, shed with
 * 503 and `Retry-After`, and dropped when their caller has gone. Both are
 * adapters over the transport-free cores in `damper`: `Dependency` and
 * `Admission`. The outgoing
 * side needs the optional peer dependency undici 7 (its types, and
 * `damperFetch` at its first request); the incoming side needs nothing. The
 * Fastify plugin is `damper/fastify`. See docs/http.md and docs/http-incoming.md.
 */
export { DEADLINE_HEADER, PRIORITY_HEADER } from './headers.js';
export { currentRequestScope, type RequestScope, runInRequestScope } from '../service/scope.js';
export { type HttpDependencyOptions, type HttpDependencyStats, HttpDependency, type HttpUpstream } from './outgoing/http-dependency.js';
export { damperFetch, type DamperFetch, type DamperFetchOptions } from './outgoing/fetch.js';
export { damperInterceptor } from './outgoing/interceptor.js';
export { UpstreamStatusError } from './outgoing/upstream-status.js';
export { type AdmissionStats } from '../service/admission.js';
export { type HttpAdmissionOptions } from './incoming/http-admission.js';
/** @deprecated The options of HTTP admission are {@link HttpAdmissionOptions}; `AdmissionOptions` in `damper` is the transport-free core's. */
export { type HttpAdmissionOptions as AdmissionOptions } from './incoming/http-admission.js';
export { type AdmissionListener, type AdmittedHandler, damperAdmission, type DamperAdmissionOptions } from './incoming/node-admission.js';
