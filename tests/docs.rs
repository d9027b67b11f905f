//! The documentation holds together: every relative link and `#anchor` in the README, the
//! changelog, `docs/` and the client packages' READMEs resolves, and `docs/commands.md` has a
//! section for exactly the commands the module registers (no more, no fewer).

mod common;
use common::*;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Markdown files whose links are checked: README.md, CHANGELOG.md, docs/*.md and
/// clients/*/README.md.
fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md"), root().join("CHANGELOG.md")];
    let mut add_dir = |dir: PathBuf, only: Option<&str>| {
        let Ok(entries) = std::fs::read_dir(&dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            match only {
                Some(name) => {
                    if path.join(name).is_file() {
                        files.push(path.join(name));
                    }
                }
                None => {
                    if path.extension().is_some_and(|e| e == "md") {
                        files.push(path);
                    }
                }
            }
        }
    };
    add_dir(root().join("docs"), None);
    add_dir(root().join("clients"), Some("README.md"));
    files.sort();
    files
}

/// The lines of a Markdown text outside fenced code blocks.
fn prose_lines(text: &str) -> Vec<&str> {
    let mut in_fence = false;
    let mut lines = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if !in_fence {
            lines.push(line);
        }
    }
    lines
}

/// GitHub's anchor for a heading: lower case, punctuation other than `-` and `_` dropped,
/// spaces to `-`; a repeated anchor gets `-1`, `-2`, ….
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    for line in prose_lines(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let title = line[hashes..].trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let n = seen.entry(slug.clone()).or_insert(0);
        out.insert(if *n == 0 { slug.clone() } else { format!("{slug}-{n}") });
        *n += 1;
    }
    out
}

/// Targets of inline links `[text](target)` and images, outside code blocks and code spans.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for line in prose_lines(text) {
        // Drop code spans so `[x](y)` inside backticks is not taken for a link.
        let mut plain = String::new();
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            } else if !in_code {
                plain.push(c);
            }
        }
        let mut rest = plain.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            targets.push(target.to_string());
            rest = &after[end..];
        }
    }
    targets
}

/// Every broken relative link or anchor in `file`, as "file: target (why)".
fn broken_links(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).expect("markdown file");
    let mut broken = Vec::new();
    for target in link_targets(&text) {
        if target.is_empty()
            || target.starts_with("http://")
            || target.starts_with("https://")
            || target.starts_with("mailto:")
        {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let resolved = if path.is_empty() {
            file.to_path_buf()
        } else {
            file.parent().expect("parent").join(path)
        };
        let shown = file.strip_prefix(root()).unwrap_or(file).display().to_string();
        if !resolved.exists() {
            broken.push(format!("{shown}: {target} (no such file)"));
            continue;
        }
        if let Some(anchor) = anchor {
            let Ok(target_text) = std::fs::read_to_string(&resolved) else {
                broken.push(format!("{shown}: {target} (anchor into a non-text file)"));
                continue;
            };
            if !anchors(&target_text).contains(anchor) {
                broken.push(format!("{shown}: {target} (no heading with that anchor)"));
            }
        }
    }
    broken
}

#[test]
fn relative_links_and_anchors_resolve() {
    let files = markdown_files();
    assert!(files.len() >= 8, "expected README, CHANGELOG and docs pages: {files:?}");
    for required in ["README.md", "CHANGELOG.md", "LICENSE", "docs/commands.md"] {
        assert!(root().join(required).is_file(), "{required} is missing");
    }
    let broken: Vec<String> = files.iter().flat_map(|f| broken_links(f)).collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The checker itself: it finds a missing file, a missing anchor, and accepts good links.
#[test]
fn the_link_checker_finds_broken_links() {
    let dir = std::env::temp_dir().join(format!("rl-docs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("other.md"), "# Title\n\n## A `code` heading (x)\n\n## Title\n")
        .expect("write");
    let page = dir.join("page.md");
    std::fs::write(
        &page,
        "[ok](other.md) [ok](other.md#title) [ok](other.md#a-code-heading-x) [ok](other.md#title-1)\n\
         [bad](missing.md) [bad](other.md#nope) [ok](#local) `[not](a-link.md)`\n\
         ```\n[not](in-a-fence.md)\n```\n## Local\n",
    )
    .expect("write");
    let broken = broken_links(&page);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(broken.len(), 2, "{broken:?}");
    assert!(broken[0].contains("missing.md") && broken[1].contains("other.md#nope"), "{broken:?}");
}

/// Command names documented by a heading of `docs/commands.md` (a heading whose first word is
/// a command name such as `RL.TOKEN`), in upper case; a subcommand's heading (`RL.POLICY SET
/// …`: a second word in upper case) documents `RL.POLICY|SET`, as `COMMAND LIST` names it.
fn documented_commands() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("docs/commands.md")).expect("commands.md");
    let is_command = |w: &str| {
        let mut parts = w.split('.');
        matches!((parts.next(), parts.next(), parts.next()), (Some(a), Some(b), None)
            if !a.is_empty() && !b.is_empty()
                && a.chars().all(|c| c.is_ascii_uppercase())
                && b.chars().all(|c| c.is_ascii_uppercase()))
    };
    let is_subcommand = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_uppercase());
    prose_lines(&text)
        .into_iter()
        .filter(|l| l.starts_with("##"))
        .filter_map(|l| {
            let mut words = l.trim_start_matches('#').split_whitespace();
            let command = words.next().filter(|w| is_command(w))?;
            Some(match words.next().filter(|w| is_subcommand(w)) {
                Some(sub) => format!("{command}|{sub}"),
                None => command.to_string(),
            })
        })
        .collect()
}

#[test]
fn every_registered_command_has_a_section_and_every_section_a_command() {
    let s = Server::start();
    let mut c = s.conn();
    let listed: Vec<String> = redis::cmd("COMMAND")
        .arg(&["LIST", "FILTERBY", "MODULE", "ratelimit"])
        .query(&mut c)
        .expect("COMMAND LIST FILTERBY MODULE");
    let registered: BTreeSet<String> = listed.iter().map(|n| n.to_uppercase()).collect();
    assert!(registered.len() >= 12, "{registered:?}");
    for name in &registered {
        // Each registered command carries its own COMMAND DOCS (summary, arguments).
        let docs = format!("{:?}", run(&mut c, &["COMMAND", "DOCS", name]).expect("COMMAND DOCS"));
        assert!(docs.contains("summary"), "{name} has no COMMAND DOCS: {docs}");
    }
    let documented = documented_commands();
    // A container command (`RL.POLICY`) is documented by its subcommands' headings.
    let documented: BTreeSet<String> = documented
        .iter()
        .flat_map(|d| [d.clone(), d.split('|').next().unwrap_or(d).to_string()])
        .collect();
    let undocumented: Vec<_> = registered.difference(&documented).collect();
    let unregistered: Vec<_> = documented.difference(&registered).collect();
    assert!(undocumented.is_empty(), "no section in docs/commands.md for {undocumented:?}");
    assert!(unregistered.is_empty(), "docs/commands.md documents unknown {unregistered:?}");
    s.assert_alive();
}
