//! `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`: a request's descriptors are
//! resolved against the loaded config ([`super::decide::plan`]) and decided by the module.
//!
//! On one server every limited descriptor of the request is judged by **one `RL.ALL` call**
//! (up to 16 keys; more are split into calls of 16 as on a cluster). On Redis Cluster the keys
//! are grouped by slot, one `RL.ALL` per slot, run in order: when a group refuses, what the
//! earlier groups took is given back (`RL.REFUND`), and the remaining groups are judged with
//! `DRYRUN` for their statuses, so a refused request keeps no permit anywhere.

use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::{Request, Response, Status};

use super::backend::{self, Backend, CallError};
use super::config::Config;
use super::decide::{self, Check, KeyAnswer, Options, MAX_KEYS_PER_CALL};
use super::metrics::Metrics;

/// What every request shares.
pub struct State {
    pub config: RwLock<Option<Arc<Config>>>,
    pub backend: Backend,
    pub options: Options,
    pub metrics: Metrics,
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

/// The calls a request's checks need: one per slot (a single server: one slot), each at most
/// 16 keys, in the order the keys first appear.
fn batches(checks: &[Check], cluster: bool) -> Vec<(u16, Vec<usize>)> {
    let mut batches: Vec<(u16, Vec<usize>)> = Vec::new();
    for (i, check) in checks.iter().enumerate() {
        let slot = if cluster { backend::slot(&check.key) } else { 0 };
        match batches
            .iter_mut()
            .find(|(s, members)| *s == slot && members.len() < MAX_KEYS_PER_CALL)
        {
            Some((_, members)) => members.push(i),
            None => batches.push((slot, vec![i])),
        }
    }
    batches
}

impl State {
    /// Decides `plan`'s checks: one answer per check.
    async fn decide(&self, plan: &decide::Plan) -> Result<Vec<KeyAnswer>, CallError> {
        let checks = plan.checks.as_slice();
        let mut answers = vec![KeyAnswer { detail: [1, 0, 0, 0, 0], taken: false }; checks.len()];
        let batches = batches(checks, self.backend.is_cluster());
        let mut refused_at: Option<usize> = None;
        for (n, (slot, members)) in batches.iter().enumerate() {
            let group: Vec<&Check> = members.iter().filter_map(|&i| checks.get(i)).collect();
            let mut args = decide::all_command(&group);
            if refused_at.is_some() {
                args.push("DRYRUN".into());
            }
            // A call that reaches Redis after the service gave up on it counts nothing.
            args.push("DEADLINE".into());
            args.push(now_ms().saturating_add(self.backend.timeout_ms()).to_string());
            let reply = self.backend.call(*slot, &args).await?;
            let (allowed, details) = decide::parse_all_reply(&reply).map_err(CallError::Refused)?;
            for (&i, detail) in members.iter().zip(details) {
                if let (Some(answer), Some(check)) = (answers.get_mut(i), checks.get(i)) {
                    // A shadow key that refused takes nothing, whatever the call.
                    let taken =
                        allowed && refused_at.is_none() && (detail[0] == 1 || !check.shadow());
                    *answer = KeyAnswer { detail, taken };
                }
            }
            if !allowed && refused_at.is_none() {
                refused_at = Some(n);
            }
        }
        // Every quota-mode descriptor over its limit: the request is refused after all, and
        // every group gives back what it took.
        let quota_refused = refused_at.is_none() && decide::quota_refuses(plan, &answers);
        let give_back = if quota_refused { Some(batches.len()) } else { refused_at };
        if let Some(n) = give_back {
            // Give back what the groups before the refusing one took.
            for (slot, members) in batches.iter().take(n) {
                for &i in members {
                    let (Some(answer), Some(check)) = (answers.get_mut(i), checks.get(i)) else {
                        continue;
                    };
                    if answer.taken && check.cost > 0 {
                        let args =
                            ["RL.REFUND".to_string(), check.key.clone(), check.cost.to_string()];
                        self.backend.call(*slot, &args).await?;
                    }
                    answer.taken = false;
                }
            }
        }
        Ok(answers)
    }
}

#[tonic::async_trait]
impl RateLimitService for Service {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let request = request.into_inner();
        tracing::debug!(?request, "ShouldRateLimit");
        let state = &self.state;
        let config = state.config();
        let plan = decide::plan(&request, config.as_deref(), &state.options).map_err(|e| {
            state.metrics.service_error.inc();
            tracing::debug!(error = %e.0, "request refused");
            Status::unknown(e.0)
        })?;
        let answers = if plan.checks.is_empty() {
            Vec::new()
        } else {
            state.decide(&plan).await.map_err(|e| {
                state.metrics.redis_error.inc();
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
        let outcome = decide::outcome(&plan, &answers, &state.options, now_ms());
        for (domain, key, stats) in &outcome.stats {
            state.metrics.record(domain, key, stats);
        }
        if outcome.global_shadow {
            state.metrics.global_shadow_mode.inc();
        }
        Ok(Response::new(outcome.response))
    }
}
