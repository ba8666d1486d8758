/**
 * damper/http: damper's guards in the shape HTTP users expect. Outgoing calls
 * go through an undici interceptor or a `fetch` wrapper (balancing, a breaker
 * and a throttle per upstream, retries under one budget, deadlines carried
 * downstream); incoming calls on node:http are admitted by priority, shed with
 * 503 and `Retry-After`, and dropped when their caller has gone. Needs the
 * optional peer dependency undici 7. See docs/http.md.
 */
export { DEADLINE_HEADER, PRIORITY_HEADER } from './headers.js';
export { currentRequestScope, type RequestScope, runInRequestScope } from './scope.js';
export { type HttpDependencyOptions, type HttpDependencyStats, HttpDependency, type HttpUpstream } from './dependency.js';
export { damperFetch, type DamperFetch, type DamperFetchOptions } from './fetch.js';
export { damperInterceptor } from './interceptor.js';
export { UpstreamStatusError } from './upstream-status.js';
export { type AdmissionOptions, type AdmissionStats } from './admit.js';
export { type AdmissionListener, type AdmittedHandler, damperAdmission, type DamperAdmissionOptions } from './admission.js';
