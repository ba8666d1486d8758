import { type Clock } from 'damper';
import { type RetryCounts } from '../judge/lab-counters.js';
import { type PeerPolicy } from '../stacks/stack.js';
import { type Call } from './naive-tiers.js';
import { type Answer, answer, failure, ServiceFailure, TIMED_OUT } from './service-answers.js';

/**
 * A client tier made by a peer library (issue 31): each call goes through
 * the peer's policy (cockatiel's retry, breaker, timeout and bulkhead;
 * opossum's breaker in the system's retry loop), each of its attempts a
 * call of the tier below, which nobody stops when the peer gives up on it
 * (a naive server hears nothing of its caller leaving), but the users' own
 * client (`patienceMs`) stops when they give up. The policy runs in
 * the simulation's virtual time (`platformTime: 'virtual'`), so the
 * library's own timers and clock reads are the run's.
 */
export function peerTier(clock: Clock, policy: PeerPolicy, below: Call<Answer>, counted: RetryCounts | undefined, patienceMs: number | undefined): Call<Answer> {
  return (key, onDone) => {
    let tries = 0;
    // The call's own signal (without one, cockatiel hangs every call's listener on one shared signal that never aborts),
    // aborted when the user gives up if this is the users' own client: their abort ends its retries, as on real processes.
    const call = new AbortController();
    const patience = patienceMs === undefined ? undefined : clock.setTimer(() => call.abort(), patienceMs);
    const attempt = (): Promise<Answer> =>
      new Promise<Answer>((resolve, reject) => {
        tries++;
        if (counted !== undefined) {
          if (tries === 1) counted.firstAttempts++;
          else counted.retries++;
        }
        below(key, (a) => (a.outcome === 'ok' ? resolve(a) : reject(failure(a))));
      });
    const done = (a: Answer): void => {
      patience?.cancel();
      onDone(a);
    };
    policy.execute(attempt, call.signal).then(done, (error: unknown) => done(peerAnswer(policy, error)));
  };
}

/** A rejection as the caller hears it: the tier below's answer, or the peer's own timeout (a 504) or refusal (a 503, as an overloaded tier's). */
function peerAnswer(policy: PeerPolicy, error: unknown): Answer {
  if (error instanceof ServiceFailure) return error.answer;
  switch (policy.rejection(error)) {
    case 'timeout':
      return TIMED_OUT;
    case 'refused':
      return answer('refused', 'cache');
    default:
      return answer('error', 'cache');
  }
}
