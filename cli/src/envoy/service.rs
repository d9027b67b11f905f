//! `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`: a request's descriptors are
//! resolved against the loaded config ([`super::decide::plan`]) and decided by the module.
//!
//! On one server every limited descriptor of the request is judged by **one `RL.ALL` call**
//! (up to 16 keys; more are split into calls of 16 as on a cluster). On Redis Cluster the keys
//! are grouped by slot, one `RL.ALL` per slot, run in order: when a group refuses, what the
//! earlier groups took is given back (`RL.REFUND`), and the remaining groups are judged with
//! `DRYRUN` for their statuses, so a refused request keeps no permit anywhere. The same holds
//! across the main Redis and `REDIS_PERSECOND`'s (per-second limits): one call per Redis.
//!
//! Around the calls: keys the local cache knows over their limit are answered without one
//! (`LOCAL_CACHE_SIZE_IN_BYTES`); hits that cross a limit are charged past it as a debt
//! (`RL.CHARGE`); a fixed window in debt refuses a 0-hit check; and with
//! `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false` each key is decided on its own (their
//! counting).

use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::{Request, Response, Status};

use super::backend::{self, Backend, CallError};
use super::config::{Algorithm, Config, Unit};
use super::decide::{self, Check, KeyAnswer, Options, MAX_KEYS_PER_CALL};
use super::local_cache::LocalCache;
use super::metadata;
use super::metrics::Metrics;

/// What every request shares.
pub struct State {
    pub config: RwLock<Option<Arc<Config>>>,
    pub backend: Backend,
    /// `REDIS_PERSECOND`: the Redis of the per-second limits (their keys never share a call
    /// with the others: a refusal gives back across both, as across cluster slots).
    pub per_second: Option<Backend>,
    pub options: Options,
    pub metrics: Metrics,
    /// `LOCAL_CACHE_SIZE_IN_BYTES`: keys known over their limit, refused without a call.
    pub local_cache: Option<LocalCache>,
}

impl State {
    /// The config in force now.
    pub fn config(&self) -> Option<Arc<Config>> {
        self.config
            .read()
            .map(|c| c.clone())
            .unwrap_or_else(|poisoned| poisoned.into_inner().clone())
    }

    /// Puts `config` in force.
    pub fn set_config(&self, config: Config) {
        let config = Some(Arc::new(config));
        match self.config.write() {
            Ok(mut slot) => *slot = config,
            Err(poisoned) => *poisoned.into_inner() = config,
        }
    }
}

/// The gRPC service.
pub struct Service {
    pub state: Arc<State>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Where a key's calls go: which Redis (the main one, or `REDIS_PERSECOND`'s for per-second
/// limits) and, on a cluster, the key's slot (0 on one server).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Target {
    per_second: bool,
    slot: u16,
}

/// The calls a request's checks need (`members`: indices in `checks`): one per target, each
/// at most 16 keys, in the order the keys first appear; one key per call when each key is
/// decided on its own (`one_per_call`).
fn batches(
    checks: &[Check],
    members: impl Iterator<Item = usize>,
    target: impl Fn(&Check) -> Target,
    one_per_call: bool,
) -> Vec<(Target, Vec<usize>)> {
    let per_call = if one_per_call { 1 } else { MAX_KEYS_PER_CALL };
    let mut batches: Vec<(Target, Vec<usize>)> = Vec::new();
    for i in members {
        let Some(check) = checks.get(i) else { continue };
        let to = target(check);
        match batches.iter_mut().find(|(t, members)| *t == to && members.len() < per_call) {
            Some((_, members)) => members.push(i),
            None => batches.push((to, vec![i])),
        }
    }
    batches
}

impl State {
    /// Where `check`'s calls go.
    fn target(&self, check: &Check) -> Target {
        let per_second = self.per_second.is_some() && check.rule.unit == Some(Unit::Second);
        let redis = if per_second { self.per_second.as_ref() } else { None };
        let redis = redis.unwrap_or(&self.backend);
        Target { per_second, slot: if redis.is_cluster() { backend::slot(&check.key) } else { 0 } }
    }

    /// The Redis of a target.
    fn redis(&self, target: Target) -> &Backend {
        match (&self.per_second, target.per_second) {
            (Some(per_second), true) => per_second,
            _ => &self.backend,
        }
    }

    /// Decides `plan`'s checks: one answer per check. All or nothing (the default): a refused
    /// request keeps no permit anywhere. With `refused_requests_count`, each key on its own.
    async fn decide(&self, plan: &decide::Plan) -> Result<Vec<KeyAnswer>, CallError> {
        let checks = plan.checks.as_slice();
        let independent = self.options.refused_requests_count;
        let mut answers =
            vec![KeyAnswer { detail: [1, 0, 0, 0, 0], taken: false, local: false }; checks.len()];
        let now = now_ms();
        // Keys known over their limit are answered here; the request is then refused, and
        // the other keys are only judged (`DRYRUN`) for their statuses.
        let mut known_over = vec![false; checks.len()];
        if let Some(cache) = &self.local_cache {
            for (i, check) in checks.iter().enumerate() {
                if check.cost == 0 || !LocalCache::caches(&check.rule) {
                    continue;
                }
                if let Some(until) = cache.lookup(&check.key, now) {
                    let wait = until - now;
                    let limit = i64::from(check.rule.requests_per_unit);
                    answers[i] =
                        KeyAnswer { detail: [0, limit, 0, wait, wait], taken: false, local: true };
                    known_over[i] = true;
                }
            }
        }
        let to_call = (0..checks.len()).filter(|&i| !known_over[i]);
        let batches = batches(checks, to_call, |c| self.target(c), independent);
        let mut refused_at: Option<usize> = known_over.contains(&true).then_some(0);
        for (n, (target, members)) in batches.iter().enumerate() {
            let redis = self.redis(*target);
            let group: Vec<&Check> = members.iter().filter_map(|&i| checks.get(i)).collect();
            let mut args = decide::all_command(&group);
            if refused_at.is_some() && !independent {
                args.push("DRYRUN".into());
            }
            // A call that reaches Redis after the service gave up on it counts nothing.
            args.push("DEADLINE".into());
            args.push(now_ms().saturating_add(redis.timeout_ms()).to_string());
            let reply = redis.call(target.slot, &args).await?;
            let (allowed, details) = decide::parse_all_reply(&reply).map_err(CallError::Refused)?;
            for (&i, detail) in members.iter().zip(details) {
                if let (Some(answer), Some(check)) = (answers.get_mut(i), checks.get(i)) {
                    // A shadow key that refused takes nothing, whatever the call.
                    let taken = allowed
                        && (independent || refused_at.is_none())
                        && (detail[0] == 1 || !check.shadow());
                    *answer = KeyAnswer { detail, taken, local: false };
                }
            }
            if !allowed && refused_at.is_none() {
                refused_at = Some(n);
            }
        }
        if let Some(cache) = &self.local_cache {
            for (check, answer) in checks.iter().zip(&answers) {
                let [allowed, _, remaining, retry_ms, _] = answer.detail;
                // Nothing left, and the exact instant a permit is back: the window's end, or
                // the wait for the one permit asked.
                let exact = matches!(check.rule.algorithm, Algorithm::Fixed) || check.cost == 1;
                if !answer.local
                    && allowed == 0
                    && remaining == 0
                    && retry_ms > 0
                    && exact
                    && LocalCache::caches(&check.rule)
                {
                    cache.insert(&check.key, now.saturating_add(retry_ms), now);
                }
            }
        }
        // A fixed window in debt (a charge took it past its limit) refuses even a check of 0
        // hits, as envoyproxy's counter over the limit does; the module's `COST 0` only peeks.
        let mut in_debt = false;
        for (check, answer) in checks.iter().zip(answers.iter_mut()) {
            let [allowed, _, remaining, _, reset_ms] = answer.detail;
            if check.cost == 0
                && allowed == 1
                && remaining == 0
                && !check.shadow()
                && matches!(check.rule.algorithm, Algorithm::Fixed)
                && self.over_its_limit(check).await?
            {
                answer.detail[0] = 0;
                answer.detail[3] = reset_ms;
                in_debt = true;
            }
        }
        // Every quota-mode descriptor over its limit: the request is refused after all, and
        // every group gives back what it took.
        let quota_refused = refused_at.is_none() && decide::quota_refuses(plan, &answers);
        let give_back = if independent {
            None
        } else if refused_at.is_none() && (quota_refused || in_debt) {
            Some(batches.len())
        } else {
            refused_at
        };
        if let Some(n) = give_back {
            // Give back what the groups before the refusing one took.
            for (target, members) in batches.iter().take(n) {
                for &i in members {
                    let (Some(answer), Some(check)) = (answers.get_mut(i), checks.get(i)) else {
                        continue;
                    };
                    if answer.taken && check.cost > 0 {
                        let args =
                            ["RL.REFUND".to_string(), check.key.clone(), check.cost.to_string()];
                        self.redis(*target).call(target.slot, &args).await?;
                    }
                    answer.taken = false;
                }
            }
        }
        for (check, answer) in checks.iter().zip(answers.iter_mut()) {
            let left = answer.detail[2];
            let crossing = answer.detail[0] == 0
                && !check.shadow()
                && left > 0
                && u64::try_from(left).is_ok_and(|left| left < check.cost);
            if crossing && self.charge_crossing(check, left.unsigned_abs()).await {
                answer.taken = true;
            }
        }
        Ok(answers)
    }

    /// Whether a fixed window's count is above its limit (`RL.INFO`'s `used` and `limit`).
    async fn over_its_limit(&self, check: &Check) -> Result<bool, CallError> {
        let target = self.target(check);
        let args = ["RL.INFO".to_string(), check.key.clone()];
        let info = self.redis(target).call(target.slot, &args).await?;
        let fields: Vec<String> = match info {
            redis::Value::Array(items) => items
                .iter()
                .map(|v| match v {
                    redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                    redis::Value::SimpleString(s) => s.clone(),
                    redis::Value::Int(i) => i.to_string(),
                    _ => String::new(),
                })
                .collect(),
            _ => return Ok(false),
        };
        let field = |name: &str| -> Option<u64> {
            let at = fields.chunks(2).position(|pair| pair[0] == name)?;
            fields.get(at * 2 + 1)?.parse().ok()
        };
        Ok(matches!((field("used"), field("limit")), (Some(used), Some(limit)) if used > limit))
    }

    /// A key whose hits cross its limit (`left` permits, fewer than the hits) is counted in
    /// full, past the limit, as a debt (`RL.CHARGE`): envoyproxy counts such a request, and
    /// Envoy's charge after the response (`apply_on_stream_done`, the quota pattern) must make
    /// the next check refuse. A key with no state yet first takes what is left. The answer
    /// already sent stands: a charge that fails is logged, not answered. Whether it counted.
    async fn charge_crossing(&self, check: &Check, left: u64) -> bool {
        let target = self.target(check);
        let (redis, slot) = (self.redis(target), target.slot);
        let charge = |count: u64| ["RL.CHARGE".to_string(), check.key.clone(), count.to_string()];
        let result = match redis.call(slot, &charge(check.cost)).await {
            Ok(redis::Value::Nil) => {
                let mut rest = check.clone();
                rest.cost = left;
                let take = decide::all_command(&[&rest]);
                match redis.call(slot, &take).await {
                    Ok(_) => redis.call(slot, &charge(check.cost - left)).await,
                    Err(e) => Err(e),
                }
            }
            other => other,
        };
        match result {
            Ok(redis::Value::Nil) | Err(_) => {
                tracing::warn!(key = %check.key, result = ?result, "the hits that crossed the limit were not charged");
                false
            }
            Ok(_) => true,
        }
    }
}

impl State {
    /// Answers one request (gRPC's `ShouldRateLimit` and the HTTP `/json` alike).
    pub async fn answer(&self, request: RateLimitRequest) -> Result<RateLimitResponse, Status> {
        tracing::debug!(?request, "ShouldRateLimit");
        let config = self.config();
        let plan = decide::plan(&request, config.as_deref(), &self.options).map_err(|e| {
            self.metrics.service_error.inc();
            tracing::debug!(error = %e.0, "request refused");
            Status::unknown(e.0)
        })?;
        let answers = if plan.checks.is_empty() {
            Vec::new()
        } else {
            self.decide(&plan).await.map_err(|e| {
                self.metrics.redis_error.inc();
                match e {
                    CallError::Unavailable(message) => {
                        tracing::error!(error = %message, domain = %plan.domain, "Redis unavailable");
                        Status::unavailable(format!("redis error: {message}"))
                    }
                    CallError::Refused(message) => {
                        tracing::error!(error = %message, domain = %plan.domain, "the module refused the call");
                        Status::internal(format!("redis error: {message}"))
                    }
                }
            })?
        };
        let outcome = decide::outcome(&plan, &answers, &self.options, now_ms());
        for (domain, key, stats) in &outcome.stats {
            self.metrics.record(domain, key, stats);
        }
        if outcome.global_shadow {
            self.metrics.global_shadow_mode.inc();
        }
        let mut response = outcome.response;
        if self.options.dynamic_metadata {
            response.dynamic_metadata = Some(metadata::of(&request, &outcome.quota));
        }
        Ok(response)
    }
}

#[tonic::async_trait]
impl RateLimitService for Service {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        self.state.answer(request.into_inner()).await.map(Response::new)
    }
}
