//! The rate-limit configuration: envoyproxy/ratelimit's YAML files (one domain each: nested
//! descriptors, value-less keys, `*` wildcards, `rate_limit {requests_per_unit, unit,
//! unlimited, name, replaces}`, `shadow_mode`, `detailed_metric`), with the same validation
//! (unknown keys are errors) and the same lookup, plus this service's own `rate_limit` fields:
//! `algorithm` (`fixed`, `sliding`, `token`, `leaky`, `gcra`), `burst` and `policy`.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

/// `rate_limit.unit`: envoyproxy's units, each a fixed number of seconds (a month is 30 days,
/// a year 365, as theirs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
}

impl Unit {
    fn parse(text: &str) -> Option<Unit> {
        Some(match text.to_ascii_uppercase().as_str() {
            "SECOND" => Unit::Second,
            "MINUTE" => Unit::Minute,
            "HOUR" => Unit::Hour,
            "DAY" => Unit::Day,
            "WEEK" => Unit::Week,
            "MONTH" => Unit::Month,
            "YEAR" => Unit::Year,
            _ => return None,
        })
    }

    /// The unit from the protocol's enum value (a descriptor's limit override).
    pub fn from_proto(value: i32) -> Option<Unit> {
        Some(match value {
            1 => Unit::Second,
            2 => Unit::Minute,
            3 => Unit::Hour,
            4 => Unit::Day,
            5 => Unit::Month,
            6 => Unit::Year,
            7 => Unit::Week,
            _ => return None,
        })
    }

    /// The protocol's enum value (`RateLimitResponse.RateLimit.Unit`).
    pub fn proto(self) -> i32 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 2,
            Unit::Hour => 3,
            Unit::Day => 4,
            Unit::Month => 5,
            Unit::Year => 6,
            Unit::Week => 7,
        }
    }

    /// The protocol's enum name (`MINUTE`).
    pub fn name(self) -> String {
        format!("{self:?}").to_ascii_uppercase()
    }

    pub fn seconds(self) -> u64 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3_600,
            Unit::Day => 86_400,
            Unit::Week => 7 * 86_400,
            Unit::Month => 30 * 86_400,
            Unit::Year => 365 * 86_400,
        }
    }
}

/// How a descriptor's limit is judged (`rate_limit.algorithm`, or `policy`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Algorithm {
    /// A fixed window aligned to the unit (envoyproxy's behaviour; the default): `RL.PERIOD …
    /// ALIGN`.
    Fixed,
    /// An exact sliding window of one unit: `RL.SLIDE`.
    Sliding,
    /// A token bucket of `burst` (default `requests_per_unit`) refilled continuously:
    /// `RL.TOKEN`.
    Token,
    /// A leaky bucket (a meter: no delay) of `burst` draining `requests_per_unit` per unit:
    /// `RL.LEAKY … NODELAY`.
    Leaky,
    /// GCRA with `burst`: judged as its exact equivalent, the continuous token bucket.
    Gcra,
    /// A server-held policy (`RL.POLICY`), changed live.
    Policy(String),
}

impl Algorithm {
    /// The word appended to the cache key for every algorithm but the default (a key holds one
    /// algorithm's state; changing a descriptor's algorithm starts new keys).
    pub fn key_suffix(&self) -> &'static str {
        match self {
            Algorithm::Fixed => "",
            Algorithm::Sliding => "sliding",
            Algorithm::Token => "token",
            Algorithm::Leaky => "leaky",
            Algorithm::Gcra => "gcra",
            Algorithm::Policy(_) => "policy",
        }
    }
}

/// One configured limit (a `rate_limit` block, or a descriptor's override).
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// The stats key: `domain.key_value.key2` (envoyproxy's).
    pub stats_key: String,
    pub requests_per_unit: u32,
    /// `None` only for an unlimited rule, or a policy with no unit given.
    pub unit: Option<Unit>,
    pub unlimited: bool,
    pub shadow: bool,
    /// `quota_mode`: over its limit, this descriptor refuses the request only when every
    /// quota-mode descriptor of the request is over (envoyproxy's rule).
    pub quota: bool,
    pub name: String,
    pub replaces: Vec<String>,
    pub detailed_metric: bool,
    pub algorithm: Algorithm,
    /// `burst`: the bucket's capacity (token, leaky, gcra); default `requests_per_unit`.
    pub burst: Option<u64>,
}

/// A descriptor level of the tree.
#[derive(Debug, Default)]
struct Node {
    children: HashMap<String, Node>,
    /// Child keys holding `*` (`key_val*ue`), with their parts split on `*`, in file order.
    wildcards: Vec<(String, Vec<String>)>,
    limit: Option<Arc<Rule>>,
    share_threshold: bool,
}

/// A loaded configuration: every domain, and the files it came from (for `/json`).
#[derive(Debug, Default)]
pub struct Config {
    domains: HashMap<String, Node>,
    /// `(file name, its YAML as JSON)` in load order.
    pub files: Vec<(String, serde_json::Value)>,
}

/// A config error: the file and what is wrong (envoyproxy's `file: message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct YamlRoot {
    domain: Option<String>,
    #[serde(default)]
    descriptors: Vec<YamlDescriptor>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct YamlDescriptor {
    key: Option<String>,
    value: Option<String>,
    rate_limit: Option<YamlRateLimit>,
    #[serde(default)]
    descriptors: Vec<YamlDescriptor>,
    #[serde(default)]
    shadow_mode: bool,
    #[serde(default)]
    detailed_metric: bool,
    #[serde(default)]
    share_threshold: bool,
    #[serde(default)]
    value_to_metric: bool,
    #[serde(default)]
    quota_mode: bool,
    #[serde(default)]
    metadata: Option<serde_norway::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct YamlRateLimit {
    #[serde(default)]
    requests_per_unit: u32,
    unit: Option<String>,
    #[serde(default)]
    unlimited: bool,
    name: Option<String>,
    #[serde(default)]
    replaces: Vec<YamlReplaces>,
    algorithm: Option<String>,
    burst: Option<u64>,
    policy: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct YamlReplaces {
    name: Option<String>,
}

/// What a request's descriptor resolved to.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub rule: Arc<Rule>,
    /// Per entry, the value to put in the cache key (a `share_threshold` wildcard's pattern,
    /// or the entry's own value).
    pub key_values: Vec<String>,
}

impl Config {
    /// Loads every regular file under `dir` (recursively, sorted by path; dot files skipped
    /// when `ignore_dot_files`). A missing directory is an empty configuration.
    pub fn load_dir(
        dir: &Path,
        ignore_dot_files: bool,
        merge_domains: bool,
    ) -> Result<Config, ConfigError> {
        let mut files = Vec::new();
        collect_files(dir, ignore_dot_files, &mut files)
            .map_err(|e| ConfigError(format!("{}: {e}", dir.display())))?;
        files.sort();
        let mut contents = Vec::new();
        for path in files {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| ConfigError(format!("{}: {e}", path.display())))?;
            contents.push((path.display().to_string(), text));
        }
        Config::load(&contents, merge_domains)
    }

    /// Loads `(name, YAML text)` files, one domain each (`merge_domains`: a domain in several
    /// files is merged, else a duplicate is an error).
    pub fn load(files: &[(String, String)], merge_domains: bool) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        for (name, text) in files {
            let error = |message: String| ConfigError(format!("{name}: {message}"));
            let mut tree: serde_norway::Value = serde_norway::from_str(text)
                .map_err(|e| error(format!("error loading config file: {e}")))?;
            check_keys(&tree).map_err(|e| error(format!("config error, {e}")))?;
            for warning in drop_misplaced_keys(&mut tree, Level::Root, "") {
                tracing::warn!("{name}: {warning}");
            }
            let root: YamlRoot = serde_norway::from_value(tree)
                .map_err(|e| error(format!("error loading config file: {e}")))?;
            let json: serde_json::Value = serde_norway::from_str(text).unwrap_or_default();
            let domain = root.domain.filter(|d| !d.is_empty());
            let Some(domain) = domain else {
                return Err(error("config file cannot have empty domain".into()));
            };
            if config.domains.contains_key(&domain) && !merge_domains {
                return Err(error(format!("duplicate domain '{domain}' in config file")));
            }
            let node = config.domains.entry(domain.clone()).or_default();
            load_descriptors(node, &format!("{domain}."), root.descriptors, &error)?;
            config.files.push((name.clone(), json));
        }
        Ok(config)
    }

    /// Whether no domain is loaded.
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty()
    }

    /// The rule for a request's descriptor (`entries` as `(key, value)`), as envoyproxy finds
    /// it: at each level the entry's `key_value`, else a wildcard child matching it, else the
    /// value-less `key`; the rule applies only if it sits at the descriptor's last entry.
    pub fn lookup(&self, domain: &str, entries: &[(&str, &str)]) -> Option<Resolved> {
        let mut level = self.domains.get(domain)?;
        let mut found: Option<Arc<Rule>> = None;
        let mut key_values: Vec<String> = entries.iter().map(|(_, v)| v.to_string()).collect();
        let mut detailed = String::from(domain);
        for (i, (key, value)) in entries.iter().enumerate() {
            let full = format!("{key}_{value}");
            detailed.push('.');
            detailed.push_str(&full);
            let mut next = level.children.get(&full);
            if next.is_none() {
                for (pattern, parts) in &level.wildcards {
                    if wildcard_match(parts, &full) {
                        next = level.children.get(pattern);
                        if let Some(node) = next.filter(|n| n.share_threshold) {
                            let _ = node;
                            if let (Some(slot), Some(shared)) =
                                (key_values.get_mut(i), pattern.strip_prefix(&format!("{key}_")))
                            {
                                *slot = shared.to_string();
                            }
                        }
                        break;
                    }
                }
            }
            if next.is_none() {
                next = level.children.get(*key);
            }
            let Some(node) = next else { break };
            if let Some(rule) = &node.limit {
                if i + 1 == entries.len() {
                    found = Some(if rule.detailed_metric {
                        Arc::new(Rule { stats_key: detailed.clone(), ..(**rule).clone() })
                    } else {
                        rule.clone()
                    });
                }
            }
            if node.children.is_empty() {
                break;
            }
            level = node;
        }
        found.map(|rule| Resolved { rule, key_values })
    }
}

/// Keys envoyproxy/ratelimit accepts anywhere in a file (its `validKeys`: it checks names, not
/// places, and ignores a known key where its struct has no field), plus this service's own.
const KNOWN_KEYS: &[&str] = &[
    "domain",
    "key",
    "value",
    "descriptors",
    "rate_limit",
    "unit",
    "requests_per_unit",
    "unlimited",
    "shadow_mode",
    "quota_mode",
    "name",
    "replaces",
    "detailed_metric",
    "value_to_metric",
    "share_threshold",
    "metadata",
    "algorithm",
    "burst",
    "policy",
];

/// envoyproxy's check of a file's keys, anywhere in it, with its words: every key a string
/// (`key is not of type string: 0.25`) and a known one (`unknown key 'ratelimit'`), every list
/// a list of maps (`yaml file contains list of type other than map: a`). `metadata` holds what
/// its author likes.
fn check_keys(value: &serde_norway::Value) -> Result<(), String> {
    use serde_norway::Value;
    let scalar = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "<nil>".to_string(),
        other => format!("{other:?}"),
    };
    match value {
        Value::Mapping(map) => {
            for (key, child) in map {
                let Some(name) = key.as_str() else {
                    return Err(format!("key is not of type string: {}", scalar(key)));
                };
                if !KNOWN_KEYS.contains(&name) {
                    return Err(format!("unknown key '{name}'"));
                }
                if name != "metadata" {
                    check_keys(child)?;
                }
            }
            Ok(())
        }
        Value::Sequence(items) => {
            for item in items {
                if !item.is_mapping() {
                    return Err(format!(
                        "yaml file contains list of type other than map: {}",
                        scalar(item)
                    ));
                }
                check_keys(item)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A level of the file, by the keys that belong there.
#[derive(Debug, Clone, Copy)]
enum Level {
    Root,
    Descriptor,
    RateLimit,
    Replaces,
}

impl Level {
    fn keys(self) -> &'static [&'static str] {
        match self {
            Level::Root => &["domain", "descriptors"],
            Level::Descriptor => &[
                "key",
                "value",
                "rate_limit",
                "descriptors",
                "shadow_mode",
                "detailed_metric",
                "share_threshold",
                "value_to_metric",
                "quota_mode",
                "metadata",
            ],
            Level::RateLimit => &[
                "requests_per_unit",
                "unit",
                "unlimited",
                "name",
                "replaces",
                "algorithm",
                "burst",
                "policy",
            ],
            Level::Replaces => &["name"],
        }
    }
}

/// Removes the known keys that sit where they mean nothing (`unit:` on a descriptor,
/// `shadow_mode:` inside `rate_limit`, a top-level `name:`), as envoyproxy ignores them, and
/// says which: one warning each. Unknown keys stay, to be refused by name.
fn drop_misplaced_keys(value: &mut serde_norway::Value, level: Level, at: &str) -> Vec<String> {
    let mut warnings = Vec::new();
    let serde_norway::Value::Mapping(map) = value else { return warnings };
    let misplaced: Vec<serde_norway::Value> = map
        .keys()
        .filter(|k| {
            k.as_str().is_some_and(|k| KNOWN_KEYS.contains(&k) && !level.keys().contains(&k))
        })
        .cloned()
        .collect();
    for key in misplaced {
        let name = key.as_str().unwrap_or_default();
        let place = if at.is_empty() { "the top level".to_string() } else { format!("'{at}'") };
        warnings.push(format!("'{name}' means nothing at {place}: ignored"));
        map.remove(&key);
    }
    let join = |what: &str| if at.is_empty() { what.to_string() } else { format!("{at}.{what}") };
    for (key, child) in map.iter_mut() {
        let inner = match key.as_str() {
            Some("descriptors") => Level::Descriptor,
            Some("rate_limit") => Level::RateLimit,
            Some("replaces") => Level::Replaces,
            _ => continue,
        };
        let items = match child {
            serde_norway::Value::Sequence(items) => items.iter_mut().collect(),
            other => vec![other],
        };
        for item in items {
            // A descriptor is named by its key (`descriptors` nest: `a.b`).
            let path = match inner {
                Level::Descriptor => join(item.get("key").and_then(|k| k.as_str()).unwrap_or("?")),
                _ => join(key.as_str().unwrap_or("?")),
            };
            warnings.extend(drop_misplaced_keys(item, inner, &path));
        }
    }
    warnings
}

fn collect_files(
    dir: &Path,
    ignore_dot_files: bool,
    out: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        if ignore_dot_files && entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        // Follows symlinks (a runtime tree swapped by a symlink).
        let meta = std::fs::metadata(&path)?;
        if meta.is_dir() {
            collect_files(&path, ignore_dot_files, out)?;
        } else if meta.is_file() {
            out.push(path);
        }
    }
    Ok(())
}

fn load_descriptors(
    node: &mut Node,
    parent_key: &str,
    descriptors: Vec<YamlDescriptor>,
    error: &dyn Fn(String) -> ConfigError,
) -> Result<(), ConfigError> {
    for descriptor in descriptors {
        let key = descriptor.key.filter(|k| !k.is_empty());
        let Some(key) = key else {
            return Err(error("descriptor has empty key".into()));
        };
        let mut final_key = key.clone();
        if let Some(value) = descriptor.value.as_deref().filter(|v| !v.is_empty()) {
            final_key = format!("{key}_{value}");
        }
        let full_key = format!("{parent_key}{final_key}");
        if node.children.contains_key(&final_key) {
            return Err(error(format!("duplicate descriptor composite key '{full_key}'")));
        }
        let _ = (descriptor.value_to_metric, descriptor.metadata);
        if descriptor.share_threshold && !final_key.contains('*') {
            return Err(error(format!(
                "share_threshold can only be used with wildcard values (containing '*'), but found key '{final_key}'"
            )));
        }
        let limit = match descriptor.rate_limit {
            None => None,
            Some(rl) => Some(Arc::new(rule(
                rl,
                &full_key,
                (descriptor.shadow_mode, descriptor.quota_mode),
                descriptor.detailed_metric,
                error,
            )?)),
        };
        let mut child =
            Node { limit, share_threshold: descriptor.share_threshold, ..Node::default() };
        load_descriptors(&mut child, &format!("{full_key}."), descriptor.descriptors, error)?;
        if final_key.contains('*') {
            let parts = final_key.split('*').map(str::to_string).collect();
            node.wildcards.push((final_key.clone(), parts));
        }
        node.children.insert(final_key, child);
    }
    Ok(())
}

fn rule(
    rl: YamlRateLimit,
    full_key: &str,
    (shadow, quota): (bool, bool),
    detailed_metric: bool,
    error: &dyn Fn(String) -> ConfigError,
) -> Result<Rule, ConfigError> {
    let unit = match rl.unit.as_deref() {
        None | Some("") => None,
        Some(text) => Some(
            Unit::parse(text).ok_or_else(|| error(format!("invalid rate limit unit '{text}'")))?,
        ),
    };
    let algorithm = match (rl.policy.as_deref(), rl.algorithm.as_deref()) {
        (Some(""), _) => return Err(error(format!("'{full_key}': policy name is empty"))),
        (Some(_), Some(a)) => {
            return Err(error(format!(
                "'{full_key}': give either policy or algorithm ('{a}'), not both"
            )))
        }
        (Some(name), None) => Algorithm::Policy(name.to_string()),
        (None, None | Some("fixed")) => Algorithm::Fixed,
        (None, Some("sliding")) => Algorithm::Sliding,
        (None, Some("token")) => Algorithm::Token,
        (None, Some("leaky")) => Algorithm::Leaky,
        (None, Some("gcra")) => Algorithm::Gcra,
        (None, Some(other)) => {
            return Err(error(format!(
            "'{full_key}': unknown algorithm '{other}' (use fixed, sliding, token, leaky or gcra)"
        )))
        }
    };
    if rl.unlimited {
        if unit.is_some() {
            return Err(error("should not specify rate limit unit when unlimited".into()));
        }
    } else if unit.is_none() && !matches!(algorithm, Algorithm::Policy(_)) {
        return Err(error(format!("invalid rate limit unit '{}'", rl.unit.unwrap_or_default())));
    }
    if let Some(burst) = rl.burst {
        if !matches!(algorithm, Algorithm::Token | Algorithm::Leaky | Algorithm::Gcra) {
            return Err(error(format!(
                "'{full_key}': burst applies to the token, leaky and gcra algorithms only"
            )));
        }
        if burst == 0 || burst > 1_000_000_000_000 {
            return Err(error(format!("'{full_key}': burst must be between 1 and 10^12")));
        }
    }
    if matches!(algorithm, Algorithm::Sliding) && rl.requests_per_unit > 1_000_000 {
        return Err(error(format!(
            "'{full_key}': a sliding window holds at most 1000000 requests per unit (exact log)"
        )));
    }
    let name = rl.name.unwrap_or_default();
    let mut replaces = Vec::new();
    for r in rl.replaces {
        let r = r.name.unwrap_or_default();
        if r.is_empty() {
            return Err(error("should not have an empty replaces entry".into()));
        }
        if r == name {
            return Err(error("replaces should not contain name of same descriptor".into()));
        }
        replaces.push(r);
    }
    Ok(Rule {
        stats_key: full_key.to_string(),
        requests_per_unit: rl.requests_per_unit,
        unit,
        unlimited: rl.unlimited,
        shadow,
        quota,
        name,
        replaces,
        detailed_metric,
        algorithm,
        burst: rl.burst,
    })
}

/// Whether `value` matches a pattern split on `*` (each `*` matches any run of characters).
fn wildcard_match(parts: &[String], value: &str) -> bool {
    let [first, middle @ .., last] = parts else {
        return parts.first().is_some_and(|p| p == value);
    };
    if value.len() < parts.iter().map(String::len).sum::<usize>()
        || !value.starts_with(first.as_str())
        || !value.ends_with(last.as_str())
    {
        return false;
    }
    let mut rest = &value[first.len()..value.len() - last.len()];
    for part in middle {
        match rest.find(part.as_str()) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Config, ConfigError> {
        Config::load(&[("f.yaml".to_string(), text.to_string())], false)
    }

    const BASIC: &str = r#"
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: path
    value: /login
    rate_limit: {unit: minute, requests_per_unit: 3, name: login}
  - key: path
    value: /api/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: user
    descriptors:
      - key: plan
        value: gold
        rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: token, burst: 50}
      - key: plan
        rate_limit: {unlimited: true}
  - key: tenant
    detailed_metric: true
    rate_limit: {policy: tenants}
"#;

    #[test]
    fn lookup_follows_envoyproxy() {
        let c = load(BASIC).unwrap();
        let r = c.lookup("edge", &[("remote_address", "10.0.0.1")]).unwrap();
        assert_eq!((r.rule.requests_per_unit, r.rule.unit), (5, Some(Unit::Second)));
        assert_eq!(r.rule.stats_key, "edge.remote_address");
        let r = c.lookup("edge", &[("path", "/login")]).unwrap();
        assert_eq!(r.rule.name, "login");
        assert!(c.lookup("edge", &[("path", "/other")]).is_none());
        let r = c.lookup("edge", &[("path", "/api/v1/x")]).unwrap();
        assert_eq!(r.key_values, vec!["/api/*".to_string()]);
        let r = c.lookup("edge", &[("user", "u1"), ("plan", "gold")]).unwrap();
        assert_eq!((r.rule.algorithm.clone(), r.rule.burst), (Algorithm::Token, Some(50)));
        assert!(c.lookup("edge", &[("user", "u1"), ("plan", "free")]).unwrap().rule.unlimited);
        // A rule applies only at the descriptor's last entry.
        assert!(c.lookup("edge", &[("user", "u1")]).is_none());
        assert!(c.lookup("edge", &[("remote_address", "a"), ("x", "y")]).is_none());
        let r = c.lookup("edge", &[("tenant", "acme")]).unwrap();
        assert_eq!(r.rule.algorithm, Algorithm::Policy("tenants".into()));
        assert_eq!(r.rule.stats_key, "edge.tenant_acme");
        assert!(c.lookup("other", &[("remote_address", "a")]).is_none());
    }

    #[test]
    fn wildcards() {
        let parts = |p: &str| p.split('*').map(str::to_string).collect::<Vec<_>>();
        assert!(wildcard_match(&parts("k_a*"), "k_abc"));
        assert!(wildcard_match(&parts("k_a*c*e"), "k_abcde"));
        assert!(!wildcard_match(&parts("k_a*c*e"), "k_abde"));
        assert!(!wildcard_match(&parts("k_ab*ba"), "k_aba"));
        assert!(wildcard_match(&parts("k_x"), "k_x"));
    }

    #[test]
    fn bad_files_are_refused_with_their_reason() {
        for (text, expected) in [
            ("domain: d\nfoo: 1\n", "config error, unknown key 'foo'"),
            ("domain: d\ndescriptors:\n  - key: k\n    0.25: x\n", "config error, key is not of type string: 0.25"),
            ("domain: d\ndescriptors:\n  - a\n", "config error, yaml file contains list of type other than map: a"),
            ("descriptors: []\n", "empty domain"),
            ("domain: d\ndescriptors:\n  - value: v\n", "empty key"),
            ("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", "invalid rate limit unit 'fortnight'"),
            ("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 1}\n", "invalid rate limit unit"),
            ("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}\n", "should not specify rate limit unit when unlimited"),
            ("domain: d\ndescriptors:\n  - key: k\n  - key: k\n", "duplicate descriptor composite key 'd.k'"),
            ("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: magic}\n", "unknown algorithm 'magic'"),
            ("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, burst: 5}\n", "burst applies"),
            ("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, name: a, replaces: [{name: a}]}\n", "replaces should not contain name"),
            ("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{}]}\n", "empty replaces"),
            ("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {policy: p, algorithm: token}\n", "not both"),
            ("domain: d\ndescriptors:\n  - key: k\n    share_threshold: true\n", "share_threshold can only be used"),
            ("domain: d\ndescriptors: [", "error loading config file"),
        ] {
            let error = load(text).unwrap_err().0;
            assert!(error.starts_with("f.yaml: "), "{error}");
            assert!(error.contains(expected), "{text:?}: {error}");
        }
        let twice = vec![
            ("a".to_string(), "domain: d\n".to_string()),
            ("b".to_string(), "domain: d\n".to_string()),
        ];
        assert!(Config::load(&twice, false).unwrap_err().0.contains("duplicate domain 'd'"));
        assert!(Config::load(&twice, true).is_ok());
    }

    /// envoyproxy/ratelimit serves files with known keys in the wrong place (it ignores them):
    /// so does this service, warning about each.
    #[test]
    fn known_keys_in_the_wrong_place_are_ignored_with_a_warning() {
        let text = "name: top\ndomain: d\ndescriptors:\n  - key: k\n    unit: minute\n    rate_limit: {unit: second, requests_per_unit: 2, shadow_mode: true, replaces: [{name: x, unit: hour}]}\n";
        let c = load(text).unwrap();
        let rule = c.lookup("d", &[("k", "v")]).unwrap().rule;
        assert_eq!(
            (rule.requests_per_unit, rule.unit, rule.shadow),
            (2, Some(Unit::Second), false)
        );
        let mut tree: serde_norway::Value = serde_norway::from_str(text).unwrap();
        let warnings = drop_misplaced_keys(&mut tree, Level::Root, "");
        assert_eq!(
            warnings,
            vec![
                "'name' means nothing at the top level: ignored",
                "'unit' means nothing at 'k': ignored",
                "'shadow_mode' means nothing at 'k.rate_limit': ignored",
                "'unit' means nothing at 'k.rate_limit.replaces': ignored",
            ]
        );
        // An unknown key is still refused, wherever it is.
        let error = load("domain: d\ndescriptors:\n  - key: k\n    unti: minute\n").unwrap_err();
        assert!(error.0.contains("config error, unknown key 'unti'"), "{error}");
    }
}
