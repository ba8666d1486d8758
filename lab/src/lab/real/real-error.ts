import { DamperError } from 'damper';

/**
 * A real run that cannot be made, or that went wrong: a scenario part the
 * real runner does not build yet, a fitting past what the machine can do
 * faithfully, a process that died. One line, naming what and why.
 */
export class RealRunError extends DamperError {
  constructor(problem: string, options?: { cause?: unknown }) {
    super('LAB_REAL', `lab real: ${problem}`, options);
  }
}
