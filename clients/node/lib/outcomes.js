'use strict';
/**
 * The middleware's decisions, counted in this process (no Redis call): per middleware policy
 * name (its RateLimit-Policy name, "default" unless given) and outcome — admitted, limited, or
 * error (Redis failed or timed out: let through with failOpen, else passed to next(err)).
 * registerRateLimitMetrics exposes them as ratelimit_middleware_decisions_total.
 */
const OUTCOMES = ['admitted', 'limited', 'error'];
/** policy → { admitted, limited, error } */
const counts = new Map();

function countDecision(policy, outcome) {
  let c = counts.get(policy);
  if (c === undefined) {
    c = { admitted: 0, limited: 0, error: 0 };
    counts.set(policy, c);
  }
  c[outcome] += 1;
}

/** A copy: [[policy, { admitted, limited, error }], ...]. */
function decisionCounts() {
  return [...counts].map(([policy, c]) => [policy, { ...c }]);
}

module.exports = { countDecision, decisionCounts, OUTCOMES };
