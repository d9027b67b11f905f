//! The two propagation modes and every transition between them.
//!
//! Normally an admitted call propagates rewritten (`... AT <ms used>`, without `WAIT`), so
//! replicas and AOF replay judge at the master's instant. Where propagation provably goes
//! nowhere (AOF off, a master without replicas and without a replication backlog) the module
//! may propagate verbatim instead (`RM_ReplicateVerbatim`: the client's own arguments, still
//! counted in `rdb_changes_since_last_save`); `INFO ratelimit` shows
//! `ratelimit_propagation_verbatim:1` while it does. A replica or AOF that ever received a
//! verbatim command would judge it with its own clock and diverge, so each test here drives
//! mixed traffic **without `AT`** on 1–2 s limits (decisions flip at ms boundaries) through one
//! transition — a replica attached before, after or during traffic, AOF switched on and off,
//! a replica restarted from its RDB (partial resync from the backlog), a replica promoted, and
//! transactions and scripts — and then requires identical datasets (`DEBUG DIGEST`) wherever
//! the data went. Whenever a server reports verbatim mode, it must be a master with AOF off,
//! no replicas and no backlog (`check_mode`).

mod common;
use common::*;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const FIELD: &str = "ratelimit_propagation_verbatim";

/// How long a server may take to (re)enter verbatim mode once it is alone: the module checks
/// at most once a second, and a backlog is freed `repl-backlog-ttl` (1 s here) after its last
/// replica left, by a once-a-second cron; generous for loaded CI machines.
const MODE_DEADLINE: Duration = Duration::from_secs(15);

/// The 40-zero `DEBUG DIGEST` of an empty dataset.
const EMPTY_DIGEST: &str = "0000000000000000000000000000000000000000";

// ---------------------------------------------------------------------------------------------
// Traffic: every limiting command, without AT.

/// Limiters of the traffic (key suffix, the `RL.ALL` limit without `COST`); the single command
/// is `RL.<keyword> key <rest>`. Each key keeps one algorithm and its parameters.
const LIMITERS: &[(&str, &str)] = &[
    ("tok:0", "TOKEN 5 5 1s"),
    ("tok:1", "TOKEN 8 3 2s"),
    ("tok:2", "TOKEN 4 2 1s STEP"),
    ("tok:3", "TOKEN 6 7 1s"),
    ("per:0", "PERIOD 6 1s"),
    ("per:1", "PERIOD 10 2s"),
    ("per:2", "PERIOD 5 1s ALIGN"),
    ("sld:0", "SLIDE 6 1s"),
    ("sld:1", "SLIDE 8 2s BUCKETS 4"),
    ("sld:2", "SLIDE 5 1s BUCKETS 10"),
    ("lky:0", "LEAKY 6 5 1s"),
    ("lky:1", "LEAKY 6 5 1s NODELAY"),
    ("lky:2", "LEAKY 8 3 2s DELAY 2"),
    // Memory: an exact log of every admitted ms for an hour, so a call judged at another
    // instant anywhere leaves a lasting difference (short limits reset and forget it).
    ("mem:sld", "SLIDE 100000 1h"),
];

/// `CL.THROTTLE` keys: (suffix, max_burst count period).
const CELLS: &[(&str, &str)] = &[("gc:0", "4 5 1"), ("gc:1", "2 3 2")];

/// Lease keys: (suffix, limit lease).
const LEASES: &[(&str, &str)] = &[("ls:0", "3 700"), ("ls:1", "3 700")];

/// The memory lease key: every lease lasts an hour, its expiry and generated id record the
/// instant it was taken.
const MEMORY_LEASES: (&str, &str) = ("mem:ls", "1000 1h");

/// Runs each step's commands in a `MULTI`/`EXEC` or one `EVAL`: `n` then the `n` words of each
/// command in ARGV.
const BUNDLE_SCRIPT: &str = "local out = {} \
     local i = 1 \
     while i <= #ARGV do \
       local n = tonumber(ARGV[i]) \
       local args = {} \
       for j = 1, n do args[j] = ARGV[i + j] end \
       out[#out + 1] = redis.call(unpack(args)) \
       i = i + n + 1 \
     end \
     return out";

/// A deterministic mix of calls on a fixed key set (every key name starts with `prefix`), with
/// sleeps of 0–2.5 ms between steps so calls land on different milliseconds.
struct Traffic {
    rng: u64,
    prefix: String,
    /// Steps run as `MULTI`/`EXEC` and `EVAL` bundles of 2–4 calls (and some single calls).
    bundles: bool,
    /// Leases acquired without `ID` (key, "limit lease", generated id), to renew and release.
    leases: Vec<(String, String, String)>,
    admitted: u64,
    refused: u64,
    steps: u64,
}

impl Traffic {
    fn new(seed: u64, prefix: &str) -> Traffic {
        Traffic {
            rng: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
            prefix: prefix.to_string(),
            bundles: false,
            leases: Vec::new(),
            admitted: 0,
            refused: 0,
            steps: 0,
        }
    }

    fn below(&mut self, n: usize) -> usize {
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }

    fn key(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.prefix)
    }

    fn limiter_key(&mut self) -> String {
        let i = self.below(LIMITERS.len());
        self.key(LIMITERS[i].0)
    }

    fn cell_key(&mut self) -> String {
        let i = self.below(CELLS.len());
        self.key(CELLS[i].0)
    }

    fn lease_key(&mut self) -> String {
        let i = self.below(LEASES.len());
        self.key(LEASES[i].0)
    }

    /// `RL.ACQUIRE` without `ID` (a new lease, id generated by the server).
    fn acquire(&mut self, (suffix, params): (&str, &str)) -> Vec<String> {
        let mut words = vec!["RL.ACQUIRE".to_string(), self.key(suffix)];
        words.extend(params.split_whitespace().map(String::from));
        words
    }

    /// One limiting call on a `LIMITERS` key: `COST` 1–3, sometimes `BAN 300`, `WAIT 30` or
    /// `DRYRUN`.
    fn single(&mut self) -> Vec<String> {
        let (suffix, spec) = LIMITERS[self.below(LIMITERS.len())];
        let mut parts = spec.split_whitespace();
        let keyword = parts.next().unwrap_or_default();
        let mut words = vec![format!("RL.{keyword}"), self.key(suffix)];
        words.extend(parts.map(String::from));
        words.extend(["COST".to_string(), (1 + self.below(3)).to_string()]);
        if self.below(6) == 0 {
            words.extend(["BAN".to_string(), "300".to_string()]);
        }
        match self.below(12) {
            0 => words.push("DRYRUN".into()),
            1 | 2 => words.extend(["WAIT".to_string(), "30".to_string()]),
            _ => {}
        }
        words
    }

    /// The next call of the mix.
    fn command(&mut self) -> Vec<String> {
        let roll = self.below(100);
        match roll {
            0..=39 => self.single(),
            40..=48 => {
                let (suffix, spec) = CELLS[self.below(CELLS.len())];
                let mut words = vec!["CL.THROTTLE".to_string(), self.key(suffix)];
                words.extend(spec.split_whitespace().map(String::from));
                words.push((1 + self.below(2)).to_string());
                if self.below(12) == 0 {
                    words.push("DRYRUN".into());
                }
                words
            }
            49..=59 => {
                // RL.ALL over 2 or 3 distinct limiters, each with its own COST.
                let n = 2 + self.below(2);
                let mut picked: Vec<usize> = Vec::new();
                while picked.len() < n {
                    let i = self.below(LIMITERS.len());
                    if !picked.contains(&i) {
                        picked.push(i);
                    }
                }
                let mut words = vec!["RL.ALL".to_string(), n.to_string()];
                words.extend(picked.iter().map(|&i| self.key(LIMITERS[i].0)));
                for &i in &picked {
                    words.extend(LIMITERS[i].1.split_whitespace().map(String::from));
                    words.extend(["COST".to_string(), (1 + self.below(2)).to_string()]);
                }
                if self.below(12) == 0 {
                    words.push("DRYRUN".into());
                }
                words
            }
            60..=66 => {
                let key = if self.below(4) == 0 { self.cell_key() } else { self.limiter_key() };
                vec!["RL.REFUND".into(), key, (1 + self.below(3)).to_string()]
            }
            67..=76 => {
                let renew = !self.leases.is_empty() && self.below(4) == 0;
                let mut words = if renew {
                    let i = self.below(self.leases.len());
                    let (key, params, id) = self.leases[i].clone();
                    let mut words = vec!["RL.ACQUIRE".to_string(), key];
                    words.extend(params.split_whitespace().map(String::from));
                    words.extend(["ID".to_string(), id]);
                    words
                } else {
                    let i = self.below(LEASES.len());
                    self.acquire(LEASES[i])
                };
                match self.below(10) {
                    0 => words.push("DRYRUN".into()),
                    1 => words.extend(["WAIT".to_string(), "30".to_string()]),
                    _ => {}
                }
                words
            }
            77..=83 => {
                if self.leases.is_empty() || self.below(5) == 0 {
                    let key = self.lease_key();
                    vec!["RL.RELEASE".into(), key, "no-such-lease".into()]
                } else {
                    let i = self.below(self.leases.len());
                    let (key, _, id) = self.leases.remove(i);
                    vec!["RL.RELEASE".into(), key, id]
                }
            }
            84..=93 => {
                if self.below(2) == 0 {
                    self.acquire(MEMORY_LEASES)
                } else {
                    let cost = (1 + self.below(3)).to_string();
                    vec![
                        "RL.SLIDE".into(),
                        self.key("mem:sld"),
                        "100000".into(),
                        "1h".into(),
                        "COST".into(),
                        cost,
                    ]
                }
            }
            _ => {
                let key = match self.below(3) {
                    0 => self.lease_key(),
                    1 => self.cell_key(),
                    _ => self.limiter_key(),
                };
                let read = if self.below(2) == 0 { "RL.PEEK" } else { "RL.INFO" };
                vec![read.into(), key]
            }
        }
    }

    /// Counts the outcome of one call and remembers leases it created.
    fn record(&mut self, words: &[String], reply: &Value) {
        let first = match reply {
            Value::Array(items) => match items.first() {
                Some(Value::Int(i)) => Some(*i),
                _ => None,
            },
            _ => None,
        };
        let admitted = match (words[0].as_str(), first) {
            ("CL.THROTTLE", Some(limited)) => Some(limited == 0),
            ("RL.TOKEN" | "RL.PERIOD" | "RL.SLIDE" | "RL.LEAKY" | "RL.ALL", Some(allowed)) => {
                Some(allowed == 1)
            }
            ("RL.ACQUIRE", Some(allowed)) => {
                let renewal = words.iter().any(|w| w == "ID");
                if let (Value::Array(items), false) = (reply, renewal) {
                    if let Some(Value::BulkString(id)) = items.get(5) {
                        let params = words[2..4].join(" ");
                        let id = String::from_utf8_lossy(id).into_owned();
                        self.leases.push((words[1].clone(), params, id));
                        if self.leases.len() > 8 {
                            self.leases.remove(0);
                        }
                    }
                }
                Some(allowed == 1)
            }
            _ => None,
        };
        match admitted {
            Some(true) => self.admitted += 1,
            Some(false) => self.refused += 1,
            None => {}
        }
    }

    fn pause(&mut self) {
        let micros = self.below(2500) as u64;
        std::thread::sleep(Duration::from_micros(micros));
    }

    /// One step: a call (or, with `bundles`, mostly a `MULTI`/`EXEC` or `EVAL` of 2–4 calls),
    /// then a short sleep. Any error reply fails the test.
    fn step(&mut self, con: &mut Connection) {
        self.steps += 1;
        let form = if self.bundles { self.below(5) } else { 0 };
        match form {
            1 | 2 => {
                let n = 2 + self.below(3);
                let calls: Vec<Vec<String>> = (0..n).map(|_| self.command()).collect();
                let mut pipe = redis::pipe();
                pipe.atomic();
                for words in &calls {
                    let mut c = redis::cmd(&words[0]);
                    for w in &words[1..] {
                        c.arg(w);
                    }
                    pipe.add_command(c);
                }
                let replies: Vec<Value> =
                    pipe.query(con).unwrap_or_else(|e| panic!("MULTI {calls:?}: {e}"));
                assert_eq!(replies.len(), calls.len(), "EXEC {calls:?}: {replies:?}");
                for (words, reply) in calls.iter().zip(&replies) {
                    self.record(words, reply);
                }
            }
            3 | 4 => {
                let n = 2 + self.below(3);
                let calls: Vec<Vec<String>> = (0..n).map(|_| self.command()).collect();
                let mut eval = redis::cmd("EVAL");
                eval.arg(BUNDLE_SCRIPT).arg(0);
                for words in &calls {
                    eval.arg(words.len());
                    for w in words {
                        eval.arg(w);
                    }
                }
                let replies: Vec<Value> =
                    eval.query(con).unwrap_or_else(|e| panic!("EVAL {calls:?}: {e}"));
                assert_eq!(replies.len(), calls.len(), "EVAL {calls:?}: {replies:?}");
                for (words, reply) in calls.iter().zip(&replies) {
                    self.record(words, reply);
                }
            }
            _ => {
                let words = self.command();
                let refs: Vec<&str> = words.iter().map(String::as_str).collect();
                let reply = run(con, &refs).unwrap_or_else(|e| panic!("{words:?}: {e}"));
                self.record(&words, &reply);
            }
        }
        self.pause();
    }

    /// The traffic really judged: some calls admitted, some refused.
    fn assert_mixed(&self) {
        assert!(
            self.admitted > 20 && self.refused > 20,
            "traffic too one-sided: {} admitted, {} refused in {} steps",
            self.admitted,
            self.refused,
            self.steps
        );
    }
}

fn connect(sock: &Path) -> Connection {
    redis::Client::open(format!("redis+unix://{}", sock.display()))
        .and_then(|c| c.get_connection())
        .expect("traffic connection")
}

/// Traffic from a thread of its own until stopped.
struct Pump {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Traffic>>,
}

impl Pump {
    fn start(server: &Server, mut traffic: Traffic) -> Pump {
        let sock = server.sock.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut con = connect(&sock);
            while !flag.load(Ordering::Relaxed) {
                traffic.step(&mut con);
            }
            traffic
        });
        Pump { stop, handle: Some(handle) }
    }

    /// Stops the thread (after its current step) and gives the traffic back; a failure in the
    /// thread fails the test here.
    fn stop(mut self) -> Traffic {
        self.stop.store(true, Ordering::Relaxed);
        let handle = self.handle.take().expect("a running pump");
        handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

impl Drop for Pump {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------------------------------------
// Inspection helpers.

/// Several `INFO` sections in one reply (one instant), as field → value.
fn info(con: &mut Connection, sections: &[&str]) -> HashMap<String, String> {
    let mut c = redis::cmd("INFO");
    for s in sections {
        c.arg(*s);
    }
    let text: String = c.query(con).expect("INFO");
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

fn field<'a>(info: &'a HashMap<String, String>, name: &str) -> &'a str {
    info.get(name).map(String::as_str).unwrap_or_else(|| panic!("no {name} in INFO"))
}

/// The propagation mode (`"0"` or `"1"`), and the safety rule: verbatim only on a master with
/// AOF off, no replicas and no replication backlog (all read from one `INFO` reply).
fn check_mode(con: &mut Connection) -> String {
    let i = info(con, &["replication", "persistence", "ratelimit"]);
    let mode = i
        .get(FIELD)
        .unwrap_or_else(|| panic!("no {FIELD} in INFO ratelimit (the verbatim mode is missing)"))
        .clone();
    assert!(mode == "0" || mode == "1", "{FIELD}:{mode}");
    if mode == "1" {
        let listeners = [
            ("role", "master"),
            ("connected_slaves", "0"),
            ("repl_backlog_active", "0"),
            ("aof_enabled", "0"),
        ];
        for (name, safe) in listeners {
            assert_eq!(field(&i, name), safe, "verbatim propagation while {name} is not {safe}");
        }
    }
    mode
}

/// Waits (at most `MODE_DEADLINE`) for the mode to become `want`; traffic must be running
/// meanwhile (the module may check only when called).
fn wait_mode(con: &mut Connection, want: &str, what: &str) {
    let deadline = Instant::now() + MODE_DEADLINE;
    while check_mode(con) != want {
        assert!(
            Instant::now() < deadline,
            "{what}: {FIELD} never became {want} within {MODE_DEADLINE:?}; INFO: {:?}",
            info(con, &["replication", "persistence"])
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// For `how_long`, samples the mode every 20 ms: it must stay `want`.
fn hold_mode(con: &mut Connection, want: &str, how_long: Duration, what: &str) {
    let end = Instant::now() + how_long;
    while Instant::now() < end {
        assert_eq!(check_mode(con), want, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn changes(con: &mut Connection) -> i64 {
    info_field(con, "persistence", "rdb_changes_since_last_save").parse().expect("rdb_changes")
}

fn digest(con: &mut Connection) -> String {
    redis::cmd("DEBUG").arg("DIGEST").query(con).expect("DEBUG DIGEST")
}

fn set_active_expire(con: &mut Connection, on: bool) {
    let _: () = redis::cmd("DEBUG")
        .arg("SET-ACTIVE-EXPIRE")
        .arg(i32::from(on))
        .query(con)
        .expect("DEBUG SET-ACTIVE-EXPIRE");
}

/// Names of the filler keys (`add_filler`).
const FILLER: &str = "filler:";

/// 100 000 plain string keys, so that a full sync takes a while (the snapshot's transfer and
/// load, ~0.1 s): calls the master makes meanwhile reach the new replica only after its load,
/// tens of ms after the master judged them — any of them propagated verbatim would be judged
/// at another instant there. Only on a server without replicas (`DEBUG POPULATE` is not
/// propagated).
fn add_filler(con: &mut Connection) {
    let _: () = redis::cmd("DEBUG")
        .arg("POPULATE")
        .arg(100_000)
        .arg(FILLER.trim_end_matches(':'))
        .arg(16)
        .query(con)
        .expect("DEBUG POPULATE");
}

/// Key prefixes the tests' traffic uses.
const PREFIXES: &[&str] = &["", "a:", "bg:", "after:"];

/// `DEBUG DIGEST-VALUE` of every key `KEYS` shows and of every traffic key (for failure
/// messages; `KEYS` hides a key past its expiry that a master with active expiry off, or a
/// replica, still holds).
fn value_digests(con: &mut Connection) -> BTreeMap<String, String> {
    let mut keys: BTreeSet<String> = redis::cmd("KEYS")
        .arg("*")
        .query::<Vec<String>>(con)
        .unwrap_or_default()
        .into_iter()
        .filter(|k| !k.starts_with(FILLER))
        .collect();
    for prefix in PREFIXES {
        let names = LIMITERS
            .iter()
            .map(|l| l.0)
            .chain(CELLS.iter().map(|c| c.0))
            .chain(LEASES.iter().map(|l| l.0))
            .chain([MEMORY_LEASES.0]);
        keys.extend(names.map(|n| format!("{prefix}{n}")));
    }
    keys.into_iter()
        .map(|k| {
            let d: Vec<String> =
                redis::cmd("DEBUG").arg("DIGEST-VALUE").arg(&k).query(con).unwrap_or_default();
            (k, d.concat())
        })
        .filter(|(_, d)| d != EMPTY_DIGEST)
        .collect()
}

/// The keys whose values differ between two datasets, for a failure message.
fn differences(
    a: &BTreeMap<String, String>,
    b: &BTreeMap<String, String>,
    a_con: Option<&mut Connection>,
    b_con: Option<&mut Connection>,
) -> String {
    let names: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let differing: Vec<&String> = names.into_iter().filter(|k| a.get(*k) != b.get(*k)).collect();
    let mut out = format!("{} of {}/{} keys differ", differing.len(), a.len(), b.len());
    let (mut a_con, mut b_con) = (a_con, b_con);
    for key in differing.iter().take(8) {
        out.push_str(&format!("\n  {key}: {:?} vs {:?}", a.get(*key), b.get(*key)));
        if let (Some(ac), Some(bc)) = (a_con.as_deref_mut(), b_con.as_deref_mut()) {
            out.push_str(&format!(
                "\n    {:?} @{}\n    {:?} @{}",
                stored_state(ac, key),
                pexpiretime(ac, key),
                stored_state(bc, key),
                pexpiretime(bc, key)
            ));
        }
    }
    out
}

/// Freezes the master's key set (active expiry off: only reads expire keys, and the master
/// replicates those `DEL`s; a replica never expires keys itself), waits for the replica and
/// requires the same `DEBUG DIGEST` on both. Active expiry stays off on the master.
fn assert_same_dataset(master: &Server, replica: &Server) {
    let mut mc = master.conn();
    set_active_expire(&mut mc, false);
    wait_in_sync(master, replica);
    let mut rc = replica.conn();
    let (md, rd) = (digest(&mut mc), digest(&mut rc));
    if md != rd {
        let (m, r) = (value_digests(&mut mc), value_digests(&mut rc));
        panic!(
            "master and replica differ (DEBUG DIGEST {md} vs {rd}): {}",
            differences(&m, &r, Some(&mut mc), Some(&mut rc))
        );
    }
    assert_ne!(md, EMPTY_DIGEST, "nothing to compare");
}

/// Per key, `snapshot()` (stored state, absolute expiry, value digest) on master and replica
/// are equal. Limits here last 1–2 s, so a key may expire between the reads: then the replica
/// reports it missing (nil `RL.INFO`) and the master's reads found it expired or at an expiry
/// that has passed. Returns how many keys compared equal.
fn assert_same_keys(master: &Server, replica: &Server) -> usize {
    let (mut mc, mut rc) = (master.conn(), replica.conn());
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut mc).expect("KEYS");
    let mut equal = 0;
    for key in keys.iter().filter(|k| !k.starts_with(FILLER)) {
        let m = snapshot(&mut mc, key);
        let r = snapshot(&mut rc, key);
        let read_done = unix_ms();
        if m == r {
            equal += 1;
            continue;
        }
        let expired_between = r.0.is_empty() && (m.0.is_empty() || m.1 <= read_done);
        assert!(expired_between, "{key}: master {m:?}, replica {r:?}");
    }
    equal
}

/// The last lines of a server's log (for failure messages).
fn log_tail(server: &Server) -> String {
    let log = server.log();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// A loopback port nothing listens on (bound, then released).
fn unused_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port()
}

fn words(command: &str) -> Vec<&str> {
    command.split_whitespace().collect()
}

/// Calls on fresh `prefix` keys with 1 h limits whose outcome is known, each with the
/// `rdb_changes_since_last_save` it must add: 1 for a change (admitted, a ban started, a refund
/// that gave something back, a lease released), 0 otherwise. Returns the total.
fn known_changes(con: &mut Connection, prefix: &str) -> i64 {
    let p = prefix;
    let calls: Vec<(String, i64)> = vec![
        (format!("RL.TOKEN {p}tok 3 1 1h COST 2"), 1),
        (format!("RL.TOKEN {p}tok 3 1 1h COST 2"), 0),
        (format!("RL.TOKEN {p}tok 3 1 1h COST 2 BAN 1h"), 1),
        (format!("RL.TOKEN {p}tok 3 1 1h COST 1"), 0),
        (format!("RL.PERIOD {p}per 5 1h COST 2"), 1),
        (format!("RL.PERIOD {p}per 5 1h COST 2 DRYRUN"), 0),
        (format!("RL.SLIDE {p}sld 5 1h COST 2"), 1),
        (format!("RL.SLIDE {p}sldb 5 1h BUCKETS 6 COST 2"), 1),
        (format!("RL.LEAKY {p}lky 5 1 1h NODELAY COST 2"), 1),
        (format!("CL.THROTTLE {p}gc 5 1 3600 2"), 1),
        (format!("CL.THROTTLE {p}gc 5 1 3600 0"), 0),
        (format!("RL.ALL 2 {p}all1 {p}all2 TOKEN 5 1 1h PERIOD 1 1h"), 1),
        (format!("RL.ALL 2 {p}all1 {p}all2 TOKEN 5 1 1h PERIOD 1 1h"), 0),
        (format!("RL.REFUND {p}per 1"), 1),
        (format!("RL.REFUND {p}missing 1"), 0),
        (format!("RL.ACQUIRE {p}ls 2 1h ID w1"), 1),
        (format!("RL.ACQUIRE {p}ls 2 1h ID w2"), 1),
        (format!("RL.ACQUIRE {p}ls 2 1h ID w3"), 0),
        (format!("RL.ACQUIRE {p}ls2 2 1h"), 1),
        (format!("RL.RELEASE {p}ls w1"), 1),
        (format!("RL.RELEASE {p}ls w1"), 0),
        (format!("RL.PEEK {p}tok"), 0),
        (format!("RL.INFO {p}tok"), 0),
    ];
    let mut total = 0;
    for (command, expected) in calls {
        let before = changes(con);
        run(con, &words(&command)).unwrap_or_else(|e| panic!("{command}: {e}"));
        assert_eq!(changes(con) - before, expected, "rdb_changes added by {command}");
        total += expected;
    }
    total
}

// ---------------------------------------------------------------------------------------------
// Tests.

/// A lone master switches to verbatim propagation, and verbatim calls still count in
/// `rdb_changes_since_last_save` exactly as rewritten ones do, so save points fire.
#[test]
fn verbatim_mode_turns_on_when_alone() {
    let s = Server::start();
    let mut c = s.conn();
    let pump = Pump::start(&s, Traffic::new(1, "a:"));
    wait_mode(&mut c, "1", "a lone master without AOF");
    let traffic = pump.stop();
    traffic.assert_mixed();

    // Only our calls change anything now (no expiry, no traffic).
    set_active_expire(&mut c, false);
    assert_eq!(check_mode(&mut c), "1");
    let before = changes(&mut c);
    let expected = known_changes(&mut c, "b:");
    assert_eq!(changes(&mut c) - before, expected);
    assert_eq!(check_mode(&mut c), "1", "these calls were propagated verbatim");

    // A save point fires on those changes.
    let saves: i64 = info_field(&mut c, "persistence", "rdb_saves").parse().unwrap();
    let _: () = redis::cmd("CONFIG").arg("SET").arg("save").arg("1 1").query(&mut c).unwrap();
    wait_for("the save point to fire", || {
        let i = info(&mut c, &["persistence"]);
        field(&i, "rdb_saves").parse::<i64>().unwrap() > saves
            && field(&i, "rdb_bgsave_in_progress") == "0"
    });
    let _: () = redis::cmd("CONFIG").arg("SET").arg("save").arg("").query(&mut c).unwrap();
    assert_eq!(info_field(&mut c, "persistence", "rdb_last_bgsave_status"), "ok");
    assert_eq!(changes(&mut c), 0, "the save took every change");

    // After the fork, verbatim again; and its calls count again.
    let pump = Pump::start(&s, traffic);
    wait_mode(&mut c, "1", "a lone master after a BGSAVE");
    let _ = pump.stop();
    let before = changes(&mut c);
    let expected = known_changes(&mut c, "c:");
    assert_eq!(changes(&mut c) - before, expected);
    assert_eq!(check_mode(&mut c), "1");
    s.assert_alive();
}

/// A replica from the start: the master never propagates verbatim, and the replica ends
/// identical, key by key.
#[test]
fn replica_attached_before_traffic() {
    let (master, replica) = master_and_replica();
    let mut mc = master.conn();
    let pump = Pump::start(&master, Traffic::new(2, ""));
    hold_mode(&mut mc, "0", Duration::from_millis(1500), "a master with a replica");
    let traffic = pump.stop();
    traffic.assert_mixed();
    assert_same_dataset(&master, &replica);
    let equal = assert_same_keys(&master, &replica);
    assert!(equal >= 10, "only {equal} keys compared");
    assert_eq!(check_mode(&mut mc), "0");
    master.assert_alive();
    replica.assert_alive();
}

/// Verbatim mode in use, then a replica attaches (`REPLICAOF`) with traffic going on right
/// away: the full sync's fork ends verbatim mode, and it stays off with a replica connected.
#[test]
fn replica_attached_after_traffic() {
    let master = Server::start();
    let mut mc = master.conn();
    let pump = Pump::start(&master, Traffic::new(3, ""));
    wait_mode(&mut mc, "1", "a lone master");
    let traffic = pump.stop();
    add_filler(&mut mc);

    let replica = Server::start();
    let mut rc = replica.conn();
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(master.port)
        .query(&mut rc)
        .expect("REPLICAOF");
    let pump = Pump::start(&master, traffic);
    wait_for("replication link", || {
        info_field(&mut rc, "replication", "master_link_status") == "up"
    });
    assert_eq!(check_mode(&mut mc), "0", "a replica is connected");
    hold_mode(&mut mc, "0", Duration::from_millis(1200), "a master with a replica");
    let traffic = pump.stop();
    traffic.assert_mixed();
    assert_same_dataset(&master, &replica);
    assert_same_keys(&master, &replica);
    assert_eq!(check_mode(&mut mc), "0");
    master.assert_alive();
    replica.assert_alive();
}

/// Replicas attach (`--replicaof`) while a thread keeps sending traffic to a master in verbatim
/// mode, three times: diskless sync at once, disk-based sync, and diskless sync after a 1 s
/// delay. Between rounds the replica is killed and the master frees its backlog
/// (`repl-backlog-ttl 1`), so each round starts in verbatim mode again.
#[test]
fn replica_attached_during_traffic() {
    let master = Server::start_with(&["--repl-backlog-ttl", "1"]);
    let mut mc = master.conn();
    add_filler(&mut mc);
    let mut traffic = Traffic::new(4, "");
    let settings: [&[(&str, &str)]; 3] = [
        &[],
        &[("repl-diskless-sync", "no")],
        &[("repl-diskless-sync", "yes"), ("repl-diskless-sync-delay", "1")],
    ];
    for (round, config) in settings.iter().enumerate() {
        for (name, value) in config.iter() {
            let _: () =
                redis::cmd("CONFIG").arg("SET").arg(*name).arg(*value).query(&mut mc).unwrap();
        }
        set_active_expire(&mut mc, true);
        let pump = Pump::start(&master, traffic);
        wait_mode(&mut mc, "1", &format!("round {round}: a master alone again"));
        let replica = replica_of(&master, &[]);
        assert_eq!(check_mode(&mut mc), "0", "round {round}: a replica is connected");
        hold_mode(&mut mc, "0", Duration::from_millis(1200), "a master with a replica");
        traffic = pump.stop();
        assert_same_dataset(&master, &replica);
        drop(replica);
        wait_for("the master to lose its replica", || {
            info_field(&mut mc, "replication", "connected_slaves") == "0"
        });
    }
    traffic.assert_mixed();
    master.assert_alive();
}

/// AOF switched on in the middle of verbatim traffic: from the rewrite's fork on, every call
/// reaches the AOF rewritten, so replaying the AOF (in place, and in a new process on the same
/// directory) rebuilds the identical dataset. Switched off again, verbatim mode returns.
#[test]
fn aof_toggled_mid_traffic() {
    let mut a = Server::start_with(&["--appendfsync", "always"]);
    let mut ac = a.conn();
    let pump = Pump::start(&a, Traffic::new(5, ""));
    wait_mode(&mut ac, "1", "a lone master without AOF");
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("appendonly").arg("yes").query(&mut ac).unwrap();
    // The rewrite forked inside CONFIG SET; every call from here on is written to the AOF.
    assert_eq!(check_mode(&mut ac), "0", "AOF is on");
    wait_for("the AOF rewrite", || {
        let i = info(&mut ac, &["persistence"]);
        assert_eq!(check_mode(&mut ac), "0", "AOF is on");
        field(&i, "aof_enabled") == "1"
            && field(&i, "aof_rewrite_in_progress") == "0"
            && field(&i, "aof_rewrite_scheduled") == "0"
    });
    assert_eq!(info_field(&mut ac, "persistence", "aof_last_bgrewrite_status"), "ok");
    hold_mode(&mut ac, "0", Duration::from_millis(1200), "AOF is on");
    let traffic = pump.stop();
    traffic.assert_mixed();

    // Frozen (no expiry), the dataset is what the AOF must rebuild.
    set_active_expire(&mut ac, false);
    let expected = digest(&mut ac);
    assert_ne!(expected, EMPTY_DIGEST);
    let before = value_digests(&mut ac);
    let loaded: redis::RedisResult<()> = redis::cmd("DEBUG").arg("LOADAOF").query(&mut ac);
    if let Err(e) = loaded {
        panic!("DEBUG LOADAOF failed ({e}); the server's log ends:\n{}", log_tail(&a));
    }
    let replayed = digest(&mut ac);
    if replayed != expected {
        let after = value_digests(&mut ac);
        panic!(
            "DEBUG LOADAOF rebuilt another dataset: {}",
            differences(&before, &after, None, None)
        );
    }

    // AOF off: nothing listens any more, verbatim mode returns (on other keys, so the files on
    // disk still hold exactly `expected`).
    let _: () = redis::cmd("CONFIG").arg("SET").arg("appendonly").arg("no").query(&mut ac).unwrap();
    let pump = Pump::start(&a, Traffic::new(55, "after:"));
    wait_mode(&mut ac, "1", "AOF switched off");
    let _ = pump.stop();

    // Restart from the AOF files: a new process on the same directory with appendonly on. It
    // starts as a replica of a port nothing listens on, so it never expires a key and the
    // digest compares everything, expired limiters included.
    let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").arg("NOSAVE").query(&mut ac);
    drop(ac);
    a.kill();
    let dir = a.dir.display().to_string();
    let nowhere = unused_port().to_string();
    let b = Server::start_with(&[
        "--dir",
        &dir,
        "--appendonly",
        "yes",
        "--replicaof",
        "127.0.0.1",
        &nowhere,
    ]);
    let mut bc = b.conn();
    let restarted = digest(&mut bc);
    if restarted != expected {
        let after = value_digests(&mut bc);
        panic!("the restart from the AOF differs: {}", differences(&before, &after, None, None));
    }
    b.assert_alive();
}

/// A replica saved (its RDB carries the replication id and offset) and went away; the master,
/// keeping its backlog for it, never propagates verbatim meanwhile. Restarted, the replica
/// resyncs partially from the backlog and ends identical.
#[test]
fn restart_from_rdb_with_replication_info() {
    let (master, mut replica) = master_and_replica();
    let mut mc = master.conn();
    let pump = Pump::start(&master, Traffic::new(6, ""));
    hold_mode(&mut mc, "0", Duration::from_millis(600), "a master with a replica");
    {
        let mut rc = replica.conn();
        let _: () = redis::cmd("SAVE").query(&mut rc).expect("SAVE on the replica");
        let _: () = redis::cmd("REPLICAOF").arg("NO").arg("ONE").query(&mut rc).unwrap();
    }
    wait_for("the master to lose its replica", || {
        info_field(&mut mc, "replication", "connected_slaves") == "0"
    });
    let i = info(&mut mc, &["replication"]);
    assert_eq!(field(&i, "repl_backlog_active"), "1", "the master keeps its backlog");
    hold_mode(&mut mc, "0", Duration::from_millis(1500), "the backlog awaits a replica");
    let partial: i64 = info_field(&mut mc, "stats", "sync_partial_ok").parse().unwrap();

    // Same arguments (`--replicaof` the master): loads the RDB, then PSYNC from its offset.
    replica.restart();
    let mut rc = replica.conn();
    wait_for("replication link", || {
        info_field(&mut rc, "replication", "master_link_status") == "up"
    });
    hold_mode(&mut mc, "0", Duration::from_millis(600), "a master with a replica");
    let traffic = pump.stop();
    traffic.assert_mixed();
    let now_partial: i64 = info_field(&mut mc, "stats", "sync_partial_ok").parse().unwrap();
    assert!(now_partial > partial, "the replica resynced in full, not from the backlog");
    assert_same_dataset(&master, &replica);
    assert_same_keys(&master, &replica);
    master.assert_alive();
    replica.assert_alive();
}

/// Failover: the master dies and replica A is promoted. A keeps its backlog (replica B may
/// continue from it), so it propagates rewritten; B, pointed at A, resyncs partially from that
/// backlog and ends identical. Once B is gone and A's backlog is freed (`repl-backlog-ttl 1`),
/// A may go verbatim; a new replica C attached with traffic going on ends identical too.
#[test]
fn promoted_replica() {
    let master = Server::start();
    let a = replica_of(&master, &[]);
    let b = replica_of(&master, &[]);
    let mut mc = master.conn();
    let pump = Pump::start(&master, Traffic::new(7, ""));
    hold_mode(&mut mc, "0", Duration::from_millis(800), "a master with replicas");
    let traffic = pump.stop();
    assert_same_dataset(&master, &a);
    assert_same_dataset(&master, &b);
    drop(mc);
    drop(master);

    let mut ac = a.conn();
    let _: () = redis::cmd("REPLICAOF").arg("NO").arg("ONE").query(&mut ac).expect("promote");
    let pump = Pump::start(&a, traffic);
    let end = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < end {
        let i = info(&mut ac, &["replication"]);
        assert_eq!(field(&i, "role"), "master");
        assert_eq!(field(&i, "repl_backlog_active"), "1", "a promoted replica keeps its backlog");
        assert_eq!(check_mode(&mut ac), "0", "the backlog could serve a partial resync");
        std::thread::sleep(Duration::from_millis(20));
    }
    let partial: i64 = info_field(&mut ac, "stats", "sync_partial_ok").parse().unwrap();
    let mut bc = b.conn();
    let _: () = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(a.port).query(&mut bc).unwrap();
    wait_for("B's link to A", || info_field(&mut bc, "replication", "master_link_status") == "up");
    let now_partial: i64 = info_field(&mut ac, "stats", "sync_partial_ok").parse().unwrap();
    assert!(now_partial > partial, "B resynced in full, not from A's backlog");
    hold_mode(&mut ac, "0", Duration::from_millis(500), "a master with a replica");
    let traffic = pump.stop();
    assert_same_dataset(&a, &b);
    assert_same_keys(&a, &b);

    // B gone and the backlog freed: nothing listens, verbatim.
    drop(bc);
    drop(b);
    set_active_expire(&mut ac, true);
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("repl-backlog-ttl").arg("1").query(&mut ac).unwrap();
    let pump = Pump::start(&a, traffic);
    wait_mode(&mut ac, "1", "a promoted replica without replicas whose backlog was freed");
    add_filler(&mut ac);
    let c = replica_of(&a, &[]);
    assert_eq!(check_mode(&mut ac), "0", "a replica is connected");
    hold_mode(&mut ac, "0", Duration::from_millis(1000), "a master with a replica");
    let traffic = pump.stop();
    traffic.assert_mixed();
    assert_same_dataset(&a, &c);
    assert_same_keys(&a, &c);
    a.assert_alive();
    c.assert_alive();
}

fn ints_of(v: &Value) -> Vec<i64> {
    match v {
        Value::Array(items) => items
            .iter()
            .take(5)
            .map(|x| match x {
                Value::Int(i) => *i,
                other => panic!("not an integer: {other:?} in {v:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

/// Inside `MULTI`/`EXEC`, `EVAL` and `FCALL`, calls in verbatim mode answer exactly as
/// always; then a replica attaches while transactions and scripts go on, and ends identical.
#[test]
fn multi_and_lua_in_verbatim_mode() {
    let master = Server::start();
    let mut mc = master.conn();
    add_filler(&mut mc);
    let pump = Pump::start(&master, Traffic::new(8, "bg:"));
    wait_mode(&mut mc, "1", "a lone master");
    let mut traffic = pump.stop();

    // A transaction (WAIT is ignored inside one).
    let replies: Vec<Value> = redis::pipe()
        .atomic()
        .cmd("RL.PERIOD")
        .arg(&["m:per", "3", "1h", "COST", "2"])
        .cmd("RL.PERIOD")
        .arg(&["m:per", "3", "1h", "COST", "2"])
        .cmd("RL.TOKEN")
        .arg(&["m:tok", "2", "1", "1h"])
        .cmd("RL.TOKEN")
        .arg(&["m:tok", "2", "1", "1h"])
        .cmd("RL.TOKEN")
        .arg(&["m:tok", "2", "1", "1h", "WAIT", "10s"])
        .cmd("RL.ALL")
        .arg(&["2", "m:a", "m:b", "TOKEN", "2", "1", "1h", "PERIOD", "1", "1h"])
        .cmd("RL.ALL")
        .arg(&["2", "m:a", "m:b", "TOKEN", "2", "1", "1h", "PERIOD", "1", "1h"])
        .cmd("RL.REFUND")
        .arg(&["m:per", "1"])
        .cmd("CL.THROTTLE")
        .arg(&["m:gc", "1", "1", "3600"])
        .cmd("RL.ACQUIRE")
        .arg(&["m:ls", "1", "1h", "ID", "job"])
        .cmd("RL.ACQUIRE")
        .arg(&["m:ls", "1", "1h"])
        .query(&mut mc)
        .expect("MULTI/EXEC");
    let heads: Vec<Vec<i64>> = replies.iter().map(|r| ints_of(r)[..4].to_vec()).collect();
    assert_eq!(
        heads,
        [
            vec![1, 3, 1, 0],
            heads[1].clone(), // refused: [0, 3, 1, until the window ends]
            vec![1, 2, 1, 0],
            vec![1, 2, 0, 0],
            heads[4].clone(), // refused at once despite WAIT
            vec![1, 1, 0, 0], // binding: the PERIOD 1, now used up
            heads[6].clone(), // refused by the PERIOD 1
            vec![1, 3, 1, 0], // after giving one back: a DRYRUN COST 1 leaves 1 of 3
            vec![0, 2, 1, -1],
            vec![1, 1, 0, 0],
            heads[10].clone(),
        ]
    );
    assert_eq!(heads[1][..3], [0, 3, 1]);
    assert!(heads[1][3] > 3_000_000, "{:?}", heads[1]);
    assert_eq!(heads[4][..3], [0, 2, 0]);
    assert!(heads[4][3] > 3_000_000, "{:?}", heads[4]);
    assert_eq!(heads[6][..3], [0, 1, 0]);
    assert_eq!(heads[10][..3], [0, 1, 0]);
    let Value::Array(lease) = &replies[9] else { panic!("{:?}", replies[9]) };
    assert_eq!(lease[5], Value::BulkString(b"job".to_vec()));
    let Value::Array(lease) = &replies[10] else { panic!("{:?}", replies[10]) };
    assert_eq!(lease[5], Value::Nil);

    // A script.
    let script = "local r = {} \
        r[1] = redis.call('RL.TOKEN', KEYS[1], 2, 1, '1h') \
        r[2] = redis.call('RL.TOKEN', KEYS[1], 2, 1, '1h') \
        r[3] = redis.call('RL.TOKEN', KEYS[1], 2, 1, '1h') \
        r[4] = redis.call('RL.SLIDE', KEYS[2], 3, '1h', 'COST', 2) \
        r[5] = redis.call('RL.LEAKY', KEYS[3], 3, 1, '1h', 'NODELAY') \
        r[6] = redis.call('RL.REFUND', KEYS[1], 1) \
        r[7] = redis.call('RL.ACQUIRE', KEYS[4], 2, '1h', 'ID', 'w1') \
        r[8] = {redis.call('RL.RELEASE', KEYS[4], 'w1')} \
        r[9] = {redis.call('RL.RELEASE', KEYS[4], 'w1')} \
        return r";
    let replies: Vec<Value> = redis::cmd("EVAL")
        .arg(script)
        .arg(4)
        .arg(&["s:tok", "s:sld", "s:lky", "s:ls"])
        .query(&mut mc)
        .expect("EVAL");
    let heads: Vec<Vec<i64>> =
        replies.iter().map(|r| ints_of(r).into_iter().take(4).collect()).collect();
    assert_eq!(
        heads,
        [
            vec![1, 2, 1, 0],
            vec![1, 2, 0, 0],
            heads[2].clone(),
            vec![1, 3, 1, 0],
            vec![1, 3, 2, 0],
            vec![1, 2, 0, 0], // one token back: a DRYRUN COST 1 takes it
            vec![1, 2, 1, 0],
            vec![1],
            vec![0],
        ]
    );
    assert_eq!(heads[2][..3], [0, 2, 0]);

    // A function.
    let library = "#!lua name=rltest\n\
        redis.register_function('rl_token', function(keys, args) \
          return redis.call('RL.TOKEN', keys[1], args[1], args[2], args[3]) end)";
    let _: String = redis::cmd("FUNCTION").arg("LOAD").arg(library).query(&mut mc).unwrap();
    for remaining in [1, 0] {
        let reply: Vec<i64> = redis::cmd("FCALL")
            .arg(&["rl_token", "1", "f:tok", "2", "1", "1h"])
            .query(&mut mc)
            .expect("FCALL");
        assert_eq!(reply[..4], [1, 2, remaining, 0]);
    }
    assert_eq!(check_mode(&mut mc), "1", "still verbatim after transactions and scripts");

    // Short-period transactions and scripts without AT, then a replica attaches mid-way.
    traffic.bundles = true;
    let pump = Pump::start(&master, traffic);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(check_mode(&mut mc), "1", "transactions and scripts in verbatim mode");
    let replica = replica_of(&master, &[]);
    assert_eq!(check_mode(&mut mc), "0", "a replica is connected");
    hold_mode(&mut mc, "0", Duration::from_millis(1000), "a master with a replica");
    let traffic = pump.stop();
    traffic.assert_mixed();
    assert_same_dataset(&master, &replica);
    assert_same_keys(&master, &replica);
    master.assert_alive();
    replica.assert_alive();
}
