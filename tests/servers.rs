//! What differs between the servers of the compatibility matrix, pinned per server
//! (docs/operations.md "Servers"). Each test asks the server it runs on who it is and asserts
//! that server's known behaviour, so a difference that moves (a new build, a fixed bug, a
//! changed default) fails here before it surprises an operator. `make test` runs this file on
//! Debian's redis-server, `make compat` on the other four (scripts/servers.sh).

mod common;
use common::*;
use std::collections::BTreeSet;

/// What `ACL CAT ratelimit` answers.
#[derive(Debug, Clone, Copy, PartialEq)]
enum AclCat {
    /// An error: the server gives module commands no ACL categories (Redis 7.0).
    UnknownCategory,
    /// An empty list: the category exists and `+@ratelimit` works, but `ACL CAT <category>`
    /// skips module commands (Redis 7.4, Valkey 8.0).
    Empty,
    /// The module's commands.
    Listed,
}

/// One server of the matrix and what it does differently.
struct Known {
    /// `redis` or `valkey` (INFO `server_name`, absent on Redis).
    product: &'static str,
    /// `redis_version`, or `valkey_version` on Valkey.
    version: &'static str,
    /// INFO `mem_allocator` starts with this.
    allocator: &'static str,
    /// `CONFIG SET activedefrag yes` is accepted (a build with the bundled jemalloc).
    active_defrag: bool,
    acl_cat: AclCat,
    /// The server's own modules, listed by `MODULE LIST` beside ours.
    own_modules: &'static [&'static str],
    /// The default of `lazyfree-lazy-user-del` (`DEL` as `UNLINK`).
    lazy_user_del: bool,
    /// `CLUSTER MIGRATESLOTS` (atomic slot migration, Valkey 9) exists; the module declares
    /// support for it there, so the server does not refuse it for the module's sake.
    atomic_slot_migration: bool,
}

const MATRIX: [Known; 5] = [
    Known {
        product: "redis",
        version: "7.0.15",
        allocator: "jemalloc",
        active_defrag: false, // Debian's build links the system jemalloc
        acl_cat: AclCat::UnknownCategory,
        own_modules: &[],
        lazy_user_del: false,
        atomic_slot_migration: false,
    },
    Known {
        product: "redis",
        version: "7.4.1",
        allocator: "jemalloc",
        active_defrag: true,
        acl_cat: AclCat::Empty,
        own_modules: &[],
        lazy_user_del: false,
        atomic_slot_migration: false,
    },
    Known {
        product: "valkey",
        version: "8.0.1",
        allocator: "jemalloc",
        active_defrag: true,
        acl_cat: AclCat::Empty,
        own_modules: &[],
        lazy_user_del: true,
        atomic_slot_migration: false,
    },
    Known {
        product: "redis",
        version: "8.2.3",
        allocator: "jemalloc",
        active_defrag: true,
        acl_cat: AclCat::Listed,
        own_modules: &["vectorset"],
        lazy_user_del: false,
        atomic_slot_migration: false,
    },
    Known {
        product: "valkey",
        version: "9.1.2",
        allocator: "libc",
        active_defrag: false,
        acl_cat: AclCat::Listed,
        own_modules: &["lua"],
        lazy_user_del: true,
        atomic_slot_migration: true,
    },
];

/// Commands every server that lists the category must list in it.
const LIMITING: [&str; 7] =
    ["rl.token", "rl.period", "rl.slide", "rl.leaky", "cl.throttle", "rl.peek", "rl.info"];

/// The fields of one `INFO` section.
fn info(con: &mut Connection, section: &str) -> Vec<(String, String)> {
    let text: String = redis::cmd("INFO").arg(section).query(con).expect("INFO");
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// (product, version) of the running server.
fn identity(con: &mut Connection) -> (String, String) {
    let server = info(con, "server");
    let product = field(&server, "server_name").unwrap_or("redis").to_string();
    let version_field = if product == "valkey" { "valkey_version" } else { "redis_version" };
    let version = field(&server, version_field).expect("server version").to_string();
    (product, version)
}

/// The matrix entry of the running server, or `None` (with a note) for another build, whose
/// differences this file does not know.
fn known(con: &mut Connection) -> Option<&'static Known> {
    let (product, version) = identity(con);
    let entry = MATRIX.iter().find(|k| k.product == product && k.version == version);
    if entry.is_none() {
        eprintln!("{product} {version} is not in the matrix: its differences are not pinned");
    }
    entry
}

fn strings(v: Value) -> Vec<String> {
    match v {
        Value::Array(items) | Value::Set(items) => strings_of(&items),
        other => panic!("not a list: {other:?}"),
    }
}

/// Valkey answers `redis_version:7.2.4` beside its own `valkey_version` (what
/// `tests/access.rs` relies on to expect ACL categories); Redis has no `server_name`.
#[test]
fn the_server_says_who_it_is() {
    let s = Server::start();
    let mut c = s.conn();
    let server = info(&mut c, "server");
    let Some(k) = known(&mut c) else { return };
    match k.product {
        "valkey" => {
            assert_eq!(field(&server, "redis_version"), Some("7.2.4"));
            assert_eq!(field(&server, "valkey_version"), Some(k.version));
        }
        _ => {
            assert_eq!(field(&server, "server_name"), None);
            assert_eq!(field(&server, "redis_version"), Some(k.version));
        }
    }
    let memory = info(&mut c, "memory");
    let allocator = field(&memory, "mem_allocator").expect("mem_allocator");
    assert!(allocator.starts_with(k.allocator), "{allocator}");
    s.assert_alive();
}

/// Active defragmentation (which moves limiter values through the type's defrag callback,
/// `tests/memory.rs`) needs a build with the bundled jemalloc: Debian's 7.0.15 and Valkey
/// 9.1.2's libc build refuse to enable it, so memory.rs's defrag test skips only there.
#[test]
fn active_defragmentation_where_the_build_allows_it() {
    let s = Server::start();
    let mut c = s.conn();
    let Some(k) = known(&mut c) else { return };
    let enabled: redis::RedisResult<()> =
        redis::cmd("CONFIG").arg(&["SET", "activedefrag", "yes"]).query(&mut c);
    assert_eq!(enabled.is_ok(), k.active_defrag, "{enabled:?}");
    let now: Vec<String> =
        redis::cmd("CONFIG").arg(&["GET", "activedefrag"]).query(&mut c).unwrap();
    assert_eq!(now[1], if k.active_defrag { "yes" } else { "no" });
    s.assert_alive();
}

/// `ACL CAT ratelimit`: Redis 7.0 has no such category; Redis 7.4 and Valkey 8.0 know it
/// (`+@ratelimit` grants the commands, tests/access.rs) but list no module command in it;
/// Redis 8.2 and Valkey 9.1 list the module's commands (those in the category).
#[test]
fn acl_cat_lists_the_module_commands_where_the_server_does() {
    let s = Server::start();
    let mut c = s.conn();
    let Some(k) = known(&mut c) else { return };
    let ours: BTreeSet<String> =
        strings(run(&mut c, &["COMMAND", "LIST", "FILTERBY", "MODULE", "ratelimit"]).unwrap())
            .into_iter()
            .map(|n| n.to_lowercase())
            .collect();
    assert!(ours.contains("rl.token") && ours.contains("cl.throttle"), "{ours:?}");
    let listed = run(&mut c, &["ACL", "CAT", "ratelimit"]);
    match k.acl_cat {
        AclCat::UnknownCategory => assert!(listed.is_err(), "{listed:?}"),
        AclCat::Empty => assert!(strings(listed.unwrap()).is_empty()),
        AclCat::Listed => {
            let listed: BTreeSet<String> =
                strings(listed.unwrap()).into_iter().map(|n| n.to_lowercase()).collect();
            assert!(listed.is_subset(&ours), "{listed:?} vs {ours:?}");
            for command in LIMITING {
                assert!(listed.contains(command), "{command} missing from {listed:?}");
            }
        }
    }
    s.assert_alive();
}

/// `MODULE LIST` (and `HELLO`'s `modules`) show the server's own modules beside ours: Redis
/// 8.2's `vectorset`, Valkey 9.1's `lua` (its Lua engine is a module there). Tools that
/// look for the module must find it by name, not assume it is alone.
#[test]
fn module_list_shows_the_servers_own_modules() {
    let s = Server::start();
    let mut c = s.conn();
    let Some(k) = known(&mut c) else { return };
    let list: Vec<Value> = redis::cmd("MODULE").arg("LIST").query(&mut c).unwrap();
    let mut names = BTreeSet::new();
    for entry in list {
        let fields = match entry {
            Value::Array(items) => items,
            Value::Map(pairs) => pairs.into_iter().flat_map(|(k, v)| [k, v]).collect(),
            other => panic!("MODULE LIST entry {other:?}"),
        };
        let text = strings_of(&fields);
        let at = text.iter().position(|f| f == "name").expect("name field");
        names.insert(text[at + 1].clone());
    }
    let mut expected: BTreeSet<String> = k.own_modules.iter().map(|m| m.to_string()).collect();
    expected.insert("ratelimit".into());
    assert_eq!(names, expected);
    s.assert_alive();
}

fn strings_of(values: &[Value]) -> Vec<String> {
    values
        .iter()
        .map(|v| match v {
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            Value::SimpleString(s) => s.clone(),
            Value::Int(i) => i.to_string(),
            other => format!("{other:?}"),
        })
        .collect()
}

/// Scripts and functions reach the module's commands on every server, including Valkey 9.1
/// where Lua is itself a module: the same decisions as direct calls.
#[test]
fn scripts_and_functions_call_the_module_everywhere() {
    let s = Server::start();
    let mut c = s.conn();
    let at = "4000000000000";
    let direct = ints(&mut c, &["RL.TOKEN", "d", "5", "1", "1s", "COST", "2", "AT", at]);
    let script = "return redis.call('RL.TOKEN', KEYS[1], 5, 1, '1s', 'COST', 2, 'AT', ARGV[1])";
    let by_eval = ints(&mut c, &["EVAL", script, "1", "e", at]);
    assert_eq!(by_eval, direct);
    let library = "#!lua name=rltest\nredis.register_function('take', function(keys, args) \
                   return redis.call('RL.TOKEN', keys[1], 5, 1, '1s', 'COST', 2, 'AT', args[1]) \
                   end)";
    let _: String = redis::cmd("FUNCTION").arg("LOAD").arg(library).query(&mut c).unwrap();
    assert_eq!(ints(&mut c, &["FCALL", "take", "1", "f", at]), direct);
    // A second call on each key sees the first: the scripts wrote real limiter keys.
    let again = ints(&mut c, &["RL.TOKEN", "e", "5", "1", "1s", "COST", "2", "AT", at]);
    assert_eq!(again, ints(&mut c, &["RL.TOKEN", "d", "5", "1", "1s", "COST", "2", "AT", at]));
    s.assert_alive();
}

/// Valkey 8+ defaults `lazyfree-lazy-user-del` to `yes` (`DEL` frees in the background); the
/// module declares no free effort, so its values are still freed at once, in the main thread:
/// the shared parameter table (`ratelimit_inline_entries`) is released before `DEL` answers.
#[test]
fn del_frees_limiters_at_once_whatever_the_lazyfree_default() {
    let s = Server::start();
    let mut c = s.conn();
    let Some(k) = known(&mut c) else { return };
    let lazy: Vec<String> =
        redis::cmd("CONFIG").arg(&["GET", "lazyfree-lazy-user-del"]).query(&mut c).unwrap();
    assert_eq!(lazy[1], if k.lazy_user_del { "yes" } else { "no" });
    let entries = |c: &mut Connection| info_field(c, "ratelimit", "ratelimit_inline_entries");
    assert_eq!(entries(&mut c), "0");
    line(&mut c, "RL.TOKEN a 7 3 9s AT 4000000000000");
    line(&mut c, "RL.PERIOD b 11 13s AT 4000000000000");
    assert_eq!(entries(&mut c), "2");
    let deleted: i64 = redis::cmd("DEL").arg(&["a", "b"]).query(&mut c).unwrap();
    assert_eq!(deleted, 2);
    assert_eq!(entries(&mut c), "0");
    s.assert_alive();
}

/// Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`) refuses to run while a module
/// that has not declared support for it is loaded; this module declares it there (only
/// there: `src/shell/slots.rs`), so the command gets past that check and fails only on its
/// made-up target node. The other servers have no such command. The migrations themselves:
/// `tests/slot_migration.rs`.
#[test]
fn atomic_slot_migration_is_declared_on_valkey_9() {
    let s = cluster_node();
    let mut c = s.conn();
    let Some(k) = known(&mut c) else { return };
    let _: () = redis::cmd("CLUSTER").arg(&["ADDSLOTSRANGE", "0", "16383"]).query(&mut c).unwrap();
    let other = "0123456789abcdef0123456789abcdef01234567";
    let migrate = run(&mut c, &["CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", "1", "1", "NODE", other]);
    let err = migrate.expect_err("an unknown target node, or an unknown subcommand");
    assert!(!err.to_string().contains("ratelimit"), "refused for the module's sake: {err}");
    assert_eq!(err.to_string().contains("Unknown node"), k.atomic_slot_migration, "{err}");
    s.assert_alive();
}
