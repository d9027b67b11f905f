//! `docs/chart.py` (the picture in the README's algorithm guide) still drives the module: run
//! with `--no-plot` against a real server, it must report sane admitted counts for every
//! algorithm. The traffic is simulated with `AT`, so the counts are exact.

mod common;
use common::*;
use std::path::PathBuf;
use std::process::Command;

#[test]
fn chart_script_drives_every_algorithm() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = std::env::var_os("RL_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/pyenv/bin/python3"));
    assert!(python.exists(), "{} is missing: run `make examples` first", python.display());
    let server = Server::start();
    let out = Command::new(&python)
        .arg(root.join("docs/chart.py"))
        .args(["--addr", &server.addr(), "--no-plot"])
        .output()
        .expect("run docs/chart.py");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));

    // Burst of 300 at t = 0, then 5/s for 120 s (600 more); 100 per minute everywhere.
    let counts: Vec<(String, i64, i64, i64)> = text
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once(": ")?;
            let field = |f: &str| {
                rest.split(' ').find_map(|w| w.strip_prefix(f)).and_then(|v| v.parse().ok())
            };
            Some((
                name.to_string(),
                field("admitted=")?,
                field("refused=")?,
                field("burst_admitted=")?,
            ))
        })
        .collect();
    assert_eq!(counts.len(), 8, "one line per algorithm:\n{text}");
    for (name, admitted, refused, burst) in &counts {
        assert_eq!(admitted + refused, 900, "{name}");
        assert_eq!(*burst, 100, "{name}: the burst admits exactly the limit");
        // At most the limit per started minute (3 windows), at least the limit per full minute.
        assert!((200..=301).contains(admitted), "{name}: admitted {admitted}");
    }
    let admitted =
        |prefix: &str| counts.iter().find(|c| c.0.starts_with(prefix)).map(|c| c.1).expect(prefix);
    // The fixed window from the first call admits 100 at t=0, 100 from t=60 s, 1 at t=120 s;
    // aligned to minutes (boundaries at t=40 s and 100 s) it gets a third full window.
    assert_eq!(admitted("RL.PERIOD 100 1m"), 201);
    assert_eq!(admitted("RL.PERIOD 100 1m ALIGN"), 300);
}
