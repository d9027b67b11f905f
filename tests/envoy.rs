//! `redis-ratelimit envoy` behind a real Envoy 1.40 (`envoy.filters.http.ratelimit`), configured
//! only through envoyproxy/ratelimit's environment variables and config files: 200/429 counts,
//! the response headers, every descriptor of a request decided at once (a refused request
//! takes nothing), shadow, unlimited, replaces, wildcards, algorithms, live policies, config
//! reload, Redis down. The harness is tests/envoy/harness.rs.

mod common;
#[path = "envoy/harness.rs"]
mod harness;

use common::ints;
use harness::Stack;

const EDGE: &str = r#"
domain: edge
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: tenant
    value: acme
    descriptors:
      - key: plan
        value: gold
        rate_limit: {unit: hour, requests_per_unit: 2}
"#;

#[test]
fn a_fixed_window_admits_its_limit_per_user_then_429() {
    let stack = Stack::start(EDGE, &[("LIMIT_RESPONSE_HEADERS_ENABLED", "true")]);
    let alice = [("x-user", "alice")];
    let first = stack.get(&alice);
    assert_eq!(first.status, 200, "{first:?}\n{}", stack.logs());
    assert_eq!(first.headers.get("ratelimit-limit").map(String::as_str), Some("3"));
    assert_eq!(first.headers.get("ratelimit-remaining").map(String::as_str), Some("2"));
    let reset: u64 = first.headers["ratelimit-reset"].parse().unwrap();
    assert!((1..=3600).contains(&reset), "{reset}");
    assert_eq!(stack.statuses(3, &alice), vec![200, 200, 429]);
    let refused = stack.get(&alice);
    assert_eq!(refused.status, 429);
    assert_eq!(refused.headers.get("x-envoy-ratelimited").map(String::as_str), Some("true"));
    assert_eq!(refused.headers.get("ratelimit-remaining").map(String::as_str), Some("0"));
    // Another user has a window of their own.
    assert_eq!(stack.statuses(1, &[("x-user", "bob")]), vec![200]);
    // envoyproxy's key, without its window suffix (the module keeps the window).
    let mut con = stack.redis.conn();
    let peek = ints(&mut con, &["RL.PEEK", "edge_user_alice_"]);
    assert_eq!(peek[1..3], [3, 0]);
    // The stats, as labelled counters.
    let series = r#"ratelimit_service_rate_limit_over_limit{domain="edge",key1="user",key2=""}"#;
    assert_eq!(stack.service.metric(series), 2);
    let series = r#"ratelimit_service_rate_limit_total_hits{domain="edge",key1="user",key2=""}"#;
    assert_eq!(stack.service.metric(series), 6);
}

#[test]
fn a_request_refused_by_one_descriptor_takes_nothing_from_the_others() {
    let stack = Stack::start(EDGE, &[]);
    let both = [("x-user", "carol"), ("x-tenant", "acme"), ("x-plan", "gold")];
    // The tenant's nested limit (2) refuses the third request: carol's own limit (3) keeps
    // the permit the refused request would have taken.
    assert_eq!(stack.statuses(4, &both), vec![200, 200, 429, 429]);
    let mut con = stack.redis.conn();
    // RL.PEEK answers as one more request would: admitted, leaving 0.
    assert_eq!(ints(&mut con, &["RL.PEEK", "edge_user_carol_"])[..3], [1, 3, 0]);
    assert_eq!(stack.statuses(2, &[("x-user", "carol")]), vec![200, 429]);
}

/// The module's side of shadow descriptors: an `RL.ALL` group marked `SHADOW` never refuses
/// the call; it takes its cost only when it admits.
#[test]
fn rl_all_shadow_groups_never_refuse() {
    let redis = common::Server::start();
    let mut con = redis.conn();
    let call = |con: &mut common::Connection| {
        let reply = common::run(
            con,
            &[
                "RL.ALL", "2", "shadowed", "enforced", "PERIOD", "2", "1m", "SHADOW", "PERIOD",
                "1", "1m",
            ],
        );
        reply.unwrap_or_else(|e| panic!("{e}"))
    };
    // Both admit: both take.
    let _ = call(&mut con);
    assert_eq!(ints(&mut con, &["RL.PEEK", "shadowed"])[..3], [1, 2, 0]);
    // The enforced key (1 per minute) refuses now: the shadow key is untouched.
    let refused = call(&mut con);
    let common::Value::Array(items) = refused else { panic!("{refused:?}") };
    assert_eq!(items.first(), Some(&common::Value::Int(0)));
    assert_eq!(ints(&mut con, &["RL.PEEK", "shadowed"])[..3], [1, 2, 0]);
    // Shadow refusing, enforced admitting: admitted, and the shadow key stays at its limit.
    let reply = common::run(
        &mut con,
        &["RL.ALL", "2", "full", "open", "PERIOD", "1", "1m", "SHADOW", "PERIOD", "5", "1m"],
    )
    .unwrap();
    let common::Value::Array(items) = reply else { panic!() };
    assert_eq!(items.first(), Some(&common::Value::Int(1)));
    let reply = common::run(
        &mut con,
        &["RL.ALL", "2", "full", "open", "PERIOD", "1", "1m", "SHADOW", "PERIOD", "5", "1m"],
    )
    .unwrap();
    let common::Value::Array(items) = reply else { panic!() };
    assert_eq!(
        items.first(),
        Some(&common::Value::Int(1)),
        "a refusing shadow limit never refuses"
    );
    assert_eq!(ints(&mut con, &["RL.PEEK", "open"])[..3], [1, 5, 2]);
    let error = common::error_text(
        &mut con,
        &[b"RL.ALL", b"1", b"k", b"TOKEN", b"1", b"1", b"1", b"SHADOW", b"shadow"],
    );
    assert_eq!(error, "ERR syntax error: option SHADOW given more than once");
}

const FEATURES: &str = r#"
domain: edge
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 3, name: per_user}
  - key: vip
    rate_limit: {unit: hour, requests_per_unit: 5, replaces: [{name: per_user}]}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
  - key: path
    value: /api/*
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: path
    value: /shared/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: alg
    value: sliding
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: sliding}
  - key: alg
    value: token
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: token, burst: 3}
  - key: alg
    value: leaky
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: leaky, burst: 2}
  - key: alg
    value: gcra
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: gcra, burst: 2}
  - key: alg
    value: tier
    rate_limit: {policy: tier, unit: minute}
  - key: bulk
    rate_limit: {unit: hour, requests_per_unit: 10}
"#;

/// The `algorithm` field of a key's `RL.INFO`.
fn algorithm_of(con: &mut common::Connection, key: &str) -> String {
    let info: Vec<redis::Value> = redis::cmd("RL.INFO").arg(key).query(con).unwrap();
    let words: Vec<String> = info
        .iter()
        .map(|v| match v {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            redis::Value::SimpleString(s) => s.clone(),
            redis::Value::Int(i) => i.to_string(),
            other => format!("{other:?}"),
        })
        .collect();
    let at = words.iter().position(|w| w == "algorithm").expect("algorithm field");
    words[at + 1].clone()
}

#[test]
fn every_algorithm_per_descriptor() {
    let stack = Stack::start(FEATURES, &[]);
    let mut con = stack.redis.conn();
    for (alg, admitted, key, stored) in [
        ("sliding", 2, "edge_alg_sliding_sliding", "slide"),
        ("token", 3, "edge_alg_token_token", "token"),
        ("leaky", 2, "edge_alg_leaky_leaky", "leaky"),
        // GCRA is judged as its equivalent token bucket (same admits).
        ("gcra", 2, "edge_alg_gcra_gcra", "token"),
    ] {
        let mut expected = vec![200; admitted];
        expected.extend([429, 429]);
        assert_eq!(
            stack.statuses(admitted + 2, &[("x-alg", alg)]),
            expected,
            "{alg}\n{}",
            stack.logs()
        );
        assert_eq!(algorithm_of(&mut con, key), stored, "{alg}");
    }
}

#[test]
fn shadow_unlimited_replaces_wildcards_and_hits_addend() {
    let stack = Stack::start(FEATURES, &[]);
    let mut con = stack.redis.conn();
    // shadow_mode: over its limit, still 200; counted as shadow_mode.
    assert_eq!(stack.statuses(3, &[("x-shadow", "s")]), vec![200, 200, 200]);
    let series = r#"ratelimit_service_rate_limit_shadow_mode{domain="edge",key1="shadow",key2=""}"#;
    assert_eq!(stack.service.metric(series), 2);
    // A shadow descriptor never refuses a request the others admit, nor rescues one they
    // refuse: user (3) decides.
    let both = [("x-shadow", "s2"), ("x-user", "u1")];
    assert_eq!(stack.statuses(4, &both), vec![200, 200, 200, 429]);
    // unlimited: never limited, no key.
    assert_eq!(stack.statuses(6, &[("x-free", "f")]), vec![200; 6]);
    let keys: Vec<String> = redis::cmd("KEYS").arg("edge_free*").query(&mut con).unwrap();
    assert!(keys.is_empty(), "{keys:?}");
    // replaces: the vip limit (5) replaces per_user (3) when both are sent.
    let vip = [("x-user", "u2"), ("x-vip", "v")];
    assert_eq!(stack.statuses(6, &vip), vec![200, 200, 200, 200, 200, 429]);
    // wildcards: each value its own counter; share_threshold: one counter for the pattern.
    assert_eq!(stack.statuses(3, &[("x-path", "/api/a")]), vec![200, 200, 429]);
    assert_eq!(stack.statuses(1, &[("x-path", "/api/b")]), vec![200]);
    assert_eq!(stack.statuses(1, &[("x-path", "/shared/a")]), vec![200]);
    assert_eq!(stack.statuses(2, &[("x-path", "/shared/b")]), vec![200, 429]);
    assert_eq!(ints(&mut con, &["RL.PEEK", "edge_path_/shared/*_"])[0], 0);
    // hits_addend 4 (the request's, from Envoy's filter state): 10 per hour admits two
    // requests (8); the third crosses the limit (2 left, 4 asked): refused, and counted in
    // full past it, as envoyproxy counts it (a charge after the fact must count): 12 of 10.
    let bulk = [("x-bulk", "b"), ("x-cost", "4")];
    assert_eq!(stack.statuses(3, &bulk), vec![200, 200, 429], "{}", stack.logs());
    assert_eq!(ints(&mut con, &["RL.PEEK", "edge_bulk_b_"])[..3], [0, 10, 0]);
    // Refused with nothing left: counts nothing more.
    assert_eq!(stack.statuses(1, &bulk), vec![429]);
    let used = common::stored_state(&mut con, "edge_bulk_b_");
    assert!(used.iter().any(|(k, v)| k == "used" && v == "12"), "{used:?}");
}

#[test]
fn a_policy_changes_live_without_a_reload() {
    let stack = Stack::start(FEATURES, &[]);
    let mut con = stack.redis.conn();
    let tier = [("x-alg", "tier")];
    // No such policy yet: the module refuses the call, the service answers an error and
    // Envoy (failure_mode_deny) a 500.
    assert_eq!(stack.statuses(1, &tier), vec![500]);
    common::run(&mut con, &["RL.POLICY", "SET", "tier", "PERIOD", "2", "1h", "ALIGN"]).unwrap();
    assert_eq!(stack.statuses(3, &tier), vec![200, 200, 429]);
    // The quota raised: in force at once, in the same window (envoyproxy/ratelimit#185).
    common::run(&mut con, &["RL.POLICY", "SET", "tier", "PERIOD", "4", "1h", "ALIGN"]).unwrap();
    let raised = stack.get(&tier);
    assert_eq!(raised.status, 200);
    assert_eq!(
        raised.headers.get("x-ratelimit-limit").map(|l| l.starts_with('4')),
        Some(true),
        "{raised:?}"
    );
    assert_eq!(stack.statuses(2, &tier), vec![200, 429]);
}

#[test]
fn config_reload_keeps_the_last_good_config() {
    let stack = Stack::start(EDGE, &[]);
    let alice = [("x-user", "alice")];
    assert_eq!(stack.statuses(4, &alice), vec![200, 200, 200, 429]);
    // Raised to 5: reloaded on change (watching the config directory).
    let raised = EDGE.replace("requests_per_unit: 3", "requests_per_unit: 5");
    std::fs::write(stack.service.config_dir.join("config.yaml"), &raised).unwrap();
    harness::wait_for("the reload", || {
        harness::get(stack.service.http_port, "/json", &[]).body.contains("\"requests_per_unit\":5")
    });
    assert_eq!(stack.statuses(3, &alice), vec![200, 200, 429]);
    // An invalid file is refused, counted, and the last good config stays.
    std::fs::write(stack.service.config_dir.join("config.yaml"), "domain: edge\nbogus: 1\n")
        .unwrap();
    harness::wait_for("the refused reload", || {
        stack.service.metric("ratelimit_service_config_load_error") == 1
    });
    assert!(stack.service.process.log_text().contains("config error, unknown key 'bogus'"));
    assert_eq!(stack.statuses(1, &[("x-user", "bob")]), vec![200]);
    assert_eq!(stack.statuses(1, &alice), vec![429]);
}

#[test]
fn redis_down_answers_an_error_fast_then_recovers() {
    let mut stack = Stack::start(EDGE, &[]);
    assert_eq!(stack.statuses(1, &[("x-user", "dave")]), vec![200]);
    stack.redis.stop();
    let started = std::time::Instant::now();
    // failure_mode_deny: Envoy answers 500 when the service answers an error.
    assert_eq!(stack.statuses(1, &[("x-user", "dave")]), vec![500]);
    assert!(started.elapsed() < std::time::Duration::from_secs(3), "{:?}", started.elapsed());
    assert!(stack.service.metric("ratelimit_service_should_rate_limit_redis_error") >= 1);
    // Health stays up: the service is fine, Redis is not.
    assert_eq!(harness::get(stack.service.http_port, "/healthcheck", &[]).status, 200);
    stack.redis.restart();
    harness::wait_for("the service to reconnect", || {
        stack.get(&[("x-user", "erin")]).status == 200
    });
    // Graceful shutdown: SIGTERM, drained, exit 0.
    assert_eq!(stack.service.process.terminate(std::time::Duration::from_secs(10)), Some(0));
}

/// Redis Cluster (3 masters): the descriptors of a request live in different slots, so they
/// are decided by one `RL.ALL` per slot, in order; when a later slot refuses, what the
/// earlier ones took is given back — a refused request still keeps no permit.
#[test]
fn on_a_cluster_a_refused_request_keeps_no_permit_across_slots() {
    let masters: Vec<common::Server> = (0..3).map(|_| common::cluster_node()).collect();
    let addrs: Vec<String> = masters.iter().map(common::Server::addr).collect();
    let mut create = vec!["--cluster".to_string(), "create".to_string()];
    create.extend(addrs.iter().cloned());
    create.extend(["--cluster-replicas", "0", "--cluster-yes"].map(String::from));
    let out = std::process::Command::new(common::cli_bin()).args(&create).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    harness::wait_for("cluster_state:ok on every node", || {
        masters.iter().all(|m| {
            let info: String =
                redis::cmd("CLUSTER").arg("INFO").query(&mut m.conn()).unwrap_or_default();
            info.contains("cluster_state:ok")
        })
    });
    let slot = |key: &str| -> i64 {
        redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query(&mut masters[0].conn()).unwrap()
    };
    assert_ne!(slot("edge_user_carol_"), slot("edge_tenant_acme_plan_gold_"));
    let dir = &masters[0].dir;
    let service = harness::start_service_with(
        dir,
        EDGE,
        &[("REDIS_TYPE", "CLUSTER"), ("REDIS_SOCKET_TYPE", "tcp"), ("REDIS_URL", &addrs.join(","))],
    );
    let envoy = harness::start_envoy(dir, &service, true);
    let statuses = |n: usize, headers: &[(&str, &str)]| -> Vec<u16> {
        (0..n).map(|_| harness::get(envoy.port, "/", headers).status).collect()
    };
    let both = [("x-user", "carol"), ("x-tenant", "acme"), ("x-plan", "gold")];
    assert_eq!(statuses(4, &both), vec![200, 200, 429, 429], "{}", service.process.log_text());
    // carol's own limit (3) lost nothing to the two refused requests.
    assert_eq!(statuses(2, &[("x-user", "carol")]), vec![200, 429]);
    // A hash tag in the descriptor value keeps keys together: still exact.
    assert_eq!(statuses(4, &[("x-user", "{t}a")]), vec![200, 200, 200, 429]);
}

/// The YAML block after `<!-- tested: NAME -->` in docs/envoy.md.
fn doc_block(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/envoy.md");
    let text = std::fs::read_to_string(path).unwrap();
    let marker = format!("<!-- tested: {name} -->");
    let after = &text[text.find(&marker).unwrap_or_else(|| panic!("no {marker}"))..];
    let start = after.find("```yaml\n").unwrap() + "```yaml\n".len();
    let end = after[start..].find("```").unwrap();
    after[start..start + end].to_string()
}

/// docs/envoy.md's config file and Envoy config, run as written (free ports in place of
/// theirs): a user's sixth request in a minute is refused.
#[test]
fn the_documented_configs_run() {
    let redis = common::Server::start();
    let service = harness::start_service(&redis.dir, &redis.sock, &doc_block("docs-config"), &[]);
    let (port, admin) = (harness::free_port(), harness::free_port());
    let config = doc_block("envoy.yaml")
        .replace("port_value: 10000", &format!("port_value: {port}"))
        .replace("port_value: 9901", &format!("port_value: {admin}"))
        .replace("port_value: 8081", &format!("port_value: {}", service.grpc_port))
        .replace("port_value: 8000", &format!("port_value: {}", service.http_port));
    let envoy = harness::run_envoy(&redis.dir, &config, port, admin);
    // The backend (the service's own HTTP port) answers 404 for "/": passed through.
    let answers: Vec<harness::Answer> =
        (0..7).map(|_| harness::get(envoy.port, "/", &[("x-user", "alice")])).collect();
    let statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
    assert_eq!(statuses, vec![404, 404, 404, 404, 404, 429, 429], "{}", service.process.log_text());
    assert_eq!(answers[0].headers.get("x-ratelimit-remaining").map(String::as_str), Some("4"));
    assert_eq!(answers[6].headers.get("x-ratelimit-remaining").map(String::as_str), Some("0"));
}

#[test]
fn a_bad_setting_or_config_stops_the_service_at_start_naming_it() {
    let dir = tempdir();
    for (vars, expected) in [
        (vec![("REDIS_TIMEOUT", "10")], "REDIS_TIMEOUT=\"10\": not a duration"),
        (vec![("REDIS_TYPE", "ring")], "REDIS_TYPE=\"ring\": use SINGLE, CLUSTER or SENTINEL"),
        (vec![("GRPC_PORT", "http")], "GRPC_PORT=\"http\": not a port"),
        (vec![("USE_PROMETHEUS", "yes")], "USE_PROMETHEUS=\"yes\": not a boolean"),
        (
            vec![("REDIS_TLS", "true"), ("REDIS_TLS_CACERT", "/nonexistent/ca.pem")],
            "REDIS_TLS_CACERT=\"/nonexistent/ca.pem\"",
        ),
        (
            vec![("RUNTIME_ROOT", dir.to_str().unwrap()), ("RUNTIME_SUBDIRECTORY", "rl")],
            "config error, unknown key 'bogus'",
        ),
    ] {
        let out = std::process::Command::new(harness::service_bin())
            .arg("envoy")
            .env_clear()
            .envs(vars.iter().copied())
            .env("PORT", harness::free_port().to_string())
            .env(
                "GRPC_PORT",
                vars.iter()
                    .find(|(k, _)| *k == "GRPC_PORT")
                    .map_or(harness::free_port().to_string(), |(_, v)| v.to_string()),
            )
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{vars:?}: {stderr}");
        assert!(stderr.contains(expected), "{vars:?}: {stderr}");
    }
}

fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("envoy-settings-{}", std::process::id()));
    let config = dir.join("rl").join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("bad.yaml"), "domain: edge\nbogus: 1\n").unwrap();
    dir
}

/// A stalled Redis: the service gives up after `REDIS_TIMEOUT` (Envoy answers 500), and the
/// call Redis runs after the stall carries a passed `DEADLINE`, so it counts nothing.
#[test]
fn a_call_redis_runs_after_the_timeout_counts_nothing() {
    let stack = Stack::start(EDGE, &[("REDIS_TIMEOUT", "300ms")]);
    let frank = [("x-user", "frank")];
    assert_eq!(stack.statuses(1, &frank), vec![200]);
    let mut stalled = stack.redis.conn();
    let stall = std::thread::spawn(move || {
        let _: redis::RedisResult<()> =
            redis::cmd("DEBUG").arg("SLEEP").arg("1.5").query(&mut stalled);
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(stack.statuses(1, &frank), vec![500]);
    stall.join().unwrap();
    // Only the first request counted: one more would leave 1 of 3.
    let mut con = stack.redis.conn();
    assert_eq!(ints(&mut con, &["RL.PEEK", "edge_user_frank_"])[..3], [1, 3, 1]);
    assert_eq!(stack.statuses(1, &frank), vec![200]);
}

/// `quota_mode` (envoyproxy's): a quota descriptor over its limit refuses the request only
/// when every quota descriptor of the request is over; then nothing is kept (what the call
/// took is given back).
#[test]
fn quota_mode_refuses_only_when_every_quota_is_over() {
    let config = r#"
domain: edge
descriptors:
  - key: user
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: path
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: vip
    rate_limit: {unit: hour, requests_per_unit: 10}
"#;
    let stack = Stack::start(config, &[]);
    let all = [("x-user", "q"), ("x-path", "/q"), ("x-vip", "v")];
    assert_eq!(stack.statuses(4, &all), vec![200, 200, 200, 429], "{}", stack.logs());
    let mut con = stack.redis.conn();
    // vip counted the three admitted requests only (one more would leave 6 of 10).
    assert_eq!(ints(&mut con, &["RL.PEEK", "edge_vip_v_"])[..3], [1, 10, 6]);
    assert_eq!(ints(&mut con, &["RL.PEEK", "edge_path_/q_"])[..3], [0, 3, 0]);
}

/// `RUNTIME_WATCH_ROOT=true` (the default) with the root a symlink swapped to a new tree, as
/// runtime deployments do (`current -> v2`): the new tree's config is loaded.
#[test]
fn a_swapped_runtime_root_is_reloaded() {
    let redis = common::Server::start();
    let base = redis.dir.join("runtime_data");
    let tree = |name: &str, limit: u32| {
        let config = base.join(name).join("ratelimit").join("config");
        std::fs::create_dir_all(&config).unwrap();
        let text = EDGE.replace("requests_per_unit: 3", &format!("requests_per_unit: {limit}"));
        std::fs::write(config.join("config.yaml"), text).unwrap();
    };
    tree("v1", 3);
    let current = base.join("current");
    std::os::unix::fs::symlink(base.join("v1"), &current).unwrap();
    let sock = redis.sock.display().to_string();
    let service = harness::start_service_with(
        &redis.dir,
        EDGE,
        &[
            ("REDIS_SOCKET_TYPE", "unix"),
            ("REDIS_URL", &sock),
            ("RUNTIME_ROOT", current.to_str().unwrap()),
            ("RUNTIME_WATCH_ROOT", "true"),
        ],
    );
    let json = || harness::get(service.http_port, "/json", &[]).body;
    assert!(json().contains("\"requests_per_unit\":3"), "{}", json());
    tree("v2", 7);
    let swap = base.join("current.new");
    std::os::unix::fs::symlink(base.join("v2"), &swap).unwrap();
    std::fs::rename(&swap, &current).unwrap();
    harness::wait_for("the swapped tree's config", || json().contains("\"requests_per_unit\":7"));
    // And a change inside the new tree is seen too.
    tree("v2", 9);
    harness::wait_for("a change in the new tree", || json().contains("\"requests_per_unit\":9"));
}

/// gRPC health (`grpc.health.v1.Health`, service `ratelimit`), as Envoy's active health
/// check of the rate-limit cluster sees it.
#[test]
fn envoy_health_checks_the_service_over_grpc() {
    let redis = common::Server::start();
    let service = harness::start_service(&redis.dir, &redis.sock, EDGE, &[]);
    let admin = harness::free_port();
    let grpc = service.grpc_port;
    let config = format!(
        r#"
admin:
  address: {{socket_address: {{address: 127.0.0.1, port_value: {admin}}}}}
static_resources:
  clusters:
  - name: ratelimit
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{http2_protocol_options: {{}}}}
    health_checks:
    - timeout: 1s
      interval: 0.2s
      unhealthy_threshold: 1
      healthy_threshold: 1
      grpc_health_check: {{service_name: ratelimit}}
    load_assignment:
      cluster_name: ratelimit
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {grpc}}}}}}}}}]}}]
"#
    );
    let _envoy = harness::run_envoy(&redis.dir, &config, admin, admin);
    let clusters = || harness::get(admin, "/clusters", &[]).body;
    let healthy = format!("ratelimit::127.0.0.1:{grpc}::health_flags::healthy");
    harness::wait_for("Envoy's gRPC health check to pass", || clusters().contains(&healthy));
}

const API: &str = r#"
domain: api
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: burst
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: seat
    rate_limit: {unit: minute, requests_per_unit: 3}
"#;

/// A `RateLimitRequest` in proto3 JSON: `(key, value, hits_addend)` per descriptor.
fn json_request(descriptors: &[(&str, &str, Option<u64>)]) -> String {
    let descriptors: Vec<String> = descriptors
        .iter()
        .map(|(k, v, hits)| {
            let hits = hits.map_or(String::new(), |h| format!(r#", "hitsAddend": "{h}""#));
            format!(r#"{{"entries": [{{"key": "{k}", "value": "{v}"}}]{hits}}}"#)
        })
        .collect();
    format!(r#"{{"domain": "api", "descriptors": [{}]}}"#, descriptors.join(", "))
}

/// Waits, if need be, until a minute has at least 15 s left (tests whose minute windows must
/// not end mid-test).
fn wait_for_a_fresh_minute() {
    let into = common::unix_ms().rem_euclid(60_000);
    if into > 45_000 {
        std::thread::sleep(std::time::Duration::from_millis((60_000 - into + 50) as u64));
    }
}

/// A Redis and the service on it, with [`API`] and these settings.
fn api_service(extra: &[(&str, &str)]) -> (common::Server, harness::Service) {
    let redis = common::Server::start();
    let service = harness::start_service(&redis.dir, &redis.sock, API, extra);
    (redis, service)
}

fn ask(service: &harness::Service, descriptors: &[(&str, &str, Option<u64>)]) -> (u16, String) {
    harness::post(service.http_port, "/json", &json_request(descriptors))
}

/// `POST /json`, envoyproxy's HTTP API: a request in proto3 JSON, the answer in proto3 JSON,
/// 200 then 429; a body that does not parse, or a request the service refuses, is a 400.
#[test]
fn post_json_answers_in_proto3_json_200_then_429() {
    let (_redis, service) = api_service(&[]);
    let user = [("user", "ann", None)];
    let (status, body) = ask(&service, &user);
    assert_eq!(status, 200, "{body}");
    assert!(body.starts_with(r#"{"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"requestsPerUnit":10,"unit":"HOUR"},"durationUntilReset":""#), "{body}");
    assert!(body.contains(r#""limitRemaining":9"#), "{body}");
    let (status, body) = ask(&service, &[("user", "ann", Some(9))]);
    assert_eq!(status, 200, "{body}");
    let (status, body) = ask(&service, &user);
    assert_eq!(status, 429, "{body}");
    assert!(body.starts_with(r#"{"overallCode":"OVER_LIMIT""#), "{body}");
    for bad in ["{", r#"{"domian": "api"}"#, r#"{"domain": "", "descriptors": []}"#] {
        assert_eq!(harness::post(service.http_port, "/json", bad).0, 400, "{bad}");
    }
    // GET /json still shows the config in force.
    assert!(harness::get(service.http_port, "/json", &[]).body.contains("\"domain\":\"api\""));
}

/// The same descriptor twice with one permit left: the first alone would pass and says so,
/// the second is over (envoyproxy's [OK, OVER_LIMIT]); the request is refused and takes
/// nothing. `hits_addend` above what is left: remaining 0, the reset at the window's end.
#[test]
fn per_descriptor_statuses_and_hits_above_what_is_left() {
    let (redis, service) = api_service(&[]);
    wait_for_a_fresh_minute();
    assert_eq!(ask(&service, &[("seat", "s1", Some(2))]).0, 200);
    let twice = [("seat", "s1", None), ("seat", "s1", None)];
    let (status, body) = ask(&service, &twice);
    assert_eq!(status, 429, "{body}");
    assert!(
        body.contains(r#""statuses":[{"code":"OK","currentLimit":{"requestsPerUnit":3,"unit":"MINUTE"},"durationUntilReset":"#),
        "{body}"
    );
    assert!(body.contains(r#"},{"code":"OVER_LIMIT","currentLimit""#), "{body}");
    assert!(!body.contains("limitRemaining"), "the key's hits crossed its limit: {body}");
    // The key's 2 hits crossed its limit (1 left): counted in full, as theirs counts them.
    let mut con = redis.conn();
    assert_eq!(ints(&mut con, &["RL.PEEK", "api_seat_s1_"])[..3], [0, 3, 0]);
    let used = common::stored_state(&mut con, "api_seat_s1_");
    assert!(used.iter().any(|(k, v)| k == "used" && v == "4"), "{used:?}");
    // 1 left, 5 asked: over, nothing left, reset at the minute's end (fixed windows are
    // aligned to the clock, as theirs).
    let before = common::unix_ms();
    let (status, body) = ask(&service, &[("seat", "s2", Some(2)), ("user", "x", None)]);
    assert_eq!(status, 200, "{body}");
    let (status, body) = ask(&service, &[("seat", "s2", Some(5))]);
    let after = common::unix_ms();
    assert_eq!(status, 429, "{body}");
    assert!(!body.contains("limitRemaining"), "remaining 0 is left out: {body}");
    let reset: i64 = body
        .split(r#""durationUntilReset":""#)
        .nth(1)
        .and_then(|rest| rest.split('s').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{body}"));
    let window_end = |ms: i64| 60 - (ms / 1000).rem_euclid(60);
    assert!((window_end(after)..=window_end(before)).contains(&reset), "{reset} {body}");
}

/// The quota pattern Envoy documents: check with `hits_addend` 0, charge after the response
/// (`apply_on_stream_done`). The charge that crosses the limit is counted in full, past it
/// (a debt), so the next check refuses; before, it was refused and the next check passed.
#[test]
fn a_charge_after_the_response_counts_past_the_limit() {
    let (redis, service) = api_service(&[]);
    let check = [("user", "llm", Some(0))];
    assert_eq!(ask(&service, &check).0, 200);
    // The response used 6 tokens, then 7: 13 of 10.
    assert_eq!(ask(&service, &[("user", "llm", Some(6))]).0, 200);
    assert_eq!(ask(&service, &check).0, 200, "4 left");
    let (status, body) = ask(&service, &[("user", "llm", Some(7))]);
    assert_eq!(status, 429, "the charge crosses the limit: {body}");
    let (status, body) = ask(&service, &check);
    assert_eq!(status, 429, "the next check refuses: {body}");
    let mut con = redis.conn();
    let info = common::stored_state(&mut con, "api_user_llm_");
    assert!(info.iter().any(|(k, v)| k == "used" && v == "13"), "{info:?}");
    // A key with no state yet, charged more than its limit: what is left, then the rest.
    let (status, _) = ask(&service, &[("user", "fresh", Some(25))]);
    assert_eq!(status, 429);
    let info = common::stored_state(&mut con, "api_user_fresh_");
    assert!(info.iter().any(|(k, v)| k == "used" && v == "25"), "{info:?}");
    // A request refused with nothing left counts nothing.
    assert_eq!(ask(&service, &[("user", "fresh", Some(3))]).0, 429);
    let info = common::stored_state(&mut con, "api_user_fresh_");
    assert!(info.iter().any(|(k, v)| k == "used" && v == "25"), "{info:?}");
}

/// `REDIS_PERSECOND=true`: per-second limits live on their own Redis; a request refused by
/// one Redis keeps nothing on the other.
#[test]
fn per_second_limits_live_on_the_per_second_redis() {
    let main = common::Server::start();
    let second = common::Server::start();
    let second_sock = second.sock.display().to_string();
    let service = harness::start_service(
        &main.dir,
        &main.sock,
        API,
        &[
            ("REDIS_PERSECOND", "true"),
            ("REDIS_PERSECOND_SOCKET_TYPE", "unix"),
            ("REDIS_PERSECOND_URL", &second_sock),
        ],
    );
    let both = [("user", "u", None), ("burst", "b", None)];
    assert_eq!(ask(&service, &both).0, 200);
    let exists = |server: &common::Server, key: &str| -> bool {
        redis::cmd("EXISTS").arg(key).query::<i64>(&mut server.conn()).unwrap() == 1
    };
    assert!(exists(&main, "api_user_u_") && !exists(&main, "api_burst_b_"));
    assert!(exists(&second, "api_burst_b_") && !exists(&second, "api_user_u_"));
    // The per-second limit refuses (2 per second): the hour's permit is given back.
    let statuses: Vec<u16> = (0..3).map(|_| ask(&service, &both).0).collect();
    let mut con = main.conn();
    let left = ints(&mut con, &["RL.PEEK", "api_user_u_"])[2];
    let admitted = 1 + statuses.iter().filter(|&&s| s == 200).count() as i64;
    assert!(statuses.contains(&429), "{statuses:?}");
    assert_eq!(left, 10 - admitted - 1, "PEEK answers as one more request: {statuses:?}");
}

/// `LOCAL_CACHE_SIZE_IN_BYTES`: a key known over its limit is refused without asking Redis
/// until its window ends, with envoyproxy's statistics.
#[test]
fn the_local_cache_refuses_known_keys_without_redis() {
    let (redis, service) = api_service(&[("LOCAL_CACHE_SIZE_IN_BYTES", "1000")]);
    let seat = [("seat", "c", Some(3))];
    wait_for_a_fresh_minute();
    assert_eq!(ask(&service, &seat).0, 200);
    let one = [("seat", "c", None)];
    assert_eq!(ask(&service, &one).0, 429, "a miss: Redis refuses, the key is cached");
    // Redis forgets the key; the cache still knows it is over until the minute ends.
    let _: i64 = redis::cmd("DEL").arg("api_seat_c_").query(&mut redis.conn()).unwrap();
    let (status, body) = ask(&service, &one);
    let metrics = service.metrics();
    assert_eq!(status, 429, "{body}");
    assert!(!body.contains("limitRemaining"), "{body}");
    assert_eq!(service.metric("ratelimit_localcache_hitCount"), 1, "{metrics}");
    assert_eq!(service.metric("ratelimit_localcache_missCount"), 2, "{metrics}");
    assert_eq!(
        service.metric("ratelimit_service_rate_limit_api_seat_over_limit_with_local_cache"),
        1,
        "{metrics}"
    );
    let series = r#"ratelimit_service_rate_limit_over_limit{domain="api",key1="seat",key2=""}"#;
    assert_eq!(service.metric(series), 2);
}

/// `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false` given explicitly: a refused request still
/// counts against its other descriptors (envoyproxy's counting); unset, it counts nothing.
#[test]
fn an_explicit_false_stop_cache_key_increment_counts_like_envoyproxy() {
    for (setting, left_after) in [(Some("false"), 10 - 4), (None, 10)] {
        let extra: Vec<(&str, &str)> =
            setting.map(|v| ("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", v)).into_iter().collect();
        let (redis, service) = api_service(&extra);
        wait_for_a_fresh_minute();
        assert_eq!(ask(&service, &[("seat", "full", Some(3))]).0, 200);
        let both = [("user", "v", None), ("seat", "full", None)];
        for _ in 0..4 {
            let (status, body) = ask(&service, &both);
            assert_eq!(status, 429, "{body}");
        }
        let mut con = redis.conn();
        let peek = ints(&mut con, &["RL.PEEK", "api_user_v_"]);
        // PEEK answers as one more request (what is left minus one); nil: never counted.
        let left = peek.get(2).map_or(10, |remaining| remaining + 1);
        assert_eq!(left, left_after, "{setting:?}: {peek:?}");
    }
}

/// `RESPONSE_DYNAMIC_METADATA=true`: the answer carries the request (envoyproxy's fields).
#[test]
fn response_dynamic_metadata_carries_the_request() {
    let (redis, service) = api_service(&[("RESPONSE_DYNAMIC_METADATA", "true")]);
    let (status, body) = ask(&service, &[("user", "m", Some(2))]);
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(r#""dynamicMetadata":{"descriptors":[{"entries":["user=m"],"hitsAddend":2.0}],"domain":"api","quotaModeEnabled":false}"#),
        "{body}"
    );
    let plain = harness::start_service(&redis.dir.join("plain"), &redis.sock, API, &[]);
    assert!(!ask(&plain, &[("user", "m", None)]).1.contains("dynamicMetadata"));
}

/// `POST /json` for each user at once (a thread each): the answers, in the users' order.
fn ask_at_once(service: &harness::Service, users: &[&str]) -> Vec<(u16, String)> {
    let threads: Vec<_> = users
        .iter()
        .map(|user| {
            let (port, request) = (service.http_port, json_request(&[("user", user, None)]));
            std::thread::spawn(move || harness::post(port, "/json", &request))
        })
        .collect();
    threads.into_iter().map(|thread| thread.join().expect("a request")).collect()
}

/// How many of Redis's clients last ran `command` (`CLIENT LIST`).
fn connections_running(redis: &common::Server, command: &str) -> usize {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut redis.conn()).expect("LIST");
    list.lines().filter(|l| l.contains(&format!(" cmd={command} "))).count()
}

/// Waits for the service's warm-up: `n` connections opened (each has run a `PING`).
fn wait_for_warm_up(redis: &common::Server, n: usize) {
    common::wait_for(&format!("{n} connections warmed up"), || {
        connections_running(redis, "ping") == n
    });
}

/// Redis's reads (`INFO stats total_reads_processed`) while `during` runs, less the INFO
/// call that reads the count after it.
fn redis_reads(redis: &common::Server, during: impl FnOnce()) -> i64 {
    let mut con = redis.conn();
    let reads = |con: &mut common::Connection| -> i64 {
        common::info_field(con, "stats", "total_reads_processed").parse().expect("a count")
    };
    let before = reads(&mut con);
    during();
    reads(&mut con) - before - 1
}

/// `REDIS_PIPELINE_WINDOW`: calls made within the window wait for its end and reach Redis
/// together, in one write — requests sent 40 ms apart (each alone, one read each, without a
/// window) are answered after the last is sent, and Redis reads them at most twice.
#[test]
fn a_pipeline_window_writes_the_calls_made_within_it_together() {
    let (redis, service) = api_service(&[
        ("REDIS_PIPELINE_WINDOW", "1500ms"),
        ("REDIS_TIMEOUT", "10s"),
        ("REDIS_POOL_SIZE", "1"),
    ]);
    wait_for_warm_up(&redis, 1);
    let users = ["u1", "u2", "u3", "u4", "u5", "u6"];
    let mut last_sent = None;
    let mut first_answer = None;
    let reads = redis_reads(&redis, || {
        let (sent, answers) = std::sync::mpsc::channel();
        let threads: Vec<_> = users
            .iter()
            .map(|user| {
                let port = service.http_port;
                let request = json_request(&[("user", user, None)]);
                let answered = sent.clone();
                let thread = std::thread::spawn(move || {
                    let (status, body) = harness::post(port, "/json", &request);
                    answered.send(std::time::Instant::now()).expect("send");
                    (status, body)
                });
                std::thread::sleep(std::time::Duration::from_millis(40));
                thread
            })
            .collect();
        last_sent = Some(std::time::Instant::now());
        for thread in threads {
            let (status, body) = thread.join().expect("a request");
            assert_eq!(status, 200, "{body}");
            assert!(body.contains(r#""limitRemaining":9"#), "{body}");
        }
        first_answer = answers.try_iter().min();
    });
    assert!(first_answer > last_sent, "a call was answered before the window's end");
    assert!((1..=2).contains(&reads), "{} requests in {reads} reads", users.len());
}

/// `REDIS_PIPELINE_LIMIT`: a batch of that many calls is written at once, without waiting for
/// the window's end (a minute here: `harness::post` gives up after 10 s), in one write.
#[test]
fn a_pipeline_limit_writes_a_full_batch_at_once() {
    let (redis, service) = api_service(&[
        ("REDIS_PIPELINE_WINDOW", "1m"),
        ("REDIS_PIPELINE_LIMIT", "3"),
        ("REDIS_TIMEOUT", "2m"),
    ]);
    wait_for_warm_up(&redis, 10);
    let reads = redis_reads(&redis, || {
        for (status, body) in ask_at_once(&service, &["u1", "u2", "u3"]) {
            assert_eq!(status, 200, "{body}");
        }
    });
    assert_eq!(reads, 1, "3 requests in {reads} reads");
}

/// By default (no window) calls fill the first connection rather than taking the pool's in
/// turn, so concurrent calls share its writes: of `REDIS_POOL_SIZE=4`, one connection is
/// opened and runs every call; with a limit the others are opened, to take calls past it.
#[test]
fn calls_fill_one_connection_unless_a_limit_spreads_them() {
    let (redis, service) = api_service(&[("REDIS_POOL_SIZE", "4")]);
    wait_for_warm_up(&redis, 1);
    let users: Vec<String> = (0..8).map(|i| format!("u{i}")).collect();
    let users: Vec<&str> = users.iter().map(String::as_str).collect();
    for (status, body) in ask_at_once(&service, &users) {
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(connections_running(&redis, "rl.all"), 1);
    assert_eq!(connections_running(&redis, "ping"), 0);
    let (redis, _service) = api_service(&[("REDIS_POOL_SIZE", "4"), ("REDIS_PIPELINE_LIMIT", "2")]);
    wait_for_warm_up(&redis, 4);
}

/// A pipelined batch whose Redis is down answers each of its calls with an error (no call
/// hangs), and the next batch reconnects.
#[test]
fn a_pipelined_batch_to_a_redis_down_answers_errors_then_recovers() {
    let (mut redis, service) =
        api_service(&[("REDIS_PIPELINE_WINDOW", "20ms"), ("REDIS_PIPELINE_LIMIT", "2")]);
    wait_for_warm_up(&redis, 10);
    assert_eq!(ask(&service, &[("user", "ann", None)]).0, 200);
    redis.stop();
    for (status, body) in ask_at_once(&service, &["u1", "u2", "u3"]) {
        assert_ne!(status, 200, "{body}");
    }
    redis.restart();
    harness::wait_for("the service to reconnect", || {
        ask(&service, &[("user", "bob", None)]).0 == 200
    });
}
