//! Policy table: parsing, resolution, replacement, deletion, the bound, counters, the codec
//! (unit tests and properties against a brute-force model of the table).

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

use crate::store::packed::PackedLimiter;

fn target(key: Option<&[u8]>) -> Target<'_> {
    key.map_or(Target::Policy, Target::Override)
}

fn words(text: &str) -> Vec<&[u8]> {
    text.split(' ').filter(|w| !w.is_empty()).map(str::as_bytes).collect()
}

fn definition(text: &str) -> Result<(Definition, Option<SetTarget>), ArgError> {
    Definition::parse(&words(text), 100_000)
}

fn def(text: &str) -> Definition {
    definition(text).unwrap().0
}

#[test]
fn a_definition_is_the_all_grammar_with_ban_and_shadow() {
    let (d, key) = definition("TOKEN 10 1 1s STEP BAN 1m SHADOW FOR user:1").unwrap();
    assert_eq!(key, Some(SetTarget::Override(b"user:1".to_vec())));
    assert!(d.shadow);
    assert_eq!(d.ban_ms, Some(60_000));
    assert_eq!(d.algorithm(), Algorithm::Token);
    let fields: BTreeMap<_, _> = d.fields().into_iter().collect();
    assert_eq!(fields["capacity"], 10);
    assert_eq!(fields["period_ms"], 1000);
    assert_eq!(fields["step"], 1);
    assert_eq!(fields["ban_ms"], 60_000);
    assert_eq!(fields["shadow"], 1);
    // Stored arguments: everything but FOR key, SHADOW last.
    let args: Vec<&[u8]> = d.args().iter().map(Vec::as_slice).collect();
    assert_eq!(args, words("TOKEN 10 1 1s STEP BAN 1m SHADOW"));
    for text in [
        "period 5 1d ALIGN 8h",
        "PERIOD 5 1m KEEPPERIOD",
        "SLIDE 100 1m BUCKETS 60 ANCHOR FLOOR",
        "SLIDE 100 1m",
        "LEAKY 10 2 1s NODELAY",
        "LEAKY 10 2 1s DELAY 3 BAN 1h CLEAR",
        "shadow TOKEN 1 1 1",
        "FOR k PERIOD 1 1",
    ] {
        assert!(definition(text).is_ok(), "{text}");
    }
    let (d, key) = definition("SHADOW FOR FOR PERIOD 1 1").unwrap();
    assert_eq!(
        (d.shadow, key),
        (true, Some(SetTarget::Override(b"FOR".to_vec()))),
        "a key may be named FOR"
    );
    let d = def("PERIOD 5 1d ALIGN SHADOW");
    assert!(d.shadow && matches!(d.limit, Limit::Period(p) if p.align == Some(0)));
}

#[test]
fn a_bad_definition_is_refused_whole() {
    for text in [
        "",
        "GCRA 1 1 1",
        "TOKEN 10 1",
        "TOKEN 0 1 1s",
        "TOKEN 10 1 1s COST 2",
        "TOKEN 10 1 1s DRYRUN",
        "TOKEN 10 1 1s AT 5",
        "TOKEN 10 1 1s WAIT 1s",
        "TOKEN 10 1 1s FRESH",
        "TOKEN 10 1 1s BUCKETS 2",
        "TOKEN 10 1 1s CLEAR",
        "TOKEN 10 1 1s SHADOW SHADOW",
        "TOKEN 10 1 1s FOR a FOR b",
        "TOKEN 10 1 1s FOR",
        "TOKEN 10 1 1s PERIOD 1 1",
        "SLIDE 10 1s BUCKETS 3",
        "LEAKY 10 1 1s DELAY 11",
    ] {
        assert!(definition(text).is_err(), "{text:?}");
    }
    assert_eq!(
        definition("TOKEN 1 1 1 COST 1").unwrap_err().to_string(),
        "ERR syntax error: a policy holds no COST (give it to RL.HIT)"
    );
}

#[test]
fn names_are_one_word() {
    for good in ["free", "tier.pro-2", "A_b", &"x".repeat(64)] {
        assert!(valid_name(good.as_bytes()), "{good}");
    }
    for bad in ["", "a b", "a:b", "é", &"x".repeat(65), "a\n"] {
        assert!(!valid_name(bad.as_bytes()), "{bad}");
    }
    let mut t = PolicyTable::new();
    assert_eq!(
        t.set(b"a:b", Target::Policy, def("TOKEN 1 1 1"), 10),
        Err(PolicyError::BadName(b"a:b".to_vec()))
    );
}

#[test]
fn resolution_prefers_the_key_override() {
    let mut t = PolicyTable::new();
    t.set(b"free", Target::Policy, def("TOKEN 10 1 1s"), 100).unwrap();
    assert_eq!(
        t.set(b"pro", Target::Override(b"k"), def("TOKEN 1 1 1"), 100),
        Err(PolicyError::NoSuchPolicy(b"pro".to_vec())),
        "an override needs its policy"
    );
    t.set(b"free", Target::Override(b"vip"), def("PERIOD 1000 1m"), 100).unwrap();
    assert_eq!(t.resolve(b"free", b"someone").unwrap().definition, &def("TOKEN 10 1 1s"));
    assert_eq!(t.resolve(b"free", b"vip").unwrap().definition, &def("PERIOD 1000 1m"));
    assert!(t.resolve(b"nope", b"vip").is_none());
    assert_eq!(t.get(b"free", Target::Override(b"vip")), Some(&def("PERIOD 1000 1m")));
    assert_eq!(t.get(b"free", Target::Override(b"someone")), None);
    assert_eq!(t.entries(), 2);
}

#[test]
fn set_replaces_the_whole_definition_and_keeps_overrides_and_counters() {
    let mut t = PolicyTable::new();
    t.set(b"p", Target::Policy, def("TOKEN 10 1 1s BAN 1m SHADOW"), 100).unwrap();
    t.set(b"p", Target::Override(b"k"), def("TOKEN 5 1 1s"), 100).unwrap();
    t.resolve(b"p", b"x").unwrap().record(&[1, 10, 9, 0, 100], false);
    t.set(b"p", Target::Policy, def("PERIOD 3 1m"), 100).unwrap();
    let d = t.get(b"p", Target::Policy).unwrap();
    assert_eq!((d.ban_ms, d.shadow), (None, false), "options not repeated are dropped");
    assert_eq!(t.get(b"p", Target::Override(b"k")), Some(&def("TOKEN 5 1 1s")));
    assert_eq!(t.stats(b"p").unwrap().0.calls, 1);
    assert_eq!(t.entries(), 2);
}

#[test]
fn delete_without_for_removes_the_overrides() {
    let mut t = PolicyTable::new();
    t.set(b"p", Target::Policy, def("TOKEN 10 1 1s"), 100).unwrap();
    t.set(b"p", Target::Override(b"a"), def("TOKEN 5 1 1s"), 100).unwrap();
    t.set(b"p", Target::Override(b"b"), def("TOKEN 5 1 1s"), 100).unwrap();
    assert!(t.delete(b"p", Target::Override(b"a")));
    assert!(!t.delete(b"p", Target::Override(b"a")));
    assert_eq!(t.entries(), 2);
    assert!(t.delete(b"p", Target::Policy));
    assert!(!t.delete(b"p", Target::Policy));
    assert_eq!(t.entries(), 0);
    assert!(t.is_empty());
    t.set(b"p", Target::Policy, def("TOKEN 10 1 1s"), 100).unwrap();
    assert_eq!(
        t.get(b"p", Target::Override(b"b")),
        None,
        "a policy defined again has no old overrides"
    );
}

#[test]
fn the_table_is_bounded_but_replacing_needs_no_room() {
    let mut t = PolicyTable::new();
    t.set(b"a", Target::Policy, def("TOKEN 1 1 1"), 2).unwrap();
    t.set(b"a", Target::Override(b"k"), def("TOKEN 1 1 1"), 2).unwrap();
    assert_eq!(
        t.set(b"b", Target::Policy, def("TOKEN 1 1 1"), 2),
        Err(PolicyError::Full { max: 2 })
    );
    assert_eq!(
        t.set(b"a", Target::Override(b"j"), def("TOKEN 1 1 1"), 2),
        Err(PolicyError::Full { max: 2 })
    );
    t.set(b"a", Target::Policy, def("TOKEN 2 1 1"), 2).unwrap();
    t.set(b"a", Target::Override(b"k"), def("TOKEN 2 1 1"), 2).unwrap();
    assert_eq!(t.entries(), 2);
}

#[test]
fn counters_count_by_outcome() {
    let mut s = PolicyStats::default();
    s.record(&[1, 10, 9, 0, 0], false);
    s.record(&[1, 10, 2, 0, 0], false); // 20 % left: near
    s.record(&[1, 10, 3, 0, 0], false);
    s.record(&[0, 10, 0, 5, 0], false);
    s.record(&[0, 10, 0, 5, 0], true);
    assert_eq!(
        s,
        PolicyStats { calls: 5, admitted: 3, limited: 1, shadow_limited: 1, near_limit: 1 }
    );
    let mut t = PolicyTable::new();
    t.set(b"p", Target::Policy, def("TOKEN 1 1 1"), 10).unwrap();
    t.resolve(b"p", b"k").unwrap().record(&[1, 1, 0, 0, 0], false);
    assert_eq!(t.stats(b"p").unwrap().0.near_limit, 1);
    t.reset_stats();
    assert_eq!(t.stats(b"p"), Some((PolicyStats::default(), None)));
}

#[test]
fn a_hit_judges_as_the_direct_command() {
    let d = def("TOKEN 3 1 1s BAN 1m");
    let direct = Request::parse(
        crate::grammar::request::Command::Token,
        &words("3 1 1s COST 2 BAN 1m"),
        100_000,
    )
    .unwrap();
    let hit = d.request(&words("COST 2")).unwrap();
    assert_eq!(hit, direct);
    let shadow = def("TOKEN 3 1 1s BAN 1m CLEAR SHADOW").request(&words("WAIT 1s")).unwrap();
    assert_eq!((shadow.ban_ms, shadow.clear, shadow.wait_ms), (None, false, None));
    assert!(d.request(&words("FRESH")).is_err());
    assert!(d.request(&words("BAN 1s")).is_err());
    // Judged through the same core function, the verdicts agree call by call.
    let (mut a, mut b): (Option<PackedLimiter>, Option<PackedLimiter>) = (None, None);
    for now in [0, 1, 2, 3, 900, 1500] {
        let va = judge_key(a.as_mut(), &hit, now).unwrap();
        let vb = judge_key(b.as_mut(), &direct, now).unwrap();
        assert_eq!(va.reply, vb.reply);
        for (slot, v) in [(&mut a, va), (&mut b, vb)] {
            if let crate::steps::judge::Change::Created { limiter, .. } = v.change {
                *slot = Some(PackedLimiter::new(limiter));
            }
        }
    }
}

#[test]
fn the_codec_round_trips_and_refuses_garbage() {
    let mut t = PolicyTable::new();
    t.set(b"free", Target::Policy, def("TOKEN 10 1 1s BAN 1m"), 100).unwrap();
    t.set(b"free", Target::Override(b"\xff\x00bin"), def("SLIDE 5 1m BUCKETS 6 SHADOW"), 100)
        .unwrap();
    t.set(b"pro", Target::Policy, def("LEAKY 100 10 1s NODELAY"), 100).unwrap();
    let bytes = t.encode();
    let back = PolicyTable::decode(&bytes).unwrap();
    assert_eq!(back, t);
    assert_eq!(PolicyTable::decode(&PolicyTable::new().encode()).unwrap(), PolicyTable::new());
    assert!(PolicyTable::decode(&[]).is_err());
    assert!(PolicyTable::decode(&[2]).is_err(), "unknown version");
    for cut in 1..bytes.len() {
        let _ = PolicyTable::decode(&bytes[..cut]); // never panics
    }
    assert!(PolicyTable::decode(&bytes[..bytes.len() - 1]).is_err());
}

/// One operation on the table.
#[derive(Debug, Clone)]
enum Op {
    Set(u8, Option<u8>, u8),
    Del(u8, Option<u8>),
}

const DEFS: [&str; 4] =
    ["TOKEN 10 1 1s", "PERIOD 5 1m SHADOW", "SLIDE 3 1s BUCKETS 4", "LEAKY 4 1 1s BAN 1s"];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3u8, proptest::option::of(0..3u8), 0..4u8).prop_map(|(n, k, d)| Op::Set(n, k, d)),
        (0..3u8, proptest::option::of(0..3u8)).prop_map(|(n, k)| Op::Del(n, k)),
    ]
}

proptest! {
    /// The table agrees with a brute-force model (a map of policies, a map of overrides),
    /// stays within its bound, and its codec round-trips every state.
    #[test]
    fn the_table_matches_a_model(ops in proptest::collection::vec(op(), 0..40), max in 1..6usize) {
        let mut t = PolicyTable::new();
        let mut policies: BTreeMap<u8, usize> = BTreeMap::new();
        let mut overrides: BTreeMap<(u8, u8), usize> = BTreeMap::new();
        let name = |n: u8| vec![b'p', b'0' + n];
        let key = |k: u8| vec![b'k', k];
        for op in ops {
            match op {
                Op::Set(n, k, d) => {
                    let result = t.set(&name(n), target(k.map(key).as_deref()), def(DEFS[d as usize]), max);
                    let size = policies.len() + overrides.len();
                    let expected = match k {
                        None if policies.contains_key(&n) => { policies.insert(n, d as usize); Ok(()) }
                        None if size >= max => Err(PolicyError::Full { max }),
                        None => { policies.insert(n, d as usize); Ok(()) }
                        Some(_) if !policies.contains_key(&n) => Err(PolicyError::NoSuchPolicy(name(n))),
                        Some(k) if overrides.contains_key(&(n, k)) => { overrides.insert((n, k), d as usize); Ok(()) }
                        Some(_) if size >= max => Err(PolicyError::Full { max }),
                        Some(k) => { overrides.insert((n, k), d as usize); Ok(()) }
                    };
                    prop_assert_eq!(result, expected);
                }
                Op::Del(n, k) => {
                    let removed = t.delete(&name(n), target(k.map(key).as_deref()));
                    let expected = match k {
                        None => {
                            overrides.retain(|(p, _), _| *p != n);
                            policies.remove(&n).is_some()
                        }
                        Some(k) => overrides.remove(&(n, k)).is_some(),
                    };
                    prop_assert_eq!(removed, expected);
                }
            }
            prop_assert_eq!(t.entries(), policies.len() + overrides.len());
            prop_assert!(t.entries() <= max);
        }
        for n in 0..3u8 {
            for k in 0..3u8 {
                let resolved = t.resolve(&name(n), &key(k)).map(|r| r.definition.clone());
                let expected = policies.get(&n).map(|d| {
                    def(DEFS[*overrides.get(&(n, k)).unwrap_or(d)])
                });
                prop_assert_eq!(resolved, expected);
            }
        }
        let names: Vec<Vec<u8>> = t.names().into_iter().map(<[u8]>::to_vec).collect();
        prop_assert_eq!(names, policies.keys().map(|n| name(*n)).collect::<Vec<_>>());
        let back = PolicyTable::decode(&t.encode()).unwrap();
        prop_assert_eq!(back, t);
    }
}

#[test]
fn all_takes_policy_groups() {
    use crate::grammar::request::AllRequest;
    let free = def("TOKEN 10 1 1s BAN 1m");
    let shadow = def("PERIOD 1 1m SHADOW");
    let mut resolve = |name: &[u8], key: &[u8]| match (name, key) {
        (b"free", _) => Some((free.limit.clone(), free.shadow)),
        (b"try", _) => Some((shadow.limit.clone(), shadow.shadow)),
        _ => None,
    };
    let all = AllRequest::parse_with_policies(
        &words("3 a b c POLICY free COST 2 PERIOD 5 1m POLICY try COST 3 AT 9 DRYRUN"),
        100_000,
        &mut resolve,
    )
    .unwrap();
    assert!(all.by_policy && all.dry_run);
    assert_eq!(all.at_ms, Some(9));
    assert_eq!(all.limits[0].limit, free.limit);
    assert_eq!((all.limits[0].cost, all.limits[0].ban_ms), (2, None), "no ban in RL.ALL");
    assert_eq!(all.limits[2].cost, 0, "a shadow policy never refuses in RL.ALL");
    assert!(all.limits.iter().all(|l| l.at_ms == Some(9) && l.dry_run));
    // A policy named like a group keyword is still a name.
    let mut token = |name: &[u8], _: &[u8]| (name == b"TOKEN").then(|| (free.limit.clone(), false));
    assert!(
        AllRequest::parse_with_policies(&words("1 a POLICY TOKEN"), 100_000, &mut token).is_ok()
    );
    let mut err = |text: &str| {
        AllRequest::parse_with_policies(&words(text), 100_000, &mut resolve)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(err("1 a POLICY nope"), "ERR no such policy 'nope'");
    assert_eq!(err("2 a b POLICY free POLICY"), "ERR syntax error: POLICY needs a value");
    assert_eq!(err("1 a POLICY"), "ERR wrong number of arguments", "under RL.ALL's arity");
    assert!(err("1 a POLICY free BAN 1s").contains("BAN"));
    assert!(err("1 a POLICY free WAIT 1s").contains("WAIT"));
    assert!(!AllRequest::parse(&words("1 a TOKEN 1 1 1"), 100_000).unwrap().by_policy);
    assert_eq!(
        AllRequest::parse(&words("1 a POLICY free"), 100_000).unwrap_err().to_string(),
        "ERR no such policy 'free'"
    );
}

/// A random limit in the group grammar and the same as the direct command's arguments.
fn limit_text() -> impl Strategy<Value = (String, crate::grammar::request::Command, String)> {
    use crate::grammar::request::Command;
    let n = || 1..20u64;
    let d = || prop_oneof![Just("7"), Just("1s"), Just("60"), Just("1m")];
    prop_oneof![
        (n(), n(), d(), any::<bool>()).prop_map(|(c, r, p, step)| {
            let rest = format!("{c} {r} {p}{}", if step { " STEP" } else { "" });
            (format!("TOKEN {rest}"), Command::Token, rest)
        }),
        (n(), d(), any::<bool>()).prop_map(|(l, p, keep)| {
            let rest = format!("{l} {p}{}", if keep { " KEEPPERIOD" } else { "" });
            (format!("PERIOD {rest}"), Command::Period, rest)
        }),
        (n(), prop_oneof![Just(""), Just(" BUCKETS 4"), Just(" BUCKETS 2 ANCHOR FLOOR")]).prop_map(
            |(l, b)| {
                let rest = format!("{l} 60s{b}");
                (format!("SLIDE {rest}"), Command::Slide, rest)
            }
        ),
        (n(), n(), d(), prop_oneof![Just(""), Just(" NODELAY")]).prop_map(|(c, r, p, m)| {
            let rest = format!("{c} {r} {p}{m}");
            (format!("LEAKY {rest}"), Command::Leaky, rest)
        }),
    ]
}

proptest! {
    /// `RL.HIT name key COST n` with a policy `limit [BAN d]` judges every call of a sequence
    /// exactly as the direct command `limit … COST n [BAN d]`: same replies, same states.
    #[test]
    fn a_hit_is_the_direct_command(
        (group, command, direct_args) in limit_text(),
        ban in proptest::option::of(prop_oneof![Just("1s"), Just("1m")]),
        calls in proptest::collection::vec((0..4u64, 0..700i64), 1..25),
    ) {
        let ban_text = ban.map(|b| format!(" BAN {b}")).unwrap_or_default();
        let Ok((definition, _)) = Definition::parse(&words(&format!("{group}{ban_text}")), 100_000) else {
            // The direct command refuses the same parameters.
            prop_assert!(Request::parse(command, &words(&direct_args), 100_000).is_err());
            return Ok(());
        };
        let (mut hit_key, mut direct_key): (Option<PackedLimiter>, Option<PackedLimiter>) = (None, None);
        let mut now = 1_800_000_000_000i64;
        for (cost, dt) in calls {
            now += dt;
            let cost = cost.to_string();
            let hit = definition.request(&words(&format!("COST {cost}"))).unwrap();
            let direct = Request::parse(
                command,
                &words(&format!("{direct_args} COST {cost}{ban_text}")),
                100_000,
            )
            .unwrap();
            prop_assert_eq!(&hit, &direct);
            let vh = judge_key(hit_key.as_mut(), &hit, now).unwrap();
            let vd = judge_key(direct_key.as_mut(), &direct, now).unwrap();
            prop_assert_eq!(vh.reply, vd.reply);
            for (slot, v) in [(&mut hit_key, vh), (&mut direct_key, vd)] {
                if let crate::steps::judge::Change::Created { limiter, .. } = v.change {
                    *slot = Some(PackedLimiter::new(limiter));
                }
            }
            prop_assert_eq!(
                hit_key.as_ref().map(|p| p.view(|l| crate::store::codec::encode_value(l, p.ban()))),
                direct_key.as_ref().map(|p| p.view(|l| crate::store::codec::encode_value(l, p.ban())))
            );
        }
    }
}

#[test]
fn overrides_are_listed_with_their_own_counters() {
    let mut t = PolicyTable::new();
    t.set(b"free", Target::Policy, def("TOKEN 10 1 1s"), 100).unwrap();
    t.set(b"free", Target::Override(b"vip"), def("period 1000 1m"), 100).unwrap();
    t.set(b"free", Target::Override(b"a"), def("TOKEN 1 1 1s"), 100).unwrap();
    t.resolve(b"free", b"vip").unwrap().record(&[1, 1000, 999, 0, 0], false);
    t.resolve(b"free", b"vip").unwrap().record(&[0, 1000, 0, 5, 0], false);
    t.resolve(b"free", b"other").unwrap().record(&[1, 10, 9, 0, 0], false);
    let listed = t.overrides(b"free").unwrap();
    let keys: Vec<&[u8]> = listed.iter().map(|e| e.key).collect();
    assert_eq!(keys, [&b"a"[..], b"vip"], "sorted by key");
    assert_eq!(listed[1].definition.text(), "period 1000 1m", "the text as SET took it");
    let vip = listed[1].stats;
    assert_eq!((vip.calls, vip.admitted, vip.limited), (2, 1, 1));
    assert_eq!(listed[0].stats, PolicyStats::default());
    assert_eq!(t.stats(b"free").unwrap().0.calls, 3, "the policy counts its overrides' calls");
    assert!(t.overrides(b"nope").is_none());
    t.reset_stats();
    assert_eq!(t.overrides(b"free").unwrap()[1].stats, PolicyStats::default());
}

#[test]
fn definitions_compare_by_what_they_judge() {
    assert!(def("token 10 1 1s").judges_as(&def("TOKEN 10 1 1000ms")));
    assert!(!def("TOKEN 10 1 1s").judges_as(&def("TOKEN 10 1 1s SHADOW")));
    assert!(!def("TOKEN 10 1 1s").judges_as(&def("TOKEN 10 1 1s BAN 1m")));
    assert_eq!(def("PERIOD 5 1d ALIGN 8h SHADOW").text(), "PERIOD 5 1d ALIGN 8h SHADOW");
}

#[test]
fn a_candidate_is_set_promoted_and_deleted() {
    let mut t = PolicyTable::new();
    let (d, target) = definition("PERIOD 3 1m CANDIDATE").unwrap();
    assert_eq!(target, Some(SetTarget::Candidate));
    assert_eq!(
        t.set(b"free", SetTarget::target(&target), d.clone(), 100),
        Err(PolicyError::NoSuchPolicy(b"free".to_vec())),
        "a candidate needs its policy"
    );
    t.set(b"free", Target::Policy, def("TOKEN 10 1 1s"), 1).unwrap();
    t.set(b"free", Target::Candidate, d.clone(), 1).unwrap();
    assert_eq!(t.entries(), 1, "a candidate takes no entry of its own");
    assert_eq!(t.get(b"free", Target::Candidate), Some(&d));
    t.set(b"free", Target::Override(b"vip"), def("TOKEN 99 1 1s"), 100).unwrap();
    let r = t.resolve(b"free", b"someone").unwrap();
    assert_eq!(r.candidate, Some(&d));
    assert!(t.resolve(b"free", b"vip").unwrap().candidate.is_none(), "overrides have none");
    t.resolve(b"free", b"x").unwrap().record_candidate(&[0, 3, 0, 100, 0]);
    t.resolve(b"free", b"x").unwrap().record_candidate(&[1, 3, 2, 0, 0]);
    let (stats, candidate) = t.stats(b"free").unwrap();
    assert_eq!(stats, PolicyStats::default(), "the enforced counters are apart");
    let fields = candidate.unwrap().candidate_fields();
    assert_eq!(
        fields,
        [
            ("candidate_calls", 2),
            ("candidate_admitted", 1),
            ("candidate_limited", 1),
            ("candidate_near_limit", 0)
        ]
    );
    assert_eq!(t.promote(b"free"), Ok(true));
    assert_eq!(t.get(b"free", Target::Policy), Some(&d));
    assert_eq!(t.get(b"free", Target::Candidate), None);
    assert_eq!(t.stats(b"free").unwrap().1, None);
    assert_eq!(t.promote(b"free"), Ok(false));
    assert_eq!(t.promote(b"nope"), Err(PolicyError::NoSuchPolicy(b"nope".to_vec())));
    t.set(b"free", Target::Candidate, def("TOKEN 1 1 1s"), 1).unwrap();
    assert!(t.delete(b"free", Target::Candidate));
    assert!(!t.delete(b"free", Target::Candidate));
    assert_eq!(t.get(b"free", Target::Policy), Some(&d), "deleting the candidate keeps the policy");
    for bad in [
        "TOKEN 1 1 1 CANDIDATE CANDIDATE",
        "TOKEN 1 1 1 CANDIDATE FOR k",
        "TOKEN 1 1 1 FOR k CANDIDATE",
    ] {
        assert!(definition(bad).is_err(), "{bad}");
    }
}

#[test]
fn get_and_del_name_a_target() {
    fn w(text: &str) -> Vec<&[u8]> {
        words(text)
    }
    assert_eq!(Target::parse(&w("")), Ok(Target::Policy));
    assert_eq!(Target::parse(&w("candidate")), Ok(Target::Candidate));
    assert_eq!(Target::parse(&w("FOR k")), Ok(Target::Override(b"k")));
    assert_eq!(Target::parse(&w("FOR")), Err(ArgError::WrongArity));
    assert_eq!(Target::parse(&w("FOR a b")), Err(ArgError::WrongArity));
    assert_eq!(Target::parse(&w("CANDIDATE x")), Err(ArgError::WrongArity));
    assert_eq!(Target::parse(&w("x")), Err(ArgError::UnknownOption(b"x".to_vec())));
}

#[test]
fn a_candidate_persists_in_the_version_1_format_a_previous_release_reads() {
    let mut t = PolicyTable::new();
    t.set(b"free", Target::Policy, def("TOKEN 10 1 1s"), 100).unwrap();
    t.set(b"free", Target::Candidate, def("PERIOD 5 1m"), 100).unwrap();
    t.set(b"free", Target::Override(b"vip"), def("TOKEN 99 1 1s"), 100).unwrap();
    let bytes = t.encode();
    assert_eq!(bytes[0], 1, "still version 1");
    assert_eq!(PolicyTable::decode(&bytes).unwrap(), t);
    // What 0.3.0 does with it: every entry is `name args… [FOR key]`, so its parser (which
    // knows no CANDIDATE) reads the candidate as an override of the reserved key.
    let mut rest = &bytes[1..];
    let mut entries = Vec::new();
    while !rest.is_empty() {
        let (count, tail) = take_u32(rest).unwrap();
        rest = tail;
        let mut args = Vec::new();
        for _ in 0..count {
            let (len, tail) = take_u32(rest).unwrap();
            args.push(tail[..len].to_vec());
            rest = &tail[len..];
        }
        entries.push(args);
    }
    assert_eq!(entries.len(), 3);
    assert!(entries.iter().all(|e| !e.iter().any(|a| a.eq_ignore_ascii_case(b"CANDIDATE"))));
    let candidate = &entries[1];
    assert_eq!(&candidate[candidate.len() - 2..], [b"FOR".to_vec(), CANDIDATE_KEY.to_vec()]);
    // And a table 0.3.0 wrote back (its rewrite: `SET free … FOR <reserved key>`) is a
    // candidate again here.
    let (d, target) = Definition::parse(&words("PERIOD 5 1m"), 100).unwrap();
    let mut back = PolicyTable::new();
    back.set(b"free", Target::Policy, def("TOKEN 10 1 1s"), 100).unwrap();
    let key = match &target {
        None => CANDIDATE_KEY,
        Some(_) => unreachable!(),
    };
    back.set(b"free", Target::Override(key), d, 100).unwrap();
    assert_eq!(back.get(b"free", Target::Candidate), Some(&def("PERIOD 5 1m")));
    assert_eq!(back.entries(), 1);
    // The AOF rewrite and replication use the keyword.
    let commands = t.set_commands();
    assert_eq!(commands[1].last(), Some(&&b"CANDIDATE"[..]));
}

#[test]
fn candidate_states_judge_in_shadow_and_are_bounded_by_reset() {
    let mut states = CandidateStates::new();
    let d = def("PERIOD 2 1s");
    let verdicts: Vec<i64> =
        (0..3).map(|i| states.judge(b"p", b"k", &d, 1, false, 1000 + i)[0]).collect();
    assert_eq!(verdicts, [1, 1, 0], "the candidate's own state, counted as the direct command");
    assert_eq!(states.judge(b"p", b"k", &d, 1, true, 1500)[0], 0, "a dry run sees it");
    assert_eq!(states.len(), 1);
    assert_eq!(states.judge(b"p", b"k", &d, 1, false, 2000)[0], 1, "a new window");
    assert_eq!(states.judge(b"q", b"k", &d, 1, true, 2000)[0], 1);
    assert_eq!(states.len(), 1, "a dry run keeps nothing");
    // A changed candidate (another algorithm) starts afresh instead of failing.
    assert_eq!(states.judge(b"p", b"k", &def("TOKEN 1 1 1h"), 1, false, 2001)[0], 1);
    states.forget(b"p");
    assert!(states.is_empty());
}

#[test]
fn deadline_is_a_call_option_of_every_limiting_command_never_of_a_policy() {
    use crate::grammar::request::{AcquireRequest, AllRequest, Command};
    for (command, args) in [
        (Command::Token, "3 1 1s DEADLINE 77"),
        (Command::Period, "3 1s DEADLINE 77"),
        (Command::Slide, "3 1s deadline 77"),
        (Command::Leaky, "3 1 1s DEADLINE 77"),
        (Command::Throttle, "1 1 1 1 DEADLINE 77"),
    ] {
        let request = Request::parse(command, &words(args), 100_000).unwrap();
        assert_eq!(request.deadline_ms, Some(77), "{command:?}");
    }
    let hit = def("TOKEN 3 1 1s").request(&words("COST 2 DEADLINE 9 WAIT 1s")).unwrap();
    assert_eq!((hit.deadline_ms, hit.wait_ms), (Some(9), Some(1000)));
    assert!(definition("TOKEN 3 1 1s DEADLINE 9").is_err(), "a policy holds no deadline");
    let acquire = AcquireRequest::parse(&words("2 1s DEADLINE 5"), 100).unwrap();
    assert_eq!(acquire.deadline_ms, Some(5));
    let all = AllRequest::parse(&words("2 a b TOKEN 1 1 1s DEADLINE 5 PERIOD 1 1s"), 100).unwrap();
    assert_eq!(all.deadline_ms, Some(5), "once for the whole call, after any group");
    assert!(all.limits.iter().all(|l| l.deadline_ms.is_none()));
    assert_eq!(
        AllRequest::parse(&words("2 a b TOKEN 1 1 1s DEADLINE 5 PERIOD 1 1s DEADLINE 6"), 100),
        Err(ArgError::RepeatedOption("DEADLINE"))
    );
}
