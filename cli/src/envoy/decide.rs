//! From a `RateLimitRequest` to module calls and back: which descriptors have a limit (the
//! config's lookup, a descriptor's own override, `replaces`, `unlimited`), the `RL.ALL` call
//! that decides them all at once (one group per key: the algorithm's limit, `COST` = the
//! descriptor's hits, `SHADOW` for shadow-mode limits), and the `DescriptorStatus` per
//! descriptor from the call's reply. Pure: no I/O (the service runs the calls).

use std::collections::HashMap;
use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};

use super::config::{Algorithm, Config, Rule, Unit};
use super::metadata::Quota;

/// Most keys one `RL.ALL` call judges (the module's bound).
pub const MAX_KEYS_PER_CALL: usize = 16;

/// What the service needs from its settings to decide.
#[derive(Debug, Clone)]
pub struct Options {
    pub cache_key_prefix: String,
    pub near_limit_ratio: f64,
    pub global_shadow_mode: bool,
    /// `(limit, remaining, reset)` header names when `LIMIT_RESPONSE_HEADERS_ENABLED`.
    pub headers: Option<(String, String, String)>,
    /// Each key decided on its own: a refused request still counts against the descriptors
    /// that admit it (envoyproxy's counting, `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false`).
    pub refused_requests_count: bool,
    /// `RESPONSE_DYNAMIC_METADATA`: the answer carries the request as dynamic metadata.
    pub dynamic_metadata: bool,
}

/// One key judged by the module: a limited descriptor (or several descriptors of the request
/// that name the same key: their hits add up).
#[derive(Debug, Clone)]
pub struct Check {
    pub key: String,
    pub rule: Arc<Rule>,
    /// Permits this request takes from the key (the descriptors' `hits_addend` summed).
    pub cost: u64,
    /// The descriptors (indices in the request) this key decides.
    pub descriptors: Vec<usize>,
    /// Each descriptor's own hits (`descriptors[i]` takes `hits[i]`; they sum to `cost`).
    pub hits: Vec<u64>,
}

impl Check {
    /// The shadow flag the module sees: the rule's `shadow_mode`, or its `quota_mode` (whose
    /// refusal counts only when every quota descriptor refuses: decided after the call).
    /// Global `SHADOW_MODE` acts on the overall answer instead, as envoyproxy's does.
    pub fn shadow(&self) -> bool {
        self.rule.shadow || self.rule.quota
    }

    /// This key's group in `RL.ALL`'s grammar.
    pub fn group(&self) -> Vec<String> {
        let rule = &self.rule;
        let rpu = u64::from(rule.requests_per_unit);
        let period_ms = || (rule.unit.map_or(1, Unit::seconds) * 1000).to_string();
        let burst = rule.burst.unwrap_or(rpu).to_string();
        let mut group: Vec<String> = match &rule.algorithm {
            Algorithm::Fixed => vec!["PERIOD".into(), rpu.to_string(), period_ms(), "ALIGN".into()],
            Algorithm::Sliding => vec!["SLIDE".into(), rpu.to_string(), period_ms()],
            Algorithm::Token | Algorithm::Gcra => {
                vec!["TOKEN".into(), burst, rpu.to_string(), period_ms()]
            }
            Algorithm::Leaky => {
                vec!["LEAKY".into(), burst, rpu.to_string(), period_ms(), "NODELAY".into()]
            }
            Algorithm::Policy(name) => vec!["POLICY".into(), name.clone()],
        };
        if self.cost != 1 {
            group.push("COST".into());
            group.push(self.cost.to_string());
        }
        if self.shadow() {
            group.push("SHADOW".into());
        }
        group
    }
}

/// How one descriptor of the request is decided.
#[derive(Debug, Clone)]
enum Slot {
    /// No limit applies (no rule, a value-less match at the wrong depth, or replaced).
    Free,
    /// `unlimited: true`.
    Unlimited,
    /// `requests_per_unit: 0`: always over the limit, decided here.
    Zero(Arc<Rule>, u64),
    /// Judged by the module: the index of its [`Check`].
    Checked(usize),
}

/// A request turned into module work.
#[derive(Debug)]
pub struct Plan {
    pub domain: String,
    slots: Vec<Slot>,
    pub checks: Vec<Check>,
}

/// A request the service refuses to decide (answered as a gRPC error, as envoyproxy does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestError(pub String);

/// The hits a descriptor takes: its own `hits_addend` if set (0 allowed: check only), else
/// the request's, where 0 means 1 (envoyproxy's rule).
fn hits(request: &RateLimitRequest, index: usize) -> u64 {
    request
        .descriptors
        .get(index)
        .and_then(|d| d.hits_addend.map(|h| h.value))
        .unwrap_or_else(|| u64::from(request.hits_addend.max(1)))
}

/// The cache key of a descriptor: `CACHE_KEY_PREFIX` + domain + `_` + `key_value_` per entry
/// (envoyproxy's key without its window suffix: the module keeps the window), then the
/// algorithm's word for every algorithm but `fixed`.
pub fn cache_key(
    prefix: &str,
    domain: &str,
    entries: &[(&str, &str)],
    values: &[String],
    rule: &Rule,
) -> String {
    let mut key = String::with_capacity(64);
    key.push_str(prefix);
    key.push_str(domain);
    key.push('_');
    for (i, (k, v)) in entries.iter().enumerate() {
        key.push_str(k);
        key.push('_');
        key.push_str(values.get(i).map_or(v, String::as_str));
        key.push('_');
    }
    key.push_str(rule.algorithm.key_suffix());
    key
}

/// Resolves every descriptor of `request` against `config`.
pub fn plan(
    request: &RateLimitRequest,
    config: Option<&Config>,
    options: &Options,
) -> Result<Plan, RequestError> {
    if request.domain.is_empty() {
        return Err(RequestError("rate limit domain must not be empty".into()));
    }
    if request.descriptors.is_empty() {
        return Err(RequestError("rate limit descriptor list must not be empty".into()));
    }
    if request.descriptors.iter().any(|d| d.is_negative_hits) {
        return Err(RequestError("is_negative_hits is not supported by this service".into()));
    }
    let config = config.ok_or_else(|| RequestError("no rate limit configuration loaded".into()))?;
    let domain = request.domain.as_str();
    let mut rules: Vec<Option<(Arc<Rule>, Vec<String>)>> =
        Vec::with_capacity(request.descriptors.len());
    for descriptor in &request.descriptors {
        let entries: Vec<(&str, &str)> =
            descriptor.entries.iter().map(|e| (e.key.as_str(), e.value.as_str())).collect();
        let values: Vec<String> = entries.iter().map(|(_, v)| v.to_string()).collect();
        let resolved = match &descriptor.limit {
            // A limit override from Envoy's route config: a fixed window, never shadow.
            Some(limit) => Unit::from_proto(limit.unit).map(|unit| {
                let mut stats_key = String::from(domain);
                for (k, v) in &entries {
                    stats_key.push('.');
                    stats_key.push_str(k);
                    if !v.is_empty() {
                        stats_key.push('_');
                        stats_key.push_str(v);
                    }
                }
                let rule = Rule {
                    stats_key,
                    requests_per_unit: limit.requests_per_unit,
                    unit: Some(unit),
                    unlimited: false,
                    shadow: false,
                    name: String::new(),
                    replaces: Vec::new(),
                    detailed_metric: false,
                    quota: false,
                    algorithm: Algorithm::Fixed,
                    burst: None,
                };
                (Arc::new(rule), values)
            }),
            None => config.lookup(domain, &entries).map(|r| (r.rule, r.key_values)),
        };
        rules.push(resolved);
    }
    let replaced: Vec<&str> = rules
        .iter()
        .flatten()
        .flat_map(|(rule, _)| rule.replaces.iter().map(String::as_str))
        .collect();
    let mut slots = Vec::with_capacity(rules.len());
    let mut checks: Vec<Check> = Vec::new();
    let mut by_key: HashMap<String, usize> = HashMap::new();
    for (index, resolved) in rules.iter().enumerate() {
        let Some((rule, values)) = resolved else {
            slots.push(Slot::Free);
            continue;
        };
        if rule.unlimited {
            slots.push(Slot::Unlimited);
            continue;
        }
        if !rule.name.is_empty() && replaced.contains(&rule.name.as_str()) {
            slots.push(Slot::Free);
            continue;
        }
        let cost = hits(request, index);
        if rule.requests_per_unit == 0 && !matches!(rule.algorithm, Algorithm::Policy(_)) {
            slots.push(Slot::Zero(rule.clone(), cost));
            continue;
        }
        let entries: Vec<(&str, &str)> = request.descriptors[index]
            .entries
            .iter()
            .map(|e| (e.key.as_str(), e.value.as_str()))
            .collect();
        let key = cache_key(&options.cache_key_prefix, domain, &entries, values, rule);
        match by_key.get(&key) {
            Some(&at) => {
                let check = &mut checks[at];
                check.cost = check.cost.saturating_add(cost);
                check.descriptors.push(index);
                check.hits.push(cost);
                slots.push(Slot::Checked(at));
            }
            None => {
                by_key.insert(key.clone(), checks.len());
                slots.push(Slot::Checked(checks.len()));
                checks.push(Check {
                    key,
                    rule: rule.clone(),
                    cost,
                    descriptors: vec![index],
                    hits: vec![cost],
                });
            }
        }
    }
    Ok(Plan { domain: domain.to_string(), slots, checks })
}

/// Whether the quota-mode descriptors refuse the request: there is at least one, and every one
/// is over its limit (`answers[i]` for `plan.checks[i]`; a quota descriptor with no permit at
/// all, `requests_per_unit: 0`, is always over).
pub fn quota_refuses(plan: &Plan, answers: &[KeyAnswer]) -> bool {
    let mut total = 0;
    let mut failed = 0;
    for slot in &plan.slots {
        match slot {
            Slot::Zero(rule, _) if rule.quota && !rule.shadow => {
                total += 1;
                failed += 1;
            }
            _ => {}
        }
    }
    for (check, answer) in plan.checks.iter().zip(answers) {
        if check.rule.quota && !check.rule.shadow {
            total += 1;
            if answer.detail[0] == 0 {
                failed += 1;
            }
        }
    }
    total > 0 && total == failed
}

/// `RL.ALL` for some checks: `RL.ALL n key… group…`.
pub fn all_command(checks: &[&Check]) -> Vec<String> {
    let mut args = Vec::with_capacity(2 + checks.len() * 6);
    args.push("RL.ALL".to_string());
    args.push(checks.len().to_string());
    args.extend(checks.iter().map(|c| c.key.clone()));
    for check in checks {
        args.extend(check.group());
    }
    args
}

/// One key's answer: `[allowed, limit, remaining, retry_after_ms, reset_after_ms]` as its
/// single command would answer, whether the request's permits were taken from it, and
/// whether the answer came from the local cache (a key known over its limit: no call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyAnswer {
    pub detail: [i64; 5],
    pub taken: bool,
    pub local: bool,
}

/// Parses an `RL.ALL` reply: `(allowed, details)`.
pub fn parse_all_reply(value: &redis::Value) -> Result<(bool, Vec<[i64; 5]>), String> {
    use redis::Value;
    let Value::Array(items) = value else {
        return Err(format!("RL.ALL answered {value:?}"));
    };
    let int = |v: &Value| match v {
        Value::Int(i) => Ok(*i),
        other => Err(format!("RL.ALL answered {other:?} where an integer belongs")),
    };
    let allowed = int(items.first().ok_or("RL.ALL answered an empty array")?)? == 1;
    let Some(Value::Array(details)) = items.get(6) else {
        return Err("RL.ALL answered without its details".into());
    };
    let mut out = Vec::with_capacity(details.len());
    for detail in details {
        let Value::Array(fields) = detail else {
            return Err(format!("RL.ALL detail {detail:?}"));
        };
        let mut d = [0i64; 5];
        for (slot, field) in d.iter_mut().zip(fields) {
            *slot = int(field)?;
        }
        out.push(d);
    }
    Ok((allowed, out))
}

/// Counters of one decision, per stats key (envoyproxy's stat names).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Stats {
    pub total_hits: u64,
    pub over_limit: u64,
    pub near_limit: u64,
    pub within_limit: u64,
    pub shadow_mode: u64,
    /// Of `over_limit`, the hits refused by the local cache (`LOCAL_CACHE_SIZE_IN_BYTES`).
    pub over_limit_with_local_cache: u64,
}

/// The decision of a request.
#[derive(Debug)]
pub struct Outcome {
    pub response: RateLimitResponse,
    /// `(domain, stats key, counters)` per limited descriptor.
    pub stats: Vec<(String, String, Stats)>,
    /// The overall refusal was answered OK because of `SHADOW_MODE`.
    pub global_shadow: bool,
    /// Quota mode in this request, for the dynamic metadata.
    pub quota: Quota,
}

fn ceil_secs(ms: i64) -> i64 {
    if ms <= 0 {
        0
    } else {
        (ms + 999) / 1000
    }
}

/// Seconds until the current fixed window of `unit` ends (envoyproxy's `CalculateReset`).
fn window_reset(unit: Unit, now_ms: i64) -> i64 {
    let secs = unit.seconds() as i64;
    secs - (now_ms / 1000).rem_euclid(secs)
}

fn current_limit(rule: &Rule, detail_limit: i64) -> RateLimit {
    let requests_per_unit = match rule.algorithm {
        Algorithm::Policy(_) => u32::try_from(detail_limit.max(0)).unwrap_or(u32::MAX),
        _ => rule.requests_per_unit,
    };
    RateLimit { name: rule.name.clone(), requests_per_unit, unit: rule.unit.map_or(0, Unit::proto) }
}

/// Builds the response from the module's answers (`answers[i]` for `plan.checks[i]`).
pub fn outcome(plan: &Plan, answers: &[KeyAnswer], options: &Options, now_ms: i64) -> Outcome {
    let mut statuses = Vec::with_capacity(plan.slots.len());
    let mut stats: Vec<(String, String, Stats)> = Vec::new();
    let mut refused = false;
    let (mut quota_total, mut quota_failed) = (0usize, 0usize);
    // (remaining, status index) of the descriptor with the fewest remaining, for the headers.
    let mut minimum: Option<(u32, usize)> = None;
    let mut quota = Quota::default();
    for slot in &plan.slots {
        let index = statuses.len();
        let status = match slot {
            Slot::Free => DescriptorStatus { code: Code::Ok as i32, ..Default::default() },
            Slot::Unlimited => DescriptorStatus {
                code: Code::Ok as i32,
                limit_remaining: u32::MAX,
                ..Default::default()
            },
            Slot::Zero(rule, cost) => {
                let mut s = Stats { total_hits: *cost, over_limit: *cost, ..Stats::default() };
                let code = if rule.shadow {
                    s.shadow_mode = *cost;
                    Code::Ok
                } else if rule.quota {
                    quota_total += 1;
                    quota_failed += 1;
                    quota.violations.push(index);
                    Code::OverLimit
                } else {
                    refused = true;
                    Code::OverLimit
                };
                stats.push((plan.domain.clone(), rule.stats_key.clone(), s));
                DescriptorStatus {
                    code: code as i32,
                    current_limit: Some(current_limit(rule, 0)),
                    limit_remaining: 0,
                    duration_until_reset: Some(prost_types_duration(
                        rule.unit.map_or(0, |u| window_reset(u, now_ms)),
                    )),
                    ..Default::default()
                }
            }
            Slot::Checked(at) => {
                let check = &plan.checks[*at];
                let answer = answers.get(*at).copied().unwrap_or(KeyAnswer {
                    detail: [1, 0, 0, 0, 0],
                    taken: false,
                    local: false,
                });
                let [own_allowed, limit, remaining, retry_ms, reset_ms] = answer.detail;
                let rule = &check.rule;
                let own_allowed = own_allowed == 1;
                // This descriptor's place among the key's descriptors (the same descriptor
                // named twice: their hits add up, in request order).
                let pos = check.descriptors.iter().position(|&d| d == statuses.len()).unwrap_or(0);
                let first = pos == 0;
                let hits_here = check.hits.get(pos).copied().unwrap_or(check.cost);
                let through: u64 = check.hits.iter().take(pos + 1).sum();
                // Permits the key held before this request (an admitted answer is after it).
                let before = if own_allowed {
                    remaining.saturating_add(check.cost.min(i64::MAX as u64) as i64)
                } else {
                    remaining
                };
                let fits = |n: u64| before > 0 && i64::try_from(n).is_ok_and(|n| n <= before);
                // A descriptor that alone (with the ones before it) would pass says so; the
                // key's last descriptor carries the key's refusal.
                let passes = own_allowed || (pos + 1 < check.descriptors.len() && fits(through));
                if rule.quota && !rule.shadow && first {
                    quota_total += 1;
                    if !own_allowed {
                        quota_failed += 1;
                    }
                }
                let mut s = Stats { total_hits: hits_here, ..Stats::default() };
                let code = if passes {
                    s.within_limit = hits_here;
                    let left_after = before.saturating_sub(through.min(i64::MAX as u64) as i64);
                    let used = limit.saturating_sub(left_after).max(0) as u64;
                    let near = (limit.max(0) as f64 * options.near_limit_ratio).floor() as u64;
                    if used > near {
                        s.near_limit = hits_here.min(used - near);
                    }
                    Code::Ok
                } else {
                    s.over_limit = hits_here;
                    if answer.local {
                        s.over_limit_with_local_cache = hits_here;
                    }
                    if rule.shadow {
                        s.shadow_mode = hits_here;
                        Code::Ok
                    } else if rule.quota {
                        quota.violations.push(index);
                        Code::OverLimit
                    } else {
                        refused = true;
                        Code::OverLimit
                    }
                };
                // Over the limit: nothing left (envoyproxy's answer, whatever the hits). Taken:
                // what is left after this descriptor. Not taken: the request took nothing.
                let remaining = if !passes {
                    0
                } else if answer.taken {
                    before.saturating_sub(through.min(i64::MAX as u64) as i64)
                } else {
                    before.min(limit)
                };
                let reset = match (&rule.algorithm, rule.unit) {
                    // A fixed window resets when it ends, refused or not.
                    (Algorithm::Fixed, Some(unit)) => window_reset(unit, now_ms),
                    _ if !passes && retry_ms < 0 => rule.unit.map_or(0, |u| u.seconds() as i64),
                    _ if !passes => ceil_secs(retry_ms),
                    _ => ceil_secs(reset_ms),
                };
                stats.push((plan.domain.clone(), rule.stats_key.clone(), s));
                DescriptorStatus {
                    code: if passes { Code::Ok as i32 } else { code as i32 },
                    current_limit: Some(current_limit(rule, limit)),
                    limit_remaining: u32::try_from(remaining.max(0)).unwrap_or(u32::MAX),
                    duration_until_reset: Some(prost_types_duration(reset)),
                    ..Default::default()
                }
            }
        };
        if status.current_limit.is_some() {
            let effective =
                if status.code == Code::OverLimit as i32 { 0 } else { status.limit_remaining };
            if minimum.is_none_or(|(m, _)| effective < m) {
                minimum = Some((effective, statuses.len()));
            }
        }
        statuses.push(status);
    }
    // Quota mode: the request is refused when every quota descriptor is over.
    refused |= quota_total > 0 && quota_total == quota_failed;
    let mut global_shadow = false;
    let overall = if refused && options.global_shadow_mode {
        global_shadow = true;
        Code::Ok
    } else if refused {
        Code::OverLimit
    } else {
        Code::Ok
    };
    let mut response = RateLimitResponse { overall_code: overall as i32, ..Default::default() };
    if let (Some((names_limit, names_remaining, names_reset)), Some((remaining, at))) =
        (&options.headers, minimum)
    {
        let status = &statuses[at];
        let limit = status.current_limit.as_ref().map_or(0, |l| l.requests_per_unit);
        let reset = status.duration_until_reset.as_ref().map_or(0, |d| d.seconds);
        let header = |key: &str, value: String| HeaderValue {
            key: key.to_string(),
            value,
            ..Default::default()
        };
        response.response_headers_to_add = vec![
            header(names_limit, limit.to_string()),
            header(names_remaining, remaining.to_string()),
            header(names_reset, reset.to_string()),
        ];
    }
    response.statuses = statuses;
    quota.enabled = plan.slots.iter().any(|slot| match slot {
        Slot::Zero(rule, _) => rule.quota,
        Slot::Checked(at) => plan.checks.get(*at).is_some_and(|c| c.rule.quota),
        _ => false,
    });
    Outcome { response, stats, global_shadow, quota }
}

fn prost_types_duration(seconds: i64) -> envoy_types::pb::google::protobuf::Duration {
    envoy_types::pb::google::protobuf::Duration { seconds, nanos: 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;

    const CONFIG: &str = r#"
domain: d
descriptors:
  - key: ip
    rate_limit: {unit: minute, requests_per_unit: 10, name: per_ip}
  - key: ip_vip
    rate_limit: {unit: minute, requests_per_unit: 100, replaces: [{name: per_ip}]}
  - key: free
    rate_limit: {unlimited: true}
  - key: zero
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: tok
    rate_limit: {unit: second, requests_per_unit: 5, algorithm: token, burst: 20}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: sliding}
  - key: pol
    rate_limit: {policy: gold}
"#;

    fn options() -> Options {
        Options {
            cache_key_prefix: "rl:".into(),
            near_limit_ratio: 0.8,
            global_shadow_mode: false,
            headers: None,
            refused_requests_count: false,
            dynamic_metadata: false,
        }
    }

    fn descriptor(entries: &[(&str, &str)], hits: Option<u64>) -> RateLimitDescriptor {
        RateLimitDescriptor {
            entries: entries
                .iter()
                .map(|(k, v)| Entry { key: k.to_string(), value: v.to_string() })
                .collect(),
            hits_addend: hits.map(|value| envoy_types::pb::google::protobuf::UInt64Value { value }),
            ..Default::default()
        }
    }

    fn request(descriptors: Vec<RateLimitDescriptor>, hits: u32) -> RateLimitRequest {
        RateLimitRequest { domain: "d".into(), descriptors, hits_addend: hits }
    }

    fn config() -> Config {
        Config::load(&[("c".into(), CONFIG.into())], false).unwrap()
    }

    #[test]
    fn keys_and_groups() {
        let c = config();
        let r = request(
            vec![
                descriptor(&[("ip", "1.2.3.4")], None),
                descriptor(&[("tok", "a")], Some(0)),
                descriptor(&[("shadow", "s")], None),
                descriptor(&[("pol", "t")], None),
                descriptor(&[("nothing", "x")], None),
                descriptor(&[("free", "x")], None),
            ],
            3,
        );
        let p = plan(&r, Some(&c), &options()).unwrap();
        let checks: Vec<&Check> = p.checks.iter().collect();
        assert_eq!(
            all_command(&checks).join(" "),
            "RL.ALL 4 rl:d_ip_1.2.3.4_ rl:d_tok_a_token rl:d_shadow_s_sliding rl:d_pol_t_policy \
             PERIOD 10 60000 ALIGN COST 3 TOKEN 20 5 1000 COST 0 SLIDE 3 3600000 COST 3 SHADOW POLICY gold COST 3"
        );
    }

    #[test]
    fn replaces_and_duplicates() {
        let c = config();
        let r = request(
            vec![
                descriptor(&[("ip", "a")], None),
                descriptor(&[("ip_vip", "a")], None),
                descriptor(&[("ip_vip", "a")], Some(2)),
            ],
            0,
        );
        let p = plan(&r, Some(&c), &options()).unwrap();
        assert_eq!(p.checks.len(), 1);
        assert_eq!((p.checks[0].cost, p.checks[0].descriptors.clone()), (3, vec![1, 2]));
        let o = outcome(
            &p,
            &[KeyAnswer { detail: [1, 100, 97, 0, 60_000], taken: true, local: false }],
            &options(),
            0,
        );
        assert_eq!(o.response.overall_code, Code::Ok as i32);
        assert_eq!(o.response.statuses.len(), 3);
        assert_eq!(o.response.statuses[0].current_limit, None);
        // Each descriptor says what it left: 100 - 1, then 100 - 3.
        assert_eq!(o.response.statuses[1].limit_remaining, 99);
        assert_eq!(o.response.statuses[2].limit_remaining, 97);
        // Counted per descriptor, with its own hits (theirs).
        let hits: Vec<u64> = o.stats.iter().map(|(_, _, s)| s.total_hits).collect();
        assert_eq!(hits, vec![1, 2]);
    }

    /// The same descriptor twice with one permit left: the first alone would pass and says
    /// so, the second is over (envoyproxy's [OK, OVER_LIMIT]); the request is refused whole and
    /// takes nothing.
    #[test]
    fn the_same_descriptor_twice_answers_per_descriptor() {
        let c = config();
        let r =
            request(vec![descriptor(&[("ip", "a")], None), descriptor(&[("ip", "a")], None)], 0);
        let p = plan(&r, Some(&c), &options()).unwrap();
        assert_eq!(p.checks[0].hits, vec![1, 1]);
        // RL.ALL refused the key's COST 2 with 1 left (state unchanged).
        let refused =
            [KeyAnswer { detail: [0, 10, 1, 30_000, 30_000], taken: false, local: false }];
        let o = outcome(&p, &refused, &options(), 90_000);
        let codes: Vec<i32> = o.response.statuses.iter().map(|s| s.code).collect();
        assert_eq!(codes, vec![Code::Ok as i32, Code::OverLimit as i32]);
        assert_eq!(o.response.overall_code, Code::OverLimit as i32);
        let remaining: Vec<u32> = o.response.statuses.iter().map(|s| s.limit_remaining).collect();
        assert_eq!(remaining, vec![1, 0], "the first took nothing: 1 is still left");
        let over: Vec<u64> = o.stats.iter().map(|(_, _, s)| s.over_limit).collect();
        assert_eq!(over, vec![0, 1]);
        // None left: both over.
        let empty = [KeyAnswer { detail: [0, 10, 0, 30_000, 30_000], taken: false, local: false }];
        let o = outcome(&p, &empty, &options(), 90_000);
        assert!(o.response.statuses.iter().all(|s| s.code == Code::OverLimit as i32));
    }

    /// `hits_addend` above what is left of a fixed window: remaining 0 and the reset at the
    /// window's end (envoyproxy's answer), not the permits left nor a whole unit.
    #[test]
    fn hits_above_what_is_left_answer_zero_and_the_windows_end() {
        let c = config();
        let r = request(vec![descriptor(&[("ip", "a")], Some(5))], 0);
        let p = plan(&r, Some(&c), &options()).unwrap();
        // 1 of 10 left in the minute; 25 s into it (now = 85 s): the window ends in 35 s.
        let refused =
            [KeyAnswer { detail: [0, 10, 1, 35_000, 35_000], taken: false, local: false }];
        let status = &outcome(&p, &refused, &options(), 85_000).response.statuses[0];
        assert_eq!(status.code, Code::OverLimit as i32);
        assert_eq!(status.limit_remaining, 0);
        assert_eq!(status.duration_until_reset.unwrap().seconds, 35);
        // More hits than the limit itself: the module answers "never" (-1); still the end of
        // the window, to the second, at its last instant.
        let r = request(vec![descriptor(&[("ip", "a")], Some(50))], 0);
        let p = plan(&r, Some(&c), &options()).unwrap();
        let never = [KeyAnswer { detail: [0, 10, 10, -1, 0], taken: false, local: false }];
        let status = &outcome(&p, &never, &options(), 119_999).response.statuses[0];
        assert_eq!((status.limit_remaining, status.duration_until_reset.unwrap().seconds), (0, 1));
        let status = &outcome(&p, &never, &options(), 120_000).response.statuses[0];
        assert_eq!(status.duration_until_reset.unwrap().seconds, 60);
    }

    #[test]
    fn refusals_shadow_zero_and_headers() {
        let c = config();
        let r = request(
            vec![
                descriptor(&[("ip", "a")], None),
                descriptor(&[("shadow", "s")], None),
                descriptor(&[("zero", "z")], None),
            ],
            0,
        );
        let mut opts = options();
        opts.headers = Some(("L".into(), "R".into(), "X".into()));
        let p = plan(&r, Some(&c), &opts).unwrap();
        assert_eq!(p.checks.len(), 2);
        let answers = [
            KeyAnswer { detail: [1, 10, 4, 0, 30_000], taken: false, local: false },
            KeyAnswer { detail: [0, 3, 0, 1_000, 3_600_000], taken: false, local: false },
        ];
        let o = outcome(&p, &answers, &opts, 90_000);
        assert_eq!(o.response.overall_code, Code::OverLimit as i32);
        let codes: Vec<i32> = o.response.statuses.iter().map(|s| s.code).collect();
        assert_eq!(codes, vec![Code::Ok as i32, Code::Ok as i32, Code::OverLimit as i32]);
        // Not taken: the request's permit is still there.
        assert_eq!(o.response.statuses[0].limit_remaining, 5);
        assert_eq!(o.response.statuses[0].duration_until_reset.unwrap().seconds, 30);
        let shadow = &o.stats[1].2;
        assert_eq!((shadow.over_limit, shadow.shadow_mode), (1, 1));
        let headers: Vec<(String, String)> = o
            .response
            .response_headers_to_add
            .iter()
            .map(|h| (h.key.clone(), h.value.clone()))
            .collect();
        assert_eq!(headers[1], ("R".into(), "0".into()));
        opts.global_shadow_mode = true;
        let o = outcome(&p, &answers, &opts, 90_000);
        assert!(o.global_shadow);
        assert_eq!(o.response.overall_code, Code::Ok as i32);
    }

    #[test]
    fn quota_mode_refuses_when_every_quota_descriptor_is_over() {
        let text = "domain: d\ndescriptors:\n  - key: a\n    quota_mode: true\n    rate_limit: {unit: hour, requests_per_unit: 1}\n  - key: b\n    quota_mode: true\n    rate_limit: {unit: hour, requests_per_unit: 5}\n";
        let c = Config::load(&[("q".into(), text.into())], false).unwrap();
        let r = request(vec![descriptor(&[("a", "1")], None), descriptor(&[("b", "1")], None)], 0);
        let p = plan(&r, Some(&c), &options()).unwrap();
        assert!(p.checks.iter().all(Check::shadow));
        assert!(all_command(&p.checks.iter().collect::<Vec<_>>()).join(" ").ends_with("SHADOW"));
        let one_over = [
            KeyAnswer { detail: [0, 1, 0, 1000, 1000], taken: false, local: false },
            KeyAnswer { detail: [1, 5, 3, 0, 1000], taken: true, local: false },
        ];
        assert!(!quota_refuses(&p, &one_over));
        let o = outcome(&p, &one_over, &options(), 0);
        assert_eq!(o.response.overall_code, Code::Ok as i32);
        assert_eq!(o.response.statuses[0].code, Code::OverLimit as i32);
        let both_over =
            [one_over[0], KeyAnswer { detail: [0, 5, 0, 1000, 1000], taken: false, local: false }];
        assert!(quota_refuses(&p, &both_over));
        assert_eq!(
            outcome(&p, &both_over, &options(), 0).response.overall_code,
            Code::OverLimit as i32
        );
    }

    #[test]
    fn request_errors() {
        let c = config();
        let empty = RateLimitRequest {
            domain: String::new(),
            descriptors: vec![descriptor(&[("ip", "a")], None)],
            hits_addend: 0,
        };
        assert!(plan(&empty, Some(&c), &options())
            .unwrap_err()
            .0
            .contains("domain must not be empty"));
        let none = request(vec![], 0);
        assert!(plan(&none, Some(&c), &options())
            .unwrap_err()
            .0
            .contains("descriptor list must not be empty"));
        let r = request(vec![descriptor(&[("ip", "a")], None)], 0);
        assert!(plan(&r, None, &options()).unwrap_err().0.contains("no rate limit configuration"));
    }
}
