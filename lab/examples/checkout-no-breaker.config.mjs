// The checkout API's configuration after `damper lab check` found it unsafe
// (docs/lab.md, "Is my configuration safe?"): the same, without the breaker
// in front of the database. The cache's own limit of loads in flight
// (`maxConcurrentLoads`, 64 by default) remains the database's budget.
import base from './checkout.config.mjs';

export default (context) => {
  const settings = base(context);
  return {
    ...settings,
    cache: (process) => {
      const options = settings.cache(process);
      delete options.guard;
      return options;
    },
  };
};
