/**
 * `damper/testing`: what it takes to run code that uses damper in virtual
 * time, for your own tests and simulations as for damper's lab (which uses
 * only this and the main entry). A `VirtualClock` stands in for the system
 * clock, `forbidRealTime()` makes any stray `Date.now()`, `setTimeout` or
 * `Math.random` during a run throw, and `InMemorySharedStore` is a shared tier
 * with injectable outages (`outage = 'hang' | 'error'`) for tests without Redis.
 * Each is also exported by the main entry; this one gathers them under the
 * name of their purpose. `sharedBackendContract` runs the rules every shared
 * backend must keep against one of your own, and `installVirtualTime(clock)`
 * runs code that reads the platform's clock and timers (another resilience
 * library in your stack) on a `VirtualClock` (only here).
 */
export { VirtualClock, type VirtualClockOptions } from './time/virtual.js';
export { forbidRealTime, type RealTimeBan, RealTimeInSimulationError } from './time/real-time-guard.js';
export { installVirtualTime, type VirtualTimeOptions, type VirtualTimeRelease } from './time/virtual-globals.js';
export { seededRandom } from './time/random.js';
export { InMemorySharedStore, type InMemorySharedStoreOptions } from './stores/in-memory-shared.js';
export { type BackendUnderTest, SHARED_BACKEND_RULES, sharedBackendContract, type SharedBackendRule } from './stores/backend-contract.js';
