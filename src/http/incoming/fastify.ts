import type { FastifyPluginCallback, FastifyRequest } from 'fastify';
import { optionsObject } from '../../config.js';
import { type ConcurrencyLimiter } from '../../guard/limiter.js';
import { type AdmissionStats } from '../../service/admission.js';
import { HttpAdmission, type HttpAdmissionOptions } from './http-admission.js';
import { runInRequestScope } from '../../service/scope.js';

/**
 * The same admission as `damperAdmission`, as a Fastify 5 plugin: an
 * `onRequest` hook admits each request through the limiter, or answers it
 * (400, 503 with `Retry-After`, 504) with Fastify's own reply. Only types are
 * imported from fastify, an optional peer dependency.
 */

/** What `fastify.damperAdmission` holds: the plugin's counts and its limiter. */
export interface FastifyAdmission {
  /** See {@link AdmissionStats}; `failed` counts the admitted requests Fastify answered with a 5xx error. */
  stats(): AdmissionStats;
  /** The limiter requests are admitted through: its `stats()` say how full it is. */
  readonly limiter: ConcurrencyLimiter;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** damper's admission of this instance's requests (`damperFastify`). */
    readonly damperAdmission: FastifyAdmission;
  }
}

/**
 * Admission control for a Fastify 5 instance: `await fastify.register(damperFastify, { limiter })`,
 * with the options of `damperAdmission` but the handler (Fastify's routes are).
 * Applies to every route of the instance (it is not encapsulated), once per
 * instance; its counts are `fastify.damperAdmission.stats()`. Routes run in the
 * request's scope: `currentRequestScope()` in a handler or hook after
 * `onRequest` gives its deadline, priority and signal (`request.raw`'s close
 * aborts it too). Bad options fail the registration with a `ConfigError`.
 */
export const damperFastify: FastifyPluginCallback<HttpAdmissionOptions> = (fastify, options, done) => {
  let http: HttpAdmission;
  try {
    http = new HttpAdmission(optionsObject('damperFastify options', options));
  } catch (error) {
    done(error as Error);
    return;
  }
  const { admission } = http;
  const served = new WeakSet<FastifyRequest>();
  fastify.decorate('damperAdmission', { stats: () => admission.stats(), limiter: admission.limiter } satisfies FastifyAdmission);
  fastify.addHook('onRequest', (request, reply, next) => {
    http.admit(request.raw, reply.raw, {
      serve(scope) {
        served.add(request);
        // The rest of the request runs in the scope: Fastify 5 carries the async context across body parsing itself.
        runInRequestScope(scope, next);
      },
      refuse({ status, body, retryAfter }) {
        if (retryAfter !== undefined) reply.header('retry-after', String(retryAfter));
        void reply.code(status).type('text/plain; charset=utf-8').send(body);
      },
    });
  });
  fastify.addHook('onError', (request, _reply, error, next) => {
    // A 4xx (a failed validation, an error that carries its own 4xx status) is the caller's error, not the handler's failure.
    if (served.has(request) && (error.statusCode ?? 500) >= 500) admission.failed();
    next();
  });
  done();
};

// What fastify-plugin does, without the dependency: hooks on the instance it is registered on, not on a child.
Object.assign(damperFastify, { [Symbol.for('skip-override')]: true, [Symbol.for('fastify.display-name')]: 'damper-admission' });
