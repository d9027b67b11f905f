//! Policies on a real server: `RL.POLICY SET/GET/DEL/LIST/STATS/RESETSTAT`, `RL.HIT` judging
//! exactly as the direct command, overrides, shadow mode, an algorithm change, errors, the
//! bound, INFO, key positions.

mod common;
use common::*;

use std::collections::HashMap;

/// A flat field/value reply (RESP2 array or RESP3 map) as a map of text to text.
fn fields(v: Value) -> HashMap<String, String> {
    let items = match v {
        Value::Array(items) => items,
        Value::Map(pairs) => pairs.into_iter().flat_map(|(k, v)| [k, v]).collect(),
        other => panic!("expected fields, got {other:?}"),
    };
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Int(i) => i.to_string(),
        Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    };
    items.chunks(2).map(|p| (text(&p[0]), text(&p[1]))).collect()
}

fn ok(con: &mut Connection, command: &str) {
    let words: Vec<&str> = command.split_whitespace().collect();
    let reply = run(con, &words).unwrap_or_else(|e| panic!("{command}: {e}"));
    assert_eq!(reply, Value::Okay, "{command}");
}

fn get(con: &mut Connection, command: &str) -> Value {
    let words: Vec<&str> = command.split_whitespace().collect();
    run(con, &words).unwrap_or_else(|e| panic!("{command}: {e}"))
}

fn err(con: &mut Connection, command: &str) -> String {
    let words: Vec<&[u8]> = command.split_whitespace().map(str::as_bytes).collect();
    error_text(con, &words)
}

#[test]
fn hit_judges_exactly_as_the_direct_command() {
    let server = Server::start();
    let mut c = server.conn();
    ok(&mut c, "RL.POLICY SET free TOKEN 5 1 1s BAN 2s");
    let t = 1_800_000_000_000i64;
    for (i, cost) in ["1", "2", "3", "0", "1", "5", "1"].iter().enumerate() {
        let at = (t + 100 * i as i64).to_string();
        let hit = ints(&mut c, &["RL.HIT", "free", "a", "COST", cost, "AT", &at]);
        let direct =
            ints(&mut c, &["RL.TOKEN", "b", "5", "1", "1s", "BAN", "2s", "COST", cost, "AT", &at]);
        assert_eq!(hit, direct, "call {i}");
        assert_eq!(stored_state(&mut c, "a"), stored_state(&mut c, "b"), "call {i}");
        assert_eq!(pexpiretime(&mut c, "a"), pexpiretime(&mut c, "b"), "call {i}");
    }
    // DRYRUN changes nothing, as on the direct command.
    let before = stored_state(&mut c, "a");
    let at = (t + 5000).to_string();
    ints(&mut c, &["RL.HIT", "free", "a", "DRYRUN", "AT", &at]);
    assert_eq!(stored_state(&mut c, "a"), before);
    let stats = fields(get(&mut c, "RL.POLICY STATS free"));
    assert_eq!(stats["calls"], "8");
    let admitted: i64 = stats["admitted"].parse().unwrap();
    let limited: i64 = stats["limited"].parse().unwrap();
    assert_eq!(admitted + limited, 8);
    assert!(limited >= 1, "{stats:?}");
    for name in ["shadow_limited", "near_limit"] {
        assert!(stats.contains_key(name), "{name}");
    }
}

#[test]
fn set_get_del_list_and_overrides() {
    let server = Server::start();
    let mut c = server.conn();
    assert_eq!(get(&mut c, "RL.POLICY LIST"), Value::Array(vec![]));
    assert_eq!(get(&mut c, "RL.POLICY GET free"), Value::Nil);
    ok(&mut c, "RL.POLICY SET free PERIOD 3 1m ALIGN");
    ok(&mut c, "RL.POLICY SET pro SLIDE 100 1m BUCKETS 6 SHADOW");
    ok(&mut c, "RL.POLICY SET free TOKEN 1000 100 1s FOR tenant:7");
    let free = fields(get(&mut c, "RL.POLICY GET free"));
    assert_eq!(free["algorithm"], "period");
    assert_eq!(free["limit"], "3");
    assert_eq!(free["period_ms"], "60000");
    assert_eq!(free["align"], "1");
    assert_eq!(free["ban_ms"], "0");
    assert_eq!(free["shadow"], "0");
    let pro = fields(get(&mut c, "RL.POLICY GET pro"));
    assert_eq!((pro["algorithm"].as_str(), pro["buckets"].as_str()), ("slide", "6"));
    assert_eq!(pro["shadow"], "1");
    let vip = fields(get(&mut c, "RL.POLICY GET free FOR tenant:7"));
    assert_eq!((vip["algorithm"].as_str(), vip["capacity"].as_str()), ("token", "1000"));
    assert_eq!(get(&mut c, "RL.POLICY GET free FOR tenant:8"), Value::Nil);
    let names: Vec<String> = redis::cmd("RL.POLICY").arg("LIST").query(&mut c).unwrap();
    assert_eq!(names, ["free", "pro"]);
    // The override judges its key; other keys get the policy.
    assert_eq!(line(&mut c, "RL.HIT free tenant:7 COST 500")[0], 1);
    for _ in 0..3 {
        assert_eq!(line(&mut c, "RL.HIT free tenant:8")[0], 1);
    }
    assert_eq!(line(&mut c, "RL.HIT free tenant:8")[0], 0);
    // A SET replaces the whole definition: SHADOW not repeated is dropped.
    ok(&mut c, "RL.POLICY SET pro SLIDE 100 1m");
    assert_eq!(fields(get(&mut c, "RL.POLICY GET pro"))["shadow"], "0");
    assert_eq!(get(&mut c, "RL.POLICY DEL free FOR tenant:7"), Value::Int(1));
    assert_eq!(get(&mut c, "RL.POLICY DEL free FOR tenant:7"), Value::Int(0));
    ok(&mut c, "RL.POLICY SET free PERIOD 3 1m FOR tenant:9");
    assert_eq!(get(&mut c, "RL.POLICY DEL free"), Value::Int(1));
    assert_eq!(get(&mut c, "RL.POLICY DEL free"), Value::Int(0));
    ok(&mut c, "RL.POLICY SET free PERIOD 3 1m");
    assert_eq!(get(&mut c, "RL.POLICY GET free FOR tenant:9"), Value::Nil, "DEL took overrides");
    // RESP3: maps.
    let mut c3 = server.conn_resp3();
    assert!(matches!(get(&mut c3, "RL.POLICY GET free"), Value::Map(_)));
    assert!(matches!(get(&mut c3, "RL.POLICY STATS free"), Value::Map(_)));
}

#[test]
fn shadow_answers_allowed_and_changes_nothing() {
    let server = Server::start();
    let mut c = server.conn();
    ok(&mut c, "RL.POLICY SET strict PERIOD 2 1m BAN 1h SHADOW");
    let t = 1_800_000_000_000i64;
    let at = |i: i64| (t + i).to_string();
    assert_eq!(ints(&mut c, &["RL.HIT", "strict", "k", "AT", &at(0)]), [1, 2, 1, 0, 60_000]);
    assert_eq!(ints(&mut c, &["RL.HIT", "strict", "k", "AT", &at(1)]), [1, 2, 0, 0, 59_999]);
    let state = stored_state(&mut c, "k");
    // Would-be refusals: allowed, the true remaining and retry, nothing stored, no ban.
    for i in 2..5 {
        let reply = ints(&mut c, &["RL.HIT", "strict", "k", "AT", &at(i)]);
        assert_eq!(reply, [1, 2, 0, 60_000 - i, 60_000 - i], "call {i}");
    }
    assert_eq!(stored_state(&mut c, "k"), state);
    let stats = fields(get(&mut c, "RL.POLICY STATS strict"));
    assert_eq!(
        (&stats["calls"][..], &stats["admitted"][..], &stats["shadow_limited"][..]),
        ("5", "2", "3")
    );
    assert_eq!((&stats["limited"][..], &stats["near_limit"][..]), ("0", "1"));
    // Removing SHADOW enforces from the next call, with the ban.
    ok(&mut c, "RL.POLICY SET strict PERIOD 2 1m BAN 1h");
    assert_eq!(ints(&mut c, &["RL.HIT", "strict", "k", "AT", &at(10)])[0], 0);
    let info = fields(get(&mut c, "RL.INFO k"));
    assert!(info.contains_key("banned_until_ms"), "{info:?}");
    ok(&mut c, "RL.POLICY RESETSTAT");
    let stats = fields(get(&mut c, "RL.POLICY STATS strict"));
    assert!(stats.values().all(|v| v == "0"), "{stats:?}");
}

#[test]
fn a_policy_changing_algorithm_starts_its_keys_over() {
    let server = Server::start();
    let mut c = server.conn();
    ok(&mut c, "RL.POLICY SET p TOKEN 2 1 1h");
    line(&mut c, "RL.HIT p k COST 2");
    assert_eq!(line(&mut c, "RL.HIT p k")[0], 0);
    ok(&mut c, "RL.POLICY SET p PERIOD 5 1h");
    assert_eq!(line(&mut c, "RL.HIT p k")[..3], [1, 5, 4], "no WRONGTYPE: a fresh window");
    assert_eq!(fields(get(&mut c, "RL.INFO k"))["algorithm"], "period");
    // The direct command still answers WRONGTYPE for another algorithm.
    assert!(err(&mut c, "RL.TOKEN k 1 1 1s").starts_with("WRONGTYPE"));
    // A key of another type stays WRONGTYPE.
    let _: () = redis::cmd("SET").arg("s").arg("x").query(&mut c).unwrap();
    assert!(err(&mut c, "RL.HIT p s").starts_with("WRONGTYPE"));
}

#[test]
fn bad_input_is_refused_whole_with_a_clear_error() {
    let server = Server::start();
    let mut c = server.conn();
    assert_eq!(err(&mut c, "RL.HIT nope k"), "ERR no such policy 'nope'");
    ok(&mut c, "RL.POLICY SET p TOKEN 5 1 1s");
    for bad in [
        "RL.POLICY SET p TOKEN 5 1",
        "RL.POLICY SET p TOKEN 5 1 1s COST 2",
        "RL.POLICY SET p GCRA 1 1 1",
        "RL.POLICY SET p TOKEN 5 1 1s SHADOW SHADOW",
        "RL.POLICY SET p SLIDE 10 1s BUCKETS 3",
        "RL.POLICY SET p:x TOKEN 5 1 1s",
        "RL.POLICY SET q TOKEN 5 1 1s FOR k",
        "RL.POLICY GET p FOR",
        "RL.POLICY GET p WITH k",
        "RL.POLICY STATS nope",
        "RL.POLICY NOPE",
        "RL.HIT p k COST -1",
        "RL.HIT p k BAN 1s",
        "RL.HIT p k FRESH",
    ] {
        let e = err(&mut c, bad);
        assert!(e.starts_with("ERR"), "{bad}: {e}");
    }
    assert_eq!(fields(get(&mut c, "RL.POLICY GET p"))["capacity"], "5", "unchanged");
    let non_utf8: [&[u8]; 3] = [b"RL.HIT", b"\xff", b"k"];
    assert!(error_text(&mut c, &non_utf8).contains("no such policy"));
    let key: [&[u8]; 3] = [b"RL.HIT", b"p", b"\xff\x00"];
    assert_eq!(cmd(&key).query::<Vec<i64>>(&mut c).unwrap()[0], 1, "keys are binary safe");
    // The bound: policies + overrides.
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("ratelimit.policy-max").arg("2").query(&mut c).unwrap();
    ok(&mut c, "RL.POLICY SET p TOKEN 5 1 1s FOR a");
    assert!(err(&mut c, "RL.POLICY SET q TOKEN 5 1 1s").contains("ratelimit.policy-max"));
    ok(&mut c, "RL.POLICY SET p TOKEN 6 1 1s");
    assert_eq!(info_field(&mut c, "ratelimit_policies", "ratelimit_policy_entries"), "2");
    server.assert_alive();
}

#[test]
fn info_and_command_metadata() {
    let server = Server::start();
    let mut c = server.conn();
    ok(&mut c, "RL.POLICY SET free TOKEN 5 1 1s");
    line(&mut c, "RL.HIT free a");
    let text: String = redis::cmd("INFO").arg("ratelimit_policies").query(&mut c).unwrap();
    assert!(text.contains("ratelimit_policies:1"), "{text}");
    let line_ = text.lines().find(|l| l.starts_with("ratelimit_policy_stats_free:")).expect(&text);
    assert!(line_.contains("calls=1") && line_.contains("admitted=1"), "{line_}");
    assert_eq!(info_field(&mut c, "ratelimit", "ratelimit_hit_calls"), "1");
    // The key is argument 2, the only one.
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("RL.HIT")
        .arg("free")
        .arg("a")
        .arg("COST")
        .arg("1")
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, ["a"]);
    let docs = format!("{:?}", run(&mut c, &["COMMAND", "DOCS", "rl.policy"]).unwrap());
    for sub in ["set", "get", "del", "list", "stats", "resetstat"] {
        assert!(docs.contains(&format!("rl.policy|{sub}")), "{sub}: {docs}");
    }
}

/// Whether the server gives module commands ACL categories (Redis 7.2+, Valkey).
fn has_module_categories(c: &mut Connection) -> bool {
    let info = format!("{:?}", run(c, &["COMMAND", "INFO", "rl.hit"]).unwrap());
    info.contains("@ratelimit")
}

#[test]
fn an_application_user_may_hit_and_read_but_not_change_policies() {
    let server = Server::start();
    let mut admin = server.conn();
    ok(&mut admin, "RL.POLICY SET free TOKEN 5 1 1s");
    // By command name: works on every server, 7.0 included.
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "app", "on", ">pw", "resetkeys", "~api:*", "-@all"])
        .arg(&["+rl.hit", "+rl.policy|get", "+rl.policy|list", "+rl.policy|stats"])
        .query(&mut admin)
        .unwrap();
    let mut users = vec!["app"];
    if has_module_categories(&mut admin) {
        let _: () = redis::cmd("ACL")
            .arg(&["SETUSER", "app2", "on", ">pw", "resetkeys", "~api:*", "-@all", "+@ratelimit"])
            .query(&mut admin)
            .unwrap();
        let _: () = redis::cmd("ACL")
            .arg(&["SETUSER", "ops", "on", ">pw", "resetkeys", "-@all", "+@admin"])
            .query(&mut admin)
            .unwrap();
        let mut ops = server.conn();
        let _: () = redis::cmd("AUTH").arg("ops").arg("pw").query(&mut ops).unwrap();
        ok(&mut ops, "RL.POLICY SET pro TOKEN 50 1 1s");
        assert_eq!(get(&mut ops, "RL.POLICY DEL pro"), Value::Int(1));
        ok(&mut ops, "RL.POLICY RESETSTAT");
        users.push("app2");
    }
    for user in users {
        let mut c = server.conn();
        let _: () = redis::cmd("AUTH").arg(user).arg("pw").query(&mut c).unwrap();
        assert_eq!(line(&mut c, "RL.HIT free api:1")[0], 1, "{user}");
        assert!(err(&mut c, "RL.HIT free other:1").starts_with("NOPERM"), "{user}: key pattern");
        assert!(matches!(get(&mut c, "RL.POLICY GET free"), Value::Array(_)), "{user}");
        get(&mut c, "RL.POLICY LIST");
        get(&mut c, "RL.POLICY STATS free");
        for change in
            ["RL.POLICY SET free TOKEN 500 1 1s", "RL.POLICY DEL free", "RL.POLICY RESETSTAT"]
        {
            assert!(err(&mut c, change).starts_with("NOPERM"), "{user}: {change}");
        }
    }
    assert_eq!(fields(get(&mut admin, "RL.POLICY GET free"))["capacity"], "5");
}

#[test]
fn a_tenant_moves_from_free_to_pro_with_no_deploy() {
    let server = Server::start();
    let mut c = server.conn();
    ok(&mut c, "RL.POLICY SET free PERIOD 3 1d");
    ok(&mut c, "RL.POLICY SET pro PERIOD 100 1d");
    let t = 1_800_000_000_000i64;
    let hit = |c: &mut Connection, policy: &str, i: i64| {
        ints(c, &["RL.HIT", policy, "api:tenant7", "AT", &(t + i).to_string()])
    };
    for i in 0..3 {
        assert_eq!(hit(&mut c, "free", i)[0], 1);
    }
    assert_eq!(hit(&mut c, "free", 3)[0], 0, "free quota used up");
    ok(&mut c, "RL.POLICY SET free PERIOD 100 1d FOR api:tenant7");
    // The pro quota, with today's count carried over: 3 used, 96 left after this call.
    assert_eq!(hit(&mut c, "free", 4)[..3], [1, 100, 96]);
    assert_eq!(hit(&mut c, "pro", 5)[..3], [1, 100, 95], "same key, same window");
    assert_eq!(get(&mut c, "RL.POLICY DEL free FOR api:tenant7"), Value::Int(1));
    assert_eq!(hit(&mut c, "pro", 6)[..3], [1, 100, 94]);
}

#[test]
fn all_takes_a_policy_in_place_of_a_limit() {
    let server = Server::start();
    let mut c = server.conn();
    ok(&mut c, "RL.POLICY SET day PERIOD 3 1d");
    ok(&mut c, "RL.POLICY SET day PERIOD 1 1d FOR {u}:day");
    let t = 1_800_000_000_000i64.to_string();
    let all = |c: &mut Connection, extra: &[&str]| -> Vec<Value> {
        let mut args =
            vec!["RL.ALL", "2", "{u}:s", "{u}:day", "TOKEN", "10", "10", "1s", "POLICY", "day"];
        args.extend_from_slice(extra);
        args.extend(["AT", t.as_str()]);
        redis::cmd(args[0]).arg(&args[1..]).query(c).unwrap()
    };
    // The override (limit 1) binds the key: one admitted, then refused, all or nothing.
    assert_eq!(all(&mut c, &[])[0], Value::Int(1));
    assert_eq!(all(&mut c, &[])[0], Value::Int(0));
    assert_eq!(stored_state(&mut c, "{u}:s"), stored_state(&mut c, "{u}:s"));
    assert_eq!(all(&mut c, &["COST", "0"])[0], Value::Int(1));
    assert_eq!(err(&mut c, "RL.ALL 1 k POLICY nope"), "ERR no such policy 'nope'");
    // Shadow: never refuses in RL.ALL.
    ok(&mut c, "RL.POLICY SET day PERIOD 1 1d SHADOW FOR {u}:day");
    assert_eq!(all(&mut c, &[])[0], Value::Int(1));
}

#[test]
fn hit_waits_in_line_and_never_answers_wrongtype_for_a_changed_algorithm() {
    let server = Server::start();
    let mut c = server.conn();
    ok(&mut c, "RL.POLICY SET q TOKEN 1 1 300ms");
    assert_eq!(line(&mut c, "RL.HIT q k")[0], 1);
    let started = std::time::Instant::now();
    let reply = line(&mut c, "RL.HIT q k WAIT 5s");
    assert_eq!(reply[0], 1, "admitted after waiting");
    assert!(started.elapsed() >= std::time::Duration::from_millis(250), "not before the refill");
    ok(&mut c, "RL.POLICY SET q PERIOD 1 1h");
    assert_eq!(line(&mut c, "RL.HIT q k WAIT 1s")[..3], [1, 1, 0], "a fresh window, no WRONGTYPE");
    let stats = fields(get(&mut c, "RL.POLICY STATS q"));
    assert_eq!((&stats["calls"][..], &stats["admitted"][..]), ("3", "3"), "the wait counted");
}
