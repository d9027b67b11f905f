//! The policy file (SPEC §10): what `apply` makes a node's table equal to, what `export`
//! writes and `diff` compares.
//!
//! ```yaml
//! policies:
//!   free: "TOKEN 100 10 1s"          # what RL.POLICY SET takes after the name
//! overrides:
//!   free:
//!     "api:t2": "PERIOD 50 1m"       # what RL.POLICY SET free … FOR key takes
//! candidates:
//!   free: "TOKEN 80 8 1s"            # what RL.POLICY SET free … CANDIDATE takes
//! ```
//!
//! The same shape holds a node's table as read back ([`super::node`]): one type for both sides
//! of a plan. Every definition is checked by the module's own parser (`ratelimit-core`) before
//! anything is sent, so a bad file changes nothing anywhere.

use std::collections::BTreeMap;

use ratelimit_core::features::policy::{valid_name, Definition};
use ratelimit_core::grammar::args::MAX_COUNT;
use serde::{Deserialize, Serialize};

/// A table of policies: by name, their definitions' text; their overrides by key; their
/// candidates.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    #[serde(default)]
    pub policies: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub overrides: BTreeMap<String, BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub candidates: BTreeMap<String, String>,
}

/// A definition's text parsed by the module's own parser: `Err` names what is wrong.
pub fn parse_definition(text: &str) -> Result<Definition, String> {
    let words: Vec<&[u8]> = text.split_whitespace().map(str::as_bytes).collect();
    let (definition, target) = Definition::parse(&words, MAX_COUNT).map_err(|e| {
        let e = e.to_string();
        e.strip_prefix("ERR ").map(str::to_string).unwrap_or(e)
    })?;
    match target {
        None => Ok(definition),
        Some(_) => Err("FOR and CANDIDATE belong to the file's structure, not to a limit".into()),
    }
}

impl PolicyFile {
    /// Reads and checks a policy file's text.
    pub fn parse(text: &str) -> Result<PolicyFile, String> {
        let blank = text.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'));
        if blank {
            return Ok(PolicyFile::default());
        }
        let file: PolicyFile = serde_norway::from_str(text).map_err(|e| e.to_string())?;
        file.check()?;
        Ok(file)
    }

    /// The file's text (YAML), sorted by name and key.
    pub fn to_yaml(&self) -> Result<String, String> {
        serde_norway::to_string(self).map_err(|e| e.to_string())
    }

    /// Every name valid, every definition parsed, every override and candidate of a policy
    /// the file defines.
    fn check(&self) -> Result<(), String> {
        for (name, text) in &self.policies {
            if !valid_name(name.as_bytes()) {
                return Err(format!(
                    "policies: invalid policy name '{name}' (1 to 64 bytes of A-Z a-z 0-9 _ - .)"
                ));
            }
            parse_definition(text).map_err(|e| format!("policies: {name}: {e}"))?;
        }
        for (name, keys) in &self.overrides {
            if !self.policies.contains_key(name) {
                return Err(format!("overrides: {name}: no such policy in policies"));
            }
            for (key, text) in keys {
                parse_definition(text).map_err(|e| format!("overrides: {name}: {key:?}: {e}"))?;
            }
        }
        for (name, text) in &self.candidates {
            if !self.policies.contains_key(name) {
                return Err(format!("candidates: {name}: no such policy in policies"));
            }
            parse_definition(text).map_err(|e| format!("candidates: {name}: {e}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pinned_example_parses() {
        let file = PolicyFile::parse(
            "policies:\n  free: \"TOKEN 100 10 1s\"\n  pro:  \"PERIOD 10000 1h BAN 1m\"\n\
             overrides:\n  free:\n    \"api:t2\": \"PERIOD 50 1m\"\n",
        )
        .unwrap();
        assert_eq!(file.policies["pro"], "PERIOD 10000 1h BAN 1m");
        assert_eq!(file.overrides["free"]["api:t2"], "PERIOD 50 1m");
        assert!(file.candidates.is_empty());
        let back = PolicyFile::parse(&file.to_yaml().unwrap()).unwrap();
        assert_eq!(back, file);
    }

    #[test]
    fn a_bad_file_is_refused_naming_what() {
        for (text, expected) in [
            ("policies:\n  free: \"TOKEN 0 1 1s\"\n", "policies: free: capacity must be"),
            ("policies:\n  \"a b\": \"TOKEN 1 1 1s\"\n", "invalid policy name 'a b'"),
            ("policies:\n  free: \"TOKEN 1 1 1s FOR k\"\n", "FOR and CANDIDATE"),
            ("policies: {}\noverrides:\n  free:\n    k: \"TOKEN 1 1 1s\"\n", "no such policy"),
            ("policies: {}\ncandidates:\n  free: \"TOKEN 1 1 1s\"\n", "no such policy"),
            ("policies:\n  free: \"TOKEN 1 1 1s COST 2\"\n", "holds no COST"),
            ("policy:\n  free: \"TOKEN 1 1 1s\"\n", "unknown field"),
            ("policies: [1, 2]\n", "invalid type"),
        ] {
            let e = PolicyFile::parse(text).unwrap_err();
            assert!(e.contains(expected), "{text}: {e}");
        }
        assert_eq!(
            PolicyFile::parse("").unwrap(),
            PolicyFile::default(),
            "an empty file: no policies"
        );
        assert_eq!(PolicyFile::parse("policies: {}\n").unwrap(), PolicyFile::default());
    }
}
