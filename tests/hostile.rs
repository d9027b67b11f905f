//! Hostile input: 100 000 generated argument vectors (random commands, arities, bytes
//! including invalid UTF-8, empty strings, huge and negative numbers, repeated and unknown
//! options). Every reply must be a well-formed reply or an error starting with an upper-case
//! code, and the server must answer `PING` after every batch (a panic would kill it).

mod common;
use common::*;
use redis::ConnectionLike;

const VECTORS: usize = 100_000;
const BATCH: usize = 1000;

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a [u8]]) -> &'a [u8] {
        items[self.below(items.len())]
    }
}

const COMMANDS: &[&[u8]] = &[
    b"RL.TOKEN",
    b"RL.PERIOD",
    b"RL.LEAKY",
    b"CL.THROTTLE",
    b"RL.PEEK",
    b"RL.INFO",
    b"RL.RESTORE",
    b"RL.SLIDE",
    b"RL.ALL",
    b"RL.REFUND",
    b"RL.ACQUIRE",
    b"RL.RELEASE",
    b"rl.token",
    b"Rl.Period",
];

const TOKENS: &[&[u8]] = &[
    b"0",
    b"1",
    b"2",
    b"7",
    b"10",
    b"-1",
    b"+5",
    b"1000000000000",
    b"1000000000001",
    b"9223372036854775807",
    b"-9223372036854775808",
    b"18446744073709551616",
    b"99999999999999999999999999999999",
    b"",
    b" ",
    b"1s",
    b"1ms",
    b"1m",
    b"1h",
    b"1d",
    b"3650d",
    b"3651d",
    b"-5h",
    b"8h",
    b"1.5",
    b"1e3",
    b"0x10",
    b"abc",
    b"\xff\xfe",
    b"\xc3\x28",
    b"\x00",
    b"\r\n",
    b"COST",
    b"cost",
    b"DRYRUN",
    b"AT",
    b"STEP",
    b"ALIGN",
    b"BUCKETS",
    b"NODELAY",
    b"DELAY",
    b"253402300799999",
    b"253402300800000",
    b"4000000000000",
    b"k",
    b"key",
    b"TOKEN",
    b"PERIOD",
    b"SLIDE",
    b"LEAKY",
    b"BAN",
    b"WAIT",
    b"KEEPPERIOD",
    b"CLEAR",
    b"ID",
    b"16",
    b"17",
];

const SMALL: &[&[u8]] = &[b"1", b"2", b"3", b"5", b"10", b"100"];
const DURATIONS: &[&[u8]] = &[b"1", b"7", b"100", b"1s", b"1m", b"1d", b"3650d"];
const TIMES: &[&[u8]] =
    &[b"0", b"1", b"1000", b"4000000000000", b"4000000000500", b"253402300799999"];

/// A well-formed call of a random limiting command with random valid options; with some
/// probability one argument is then replaced by a hostile token.
fn structured_vector(rng: &mut Rng) -> Vec<Vec<u8>> {
    let algorithm = rng.below(5);
    // Mostly keys of this algorithm; sometimes a shared one, to meet other algorithms.
    let own: [&[u8]; 5] = [b"t\xff", b"p\xff", b"l\xff", b"g\xff", b"s\xff"];
    let key: &[u8] = if rng.below(10) == 0 { b"shared" } else { own[algorithm] };
    let mut v: Vec<&[u8]> = match algorithm {
        0 => vec![b"RL.TOKEN", key, rng.pick(SMALL), rng.pick(SMALL), rng.pick(DURATIONS)],
        1 => vec![b"RL.PERIOD", key, rng.pick(SMALL), rng.pick(DURATIONS)],
        2 => vec![b"RL.LEAKY", key, rng.pick(SMALL), rng.pick(SMALL), rng.pick(DURATIONS)],
        4 => vec![b"RL.SLIDE", key, rng.pick(SMALL), rng.pick(DURATIONS)],
        _ => vec![b"CL.THROTTLE", key, rng.pick(SMALL), rng.pick(SMALL), rng.pick(SMALL)],
    };
    let cell = v[0] == b"CL.THROTTLE";
    if cell && rng.below(2) == 0 {
        v.push(rng.pick(SMALL));
    }
    if !cell && rng.below(2) == 0 {
        v.extend([&b"COST"[..], rng.pick(&[b"0", b"1", b"2", b"50", b"1000000000000"])]);
    }
    if rng.below(2) == 0 {
        v.extend([&b"AT"[..], rng.pick(TIMES)]);
    }
    if rng.below(4) == 0 {
        v.push(b"DRYRUN");
    }
    match (v[0], rng.below(3)) {
        (b"RL.TOKEN", 0) => v.push(b"STEP"),
        (b"RL.PERIOD", 0) => v.extend([&b"ALIGN"[..], rng.pick(&[b"0", b"-1", b"+1", b"1h"])]),
        (b"RL.LEAKY", 0) => v.push(b"NODELAY"),
        (b"RL.LEAKY", 1) => v.extend([&b"DELAY"[..], rng.pick(&[b"0", b"1", b"3"])]),
        (b"RL.SLIDE", 0) => {
            v.extend([&b"BUCKETS"[..], rng.pick(&[b"1", b"2", b"5", b"7", b"1000"])])
        }
        _ => {}
    }
    if rng.below(5) == 0 {
        let i = 2 + rng.below(v.len() - 2);
        v[i] = rng.pick(TOKENS);
    }
    v.into_iter().map(<[u8]>::to_vec).collect()
}

/// A well-formed `RL.ALL` over 1–4 keys made of structured single calls (their keys and
/// arguments become the groups); with some probability one argument is then replaced by a
/// hostile token, or `numkeys` disagrees with the groups.
fn all_vector(rng: &mut Rng) -> Vec<Vec<u8>> {
    let n = 1 + rng.below(4);
    let (mut keys, mut groups): (Vec<Vec<u8>>, Vec<Vec<u8>>) = (Vec::new(), Vec::new());
    while keys.len() < n {
        let single = structured_vector(rng);
        let group: &[u8] = match single[0].as_slice() {
            b"RL.TOKEN" => b"TOKEN",
            b"RL.PERIOD" => b"PERIOD",
            b"RL.SLIDE" => b"SLIDE",
            b"RL.LEAKY" => b"LEAKY",
            _ => continue,
        };
        let mut key = single[1].clone();
        key.push(b'0' + rng.below(3) as u8);
        keys.push(key);
        groups.push(group.to_vec());
        groups.extend(single[2..].iter().cloned());
    }
    let numkeys = if rng.below(10) == 0 { rng.below(18) } else { n };
    let mut v = vec![b"RL.ALL".to_vec(), numkeys.to_string().into_bytes()];
    v.extend(keys);
    v.extend(groups);
    if rng.below(5) == 0 {
        let i = 1 + rng.below(v.len() - 1);
        v[i] = rng.pick(TOKENS).to_vec();
    }
    v
}

/// `WAIT` blocks the pipelined client until admitted or timed out: whatever follows a `WAIT`
/// token becomes a 1 ms timeout, so no call waits longer (invalid `WAIT` values are covered by
/// `tests/wait.rs`).
fn never_wait_long(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    for i in 1..v.len() {
        if v[i - 1].eq_ignore_ascii_case(b"WAIT") {
            v[i] = b"1".to_vec();
        }
    }
    v
}

fn random_vector(rng: &mut Rng) -> Vec<Vec<u8>> {
    never_wait_long(any_vector(rng))
}

fn any_vector(rng: &mut Rng) -> Vec<Vec<u8>> {
    match rng.below(6) {
        0..=2 => return structured_vector(rng),
        3 => return all_vector(rng),
        _ => {}
    }
    let mut v = vec![rng.pick(COMMANDS).to_vec()];
    // Keys from a small set so commands meet each other's limiters and other types.
    let key: &[u8] = [&b"k"[..], b"k2", b"str", b"\xff\x00key", b""][rng.below(5)];
    let arity = rng.below(14);
    if arity > 0 {
        v.push(key.to_vec());
    }
    for _ in 1..arity {
        if rng.below(10) == 0 {
            let len = rng.below(12);
            v.push((0..len).map(|_| rng.next() as u8).collect());
        } else {
            v.push(rng.pick(TOKENS).to_vec());
        }
    }
    v
}

fn check(reply: &Value, depth: usize) -> Result<(), String> {
    match reply {
        Value::Nil
        | Value::Int(_)
        | Value::Okay
        | Value::BulkString(_)
        | Value::SimpleString(_) => Ok(()),
        Value::Array(items) if depth < 3 => items.iter().try_for_each(|i| check(i, depth + 1)),
        Value::Map(pairs) if depth < 3 => pairs
            .iter()
            .try_for_each(|(k, v)| check(k, depth + 1).and_then(|_| check(v, depth + 1))),
        other => Err(format!("unexpected reply {other:?}")),
    }
}

#[test]
fn random_argument_vectors_never_crash() {
    let s = Server::start();
    let mut c = s.conn();
    let _: () = redis::cmd("SET").arg("str").arg("v").query(&mut c).unwrap();
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let (mut ok, mut errors) = (0usize, 0usize);
    for _ in 0..VECTORS / BATCH {
        let mut pipe = redis::pipe();
        for _ in 0..BATCH {
            let v = random_vector(&mut rng);
            let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
            pipe.add_command(cmd(&refs));
        }
        // Sent as one packed pipeline; error replies come back as `Value::ServerError`.
        let replies: Vec<redis::RedisResult<Value>> =
            match c.req_packed_commands(&pipe.get_packed_pipeline(), 0, BATCH) {
                Ok(values) => values.into_iter().map(Ok).collect(),
                Err(e) => panic!("pipeline failed: {e}\n{}", s.log()),
            };
        for r in replies {
            match r {
                Ok(Value::ServerError(e)) => {
                    let code = e.code();
                    assert!(
                        code.chars().next().is_some_and(|ch| ch.is_ascii_uppercase()),
                        "error without an upper-case code: {e:?}"
                    );
                    errors += 1;
                }
                Ok(v) => {
                    check(&v, 0).unwrap();
                    ok += 1;
                }
                Err(e) => panic!("{e}"),
            }
        }
        s.assert_alive();
    }
    assert_eq!(ok + errors, VECTORS);
    assert!(ok > 1000 && errors > 1000, "ok {ok}, errors {errors}");
    // Every command was reached with valid arguments, RL.ALL included.
    for command in ["token", "period", "slide", "leaky", "all"] {
        let field = format!("ratelimit_{command}_admitted");
        let admitted: u64 = info_field(&mut c, "ratelimit", &field).parse().unwrap();
        assert!(admitted > 100, "{field}: {admitted}");
    }
    eprintln!("hostile input: {VECTORS} vectors, {ok} replies, {errors} errors");
}

/// Mutated `DUMP` payloads with a *valid* checksum reach the module's `rdb_load`, and mutated
/// `RL.RESTORE` payloads reach the decoder directly. Each is refused with an error or yields
/// a limiter that every command can then use; the server never crashes.
#[test]
fn mutated_payloads_with_valid_checksums_reach_the_decoder_safely() {
    assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    let s = Server::start();
    let mut c = s.conn();
    let seeds = [
        "RL.TOKEN s 10 3 7 COST 4 AT 4000000000000",
        "RL.TOKEN s 10 3 7 STEP COST 4 AT 4000000000000",
        "RL.PERIOD s 10 1d ALIGN -5h COST 4 AT 4000000000000",
        "RL.SLIDE s 10 1m COST 4 AT 4000000000000",
        "RL.SLIDE s 10 1m BUCKETS 6 COST 4 AT 4000000000000",
        "RL.LEAKY s 10 3 7 DELAY 2 COST 4 AT 4000000000000",
        "CL.THROTTLE s 15 30 60 3 AT 4000000000000",
        "RL.TOKEN s 2 1 1s COST 2 AT 4000000000000; RL.TOKEN s 2 1 1s BAN 1h AT 4000000000000",
    ];
    let mut rng = Rng(0xfeed_beef_1234_5678);
    let (mut refused, mut accepted) = (0usize, 0usize);
    for seed in seeds {
        let _: () = redis::cmd("DEL").arg("s").query(&mut c).unwrap();
        for call in seed.split(';') {
            line(&mut c, call);
        }
        let dump: Vec<u8> = redis::cmd("DUMP").arg("s").query(&mut c).unwrap();
        let body_len = dump.len() - 10; // RDB type + value, then 2-byte version, 8-byte CRC
        for round in 0..600 {
            let mut body = dump[..body_len].to_vec();
            for _ in 0..1 + rng.below(3) {
                if body.len() < 2 {
                    break;
                }
                let i = 1 + rng.below(body.len() - 1); // keep the RDB type byte
                match rng.below(3) {
                    0 => body[i] = rng.next() as u8,
                    1 => body[i] ^= 1 << rng.below(8),
                    _ => body.truncate(i),
                }
            }
            if round % 50 == 0 {
                body.truncate(1 + rng.below(body.len()));
            }
            let mut payload = body.clone();
            payload.extend_from_slice(&dump[body_len..body_len + 2]);
            payload.extend_from_slice(&crc64(&payload).to_le_bytes());
            let restored: redis::RedisResult<()> =
                redis::cmd("RESTORE").arg("m").arg(0).arg(&payload).arg("REPLACE").query(&mut c);
            match restored {
                Err(_) => refused += 1,
                Ok(()) => {
                    accepted += 1;
                    // Whatever was accepted must be usable by every command without harm.
                    for args in [
                        &["RL.PEEK", "m"][..],
                        &["RL.INFO", "m"],
                        &["RL.TOKEN", "m", "5", "1", "1s"],
                        &["RL.PERIOD", "m", "5", "1s"],
                        &["RL.SLIDE", "m", "5", "1s"],
                        &["RL.LEAKY", "m", "5", "1", "1s"],
                        &["CL.THROTTLE", "m", "5", "1", "1"],
                        &["DEBUG", "DIGEST-VALUE", "m"],
                        &["MEMORY", "USAGE", "m"],
                    ] {
                        let _ = run(&mut c, args);
                    }
                }
            }
        }
        s.assert_alive();
    }
    // RL.RESTORE takes the module's own encoding, without any checksum.
    for _ in 0..3000 {
        let len = rng.below(90);
        let mut payload: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if let Some(first) = payload.first_mut() {
            *first = 1; // a known format version, so the decoder gets past the first byte
        }
        if let Some(tag) = payload.get_mut(1) {
            *tag = 1 + (*tag % 5);
        }
        let r: redis::RedisResult<Value> = cmd(&[b"RL.RESTORE", b"r", &payload]).query(&mut c);
        if r.is_ok() {
            let _ = run(&mut c, &["RL.PEEK", "r"]);
            let _ = run(&mut c, &["RL.INFO", "r"]);
        }
    }
    s.assert_alive();
    eprintln!("payloads: {refused} refused, {accepted} accepted (valid CRC, mutated bodies)");
    assert!(refused > 1000, "{refused}");
}
