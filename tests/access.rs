//! Access control and memory limits: key-pattern ACLs apply to the module's commands through
//! their key specs, and limiting commands are refused with Redis' OOM error at `maxmemory`.

mod common;
use common::*;

const AT: &str = "4000000000000";

#[test]
fn acl_key_patterns_confine_a_tenant() {
    let s = Server::start();
    let mut admin = s.conn();
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "tenant1", "on", ">secret", "resetkeys", "~tenant1:*", "-@all"])
        .arg(&["+rl.token", "+rl.period", "+rl.leaky", "+cl.throttle", "+rl.peek", "+rl.info"])
        .query(&mut admin)
        .unwrap();
    let mut c = s.conn();
    let _: () = redis::cmd("AUTH").arg("tenant1").arg("secret").query(&mut c).unwrap();
    assert_eq!(ints(&mut c, &["RL.TOKEN", "tenant1:api", "5", "1", "1s", "AT", AT])[0], 1);
    let peek: Vec<i64> = redis::cmd("RL.PEEK").arg("tenant1:api").query(&mut c).unwrap();
    assert_eq!(peek.len(), 5);
    for args in [
        vec![&b"RL.TOKEN"[..], b"tenant2:api", b"5", b"1", b"1s"],
        vec![b"CL.THROTTLE", b"tenant2:api", b"5", b"1", b"1"],
        vec![b"RL.PEEK", b"tenant2:api"],
        vec![b"RL.INFO", b"tenant2:api"],
    ] {
        let e = error_text(&mut c, &args);
        assert!(e.starts_with("NOPERM"), "{args:?}: {e}");
    }
    // Other commands are not granted at all.
    assert!(error_text(&mut c, &[b"GET", b"tenant1:api"]).starts_with("NOPERM"));
    let exists: i64 = redis::cmd("EXISTS").arg("tenant2:api").query(&mut admin).unwrap();
    assert_eq!(exists, 0);
    s.assert_alive();
}

#[test]
fn read_only_commands_declare_read_only_keys() {
    let s = Server::start();
    let mut admin = s.conn();
    // %R~ grants read-only key access: peeks pass, limiting (RW) commands do not.
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "reader", "on", ">pw", "resetkeys", "%R~*", "+@all"])
        .query(&mut admin)
        .unwrap();
    ints(&mut admin, &["RL.TOKEN", "k", "5", "1", "1s", "AT", AT]);
    let mut c = s.conn();
    let _: () = redis::cmd("AUTH").arg("reader").arg("pw").query(&mut c).unwrap();
    let peek: Vec<i64> = redis::cmd("RL.PEEK").arg("k").query(&mut c).unwrap();
    assert_eq!(peek[0], 1);
    assert!(error_text(&mut c, &[b"RL.TOKEN", b"k", b"5", b"1", b"1s"]).starts_with("NOPERM"));
    s.assert_alive();
}

#[test]
fn out_of_memory_refuses_new_limiters_but_peeks_still_answer() {
    let s = Server::start();
    let mut c = s.conn();
    ints(&mut c, &["RL.TOKEN", "existing", "5", "1", "1s", "AT", AT]);
    let used: i64 = info_field(&mut c, "memory", "used_memory").parse().unwrap();
    let _: () =
        redis::cmd("CONFIG").arg(&["SET", "maxmemory-policy", "noeviction"]).query(&mut c).unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg((used + 1024).to_string())
        .query(&mut c)
        .unwrap();
    // Push used memory over the limit (SET itself is allowed while below it).
    let _ = redis::cmd("SET").arg("ballast").arg(vec![b'x'; 64 * 1024]).query::<()>(&mut c);
    let e = error_text(&mut c, &[b"RL.TOKEN", b"new", b"5", b"1", b"1s"]);
    assert!(e.starts_with("OOM"), "{e}");
    let e = error_text(&mut c, &[b"CL.THROTTLE", b"new", b"5", b"1", b"1"]);
    assert!(e.starts_with("OOM"), "{e}");
    let peek: Vec<i64> = redis::cmd("RL.PEEK").arg("existing").query(&mut c).unwrap();
    assert_eq!(peek[0], 1);
    let _: () = redis::cmd("CONFIG").arg(&["SET", "maxmemory", "0"]).query(&mut c).unwrap();
    assert_eq!(ints(&mut c, &["RL.TOKEN", "new", "5", "1", "1s", "AT", AT])[0], 1);
    s.assert_alive();
}

/// Whether this server gives module commands ACL categories (Redis 7.2+; Valkey reports
/// `redis_version:7.2.4`).
fn has_module_acl_categories(con: &mut Connection) -> bool {
    let version = info_field(con, "server", "redis_version");
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (7, 2)
}

/// On servers that support it, every command is in `@ratelimit` (and `@read`/`@write`), so
/// operators can grant or deny the module as a whole; on 7.0 the module still loads.
#[test]
fn commands_carry_the_ratelimit_acl_category() {
    let s = Server::start();
    let mut admin = s.conn();
    let info =
        format!("{:?}", run(&mut admin, &["COMMAND", "INFO", "rl.token", "rl.peek"]).unwrap());
    if !has_module_acl_categories(&mut admin) {
        assert!(!info.contains("@ratelimit"), "{info}");
        return;
    }
    assert!(
        info.contains("@ratelimit") && info.contains("@write") && info.contains("@read"),
        "{info}"
    );
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "app", "on", ">pw", "~*", "+@all", "-@ratelimit"])
        .query(&mut admin)
        .unwrap();
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "limiter", "on", ">pw", "~*", "-@all", "+@ratelimit"])
        .query(&mut admin)
        .unwrap();
    let mut app = s.conn();
    let _: () = redis::cmd("AUTH").arg("app").arg("pw").query(&mut app).unwrap();
    assert!(error_text(&mut app, &[b"RL.TOKEN", b"k", b"5", b"1", b"1s"]).starts_with("NOPERM"));
    assert!(error_text(&mut app, &[b"RL.ALL", b"1", b"k", b"TOKEN", b"5", b"1", b"1s"])
        .starts_with("NOPERM"));
    let mut limiter = s.conn();
    let _: () = redis::cmd("AUTH").arg("limiter").arg("pw").query(&mut limiter).unwrap();
    assert_eq!(ints(&mut limiter, &["RL.TOKEN", "k", "5", "1", "1s", "AT", AT])[0], 1);
    assert!(error_text(&mut limiter, &[b"GET", b"k"]).starts_with("NOPERM"));
}
