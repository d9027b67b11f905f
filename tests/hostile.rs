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

fn random_vector(rng: &mut Rng) -> Vec<Vec<u8>> {
    if rng.below(2) == 0 {
        return structured_vector(rng);
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
    eprintln!("hostile input: {VECTORS} vectors, {ok} replies, {errors} errors");
}
