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
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: tenant
    value: acme
    descriptors:
      - key: plan
        value: gold
        rate_limit: {unit: minute, requests_per_unit: 2}
"#;

#[test]
fn a_fixed_window_admits_its_limit_per_user_then_429() {
    let stack = Stack::start(EDGE, &[("LIMIT_RESPONSE_HEADERS_ENABLED", "true")]);
    let alice = [("x-user", "alice")];
    let first = stack.get(&alice);
    assert_eq!(first.status, 200, "{first:?}\n{}", stack.logs());
    assert_eq!(first.headers.get("ratelimit-limit").map(String::as_str), Some("3"));
    assert_eq!(first.headers.get("ratelimit-remaining").map(String::as_str), Some("2"));
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
