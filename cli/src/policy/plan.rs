//! A plan: the changes that make a node's table equal to a file, in the order they are sent.
//!
//! Two definitions are equal when they judge alike (`ratelimit-core`'s
//! `Definition::judges_as`): `token 100 10 1s` on the server and `TOKEN 100 10 1000ms` in the
//! file are no change, so `export` then `apply` changes nothing.

use std::fmt;

use super::file::{parse_definition, PolicyFile};

/// What a change is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Policy(String),
    Override(String, String),
    Candidate(String),
}

/// One change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Defined in the file, missing on the node.
    Add { entry: Entry, text: String },
    /// Defined on both, judging differently.
    Replace { entry: Entry, from: String, to: String },
    /// On the node, not in the file.
    Remove { entry: Entry, text: String },
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entry::Policy(name) => write!(f, "policy {name}"),
            Entry::Override(name, key) => write!(f, "override {name} FOR {key:?}"),
            Entry::Candidate(name) => write!(f, "candidate {name}"),
        }
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Add { entry, text } => write!(f, "+ {entry}: {text}"),
            Change::Replace { entry, from, to } => write!(f, "~ {entry}: {from} -> {to}"),
            Change::Remove { entry, text } => write!(f, "- {entry}: {text}"),
        }
    }
}

impl Change {
    /// The `RL.POLICY` command that makes it.
    pub fn command(&self) -> Vec<String> {
        let words = |text: &str| text.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let set = |entry: &Entry, text: &str| {
            let (name, tail) = match entry {
                Entry::Policy(name) => (name, vec![]),
                Entry::Override(name, key) => (name, vec!["FOR".to_string(), key.clone()]),
                Entry::Candidate(name) => (name, vec!["CANDIDATE".to_string()]),
            };
            let mut command = vec!["RL.POLICY".into(), "SET".into(), name.clone()];
            command.extend(words(text));
            command.extend(tail);
            command
        };
        match self {
            Change::Add { entry, text } | Change::Replace { entry, to: text, .. } => {
                set(entry, text)
            }
            Change::Remove { entry, .. } => {
                let mut command = vec!["RL.POLICY".to_string(), "DEL".to_string()];
                match entry {
                    Entry::Policy(name) => command.push(name.clone()),
                    Entry::Override(name, key) => {
                        command.extend([name.clone(), "FOR".into(), key.clone()])
                    }
                    Entry::Candidate(name) => command.extend([name.clone(), "CANDIDATE".into()]),
                }
                command
            }
        }
    }
}

/// Whether two definitions' texts judge alike (a text that does not parse equals only itself).
fn same(a: &str, b: &str) -> bool {
    match (parse_definition(a), parse_definition(b)) {
        (Ok(a), Ok(b)) => a.judges_as(&b),
        _ => a.split_whitespace().eq(b.split_whitespace()),
    }
}

/// The changes that make `node` equal to `file`, in the order they are safe to send: policies
/// first (an override or a candidate needs its policy), then overrides and candidates, then
/// removals of overrides and candidates of policies that stay, then removed policies (which
/// take their overrides and candidate with them).
pub fn plan(file: &PolicyFile, node: &PolicyFile) -> Vec<Change> {
    let mut changes = Vec::new();
    let mut compare =
        |entry: Entry, want: Option<&String>, have: Option<&String>| match (want, have) {
            (Some(want), None) => changes.push(Change::Add { entry, text: want.clone() }),
            (Some(want), Some(have)) if !same(want, have) => {
                changes.push(Change::Replace { entry, from: have.clone(), to: want.clone() })
            }
            (None, Some(have)) => changes.push(Change::Remove { entry, text: have.clone() }),
            _ => {}
        };
    for (name, text) in &file.policies {
        compare(Entry::Policy(name.clone()), Some(text), node.policies.get(name));
    }
    let none = Default::default();
    for (name, keys) in &file.overrides {
        let have = node.overrides.get(name).unwrap_or(&none);
        for (key, text) in keys {
            compare(Entry::Override(name.clone(), key.clone()), Some(text), have.get(key));
        }
    }
    for (name, text) in &file.candidates {
        compare(Entry::Candidate(name.clone()), Some(text), node.candidates.get(name));
    }
    // Removals, only of what a removed policy does not take with it.
    let kept = |name: &String| file.policies.contains_key(name);
    for (name, keys) in node.overrides.iter().filter(|(name, _)| kept(name)) {
        let want = file.overrides.get(name).unwrap_or(&none);
        for (key, text) in keys.iter().filter(|(key, _)| !want.contains_key(*key)) {
            compare(Entry::Override(name.clone(), key.clone()), None, Some(text));
        }
    }
    for (name, text) in node.candidates.iter().filter(|(name, _)| kept(name)) {
        if !file.candidates.contains_key(name) {
            compare(Entry::Candidate(name.clone()), None, Some(text));
        }
    }
    for (name, text) in node.policies.iter().filter(|(name, _)| !kept(name)) {
        compare(Entry::Policy(name.clone()), None, Some(text));
    }
    changes
}

/// "n to add, n to change, n to remove".
pub fn summary(changes: &[Change]) -> String {
    let count = |f: fn(&Change) -> bool| changes.iter().filter(|c| f(c)).count();
    format!(
        "{} to add, {} to change, {} to remove",
        count(|c| matches!(c, Change::Add { .. })),
        count(|c| matches!(c, Change::Replace { .. })),
        count(|c| matches!(c, Change::Remove { .. })),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> PolicyFile {
        PolicyFile::parse(text).unwrap()
    }

    #[test]
    fn equal_tables_plan_nothing_however_written() {
        let a =
            file("policies:\n  free: TOKEN 100 10 1s\noverrides:\n  free:\n    k: PERIOD 5 1m\n");
        let b = file(
            "policies:\n  free: token 100 10 1000ms\noverrides:\n  free:\n    k: period 5 60s\n",
        );
        assert_eq!(plan(&a, &b), []);
        assert_eq!(plan(&a, &a), []);
    }

    #[test]
    fn a_plan_adds_changes_and_removes_in_a_safe_order() {
        let want = file(
            "policies:\n  free: TOKEN 100 10 1s\n  new: PERIOD 1 1s\n\
             overrides:\n  free:\n    a: PERIOD 5 1m\n    b: PERIOD 6 1m\n\
             candidates:\n  new: PERIOD 2 1s\n",
        );
        let have = file(
            "policies:\n  free: TOKEN 50 10 1s\n  old: TOKEN 1 1 1s\n\
             overrides:\n  free:\n    a: PERIOD 5 1m\n    gone: TOKEN 1 1 1s\n  old:\n    x: TOKEN 1 1 1s\n\
             candidates:\n  free: TOKEN 1 1 1s\n  old: TOKEN 2 1 1s\n",
        );
        let changes = plan(&want, &have);
        let lines: Vec<String> = changes.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "~ policy free: TOKEN 50 10 1s -> TOKEN 100 10 1s",
                "+ policy new: PERIOD 1 1s",
                "+ override free FOR \"b\": PERIOD 6 1m",
                "+ candidate new: PERIOD 2 1s",
                "- override free FOR \"gone\": TOKEN 1 1 1s",
                "- candidate free: TOKEN 1 1 1s",
                "- policy old: TOKEN 1 1 1s",
            ]
        );
        assert_eq!(summary(&changes), "3 to add, 1 to change, 3 to remove");
        let commands: Vec<String> = changes.iter().map(|c| c.command().join(" ")).collect();
        assert_eq!(commands[0], "RL.POLICY SET free TOKEN 100 10 1s");
        assert_eq!(commands[2], "RL.POLICY SET free PERIOD 6 1m FOR b");
        assert_eq!(commands[3], "RL.POLICY SET new PERIOD 2 1s CANDIDATE");
        assert_eq!(commands[4], "RL.POLICY DEL free FOR gone");
        assert_eq!(commands[5], "RL.POLICY DEL free CANDIDATE");
        assert_eq!(commands[6], "RL.POLICY DEL old");
        assert_eq!(plan(&want, &PolicyFile::default()).len(), 5, "an empty node gets everything");
        assert_eq!(
            plan(&PolicyFile::default(), &have).len(),
            2,
            "an empty file removes every policy"
        );
    }
}
