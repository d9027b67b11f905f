//! `redis-ratelimit policy apply|diff|export`: policies as code (SPEC §10, docs/policies.md).
//!
//! - `apply FILE --url URL [--dry-run]`: prints, for every primary the URL reaches, the plan
//!   that makes its table equal to the file (added, changed, removed), then applies it (not
//!   with `--dry-run`). A policy absent from the file is deleted. Applying the same file twice
//!   changes nothing the second time. Exit 0, or 2 on an error (a bad file changes nothing).
//! - `diff FILE --url URL`: the same plans, applied nowhere; exit 0 when every primary equals
//!   the file, 1 when one does not (named), 2 on an error.
//! - `export --url URL`: the table as a policy file on stdout, which `apply` maps back to no
//!   change; on a cluster, exit 1 (and the primaries named on stderr) when the primaries
//!   disagree, the URL's own node's table (or the first primary's) printed.
//!
//! `--url` is ``redis://[user:password@]host:port`[/db]` or `rediss://…` (TLS; `#insecure` to
//! skip certificate checks).

mod file;
mod node;
mod plan;

use std::process::ExitCode;

use file::PolicyFile;
use node::{primaries, Failure, Node};

/// Arguments of `redis-ratelimit policy`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Make every primary's policy table equal to FILE: print the plan, then apply it.
    Apply {
        /// The policy file (YAML: policies, overrides, candidates).
        file: String,
        /// Any node of the deployment: redis://[user:password@]host:port or rediss://…
        #[arg(long, env = "REDIS_URL")]
        url: String,
        /// Print the plan, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Compare FILE with every primary's table: exit 0 equal, 1 different, 2 on an error.
    Diff {
        /// The policy file.
        file: String,
        /// Any node of the deployment.
        #[arg(long, env = "REDIS_URL")]
        url: String,
    },
    /// Print the policy table as a policy file (YAML) on stdout.
    Export {
        /// Any node of the deployment.
        #[arg(long, env = "REDIS_URL")]
        url: String,
    },
}

/// Exit code of an error (bad file, unreachable node, refused command).
const ERROR: u8 = 2;

/// Runs a policy subcommand.
pub fn run(args: Args) -> ExitCode {
    let result = match args.command {
        Command::Apply { file, url, dry_run } => apply(&file, &url, dry_run),
        Command::Diff { file, url } => diff(&file, &url),
        Command::Export { url } => export(&url),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(Failure(e)) => {
            eprintln!("redis-ratelimit policy: {e}");
            ExitCode::from(ERROR)
        }
    }
}

fn read_file(path: &str) -> Result<PolicyFile, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| Failure(format!("{path}: {e}")))?;
    PolicyFile::parse(&text).map_err(|e| Failure(format!("{path}: {e}")))
}

/// Every primary with the plan that makes it equal to `file`.
fn plans(file: &PolicyFile, url: &str) -> Result<Vec<(Node, Vec<plan::Change>)>, Failure> {
    primaries(url)?
        .into_iter()
        .map(|mut node| {
            let table = node.table()?;
            let changes = plan::plan(file, &table);
            Ok((node, changes))
        })
        .collect()
}

fn print_plan(node: &Node, changes: &[plan::Change]) {
    println!("{}: {}", node.address, plan::summary(changes));
    for change in changes {
        println!("  {change}");
    }
}

fn apply(path: &str, url: &str, dry_run: bool) -> Result<u8, Failure> {
    let file = read_file(path)?;
    let mut plans = plans(&file, url)?;
    for (node, changes) in &plans {
        print_plan(node, changes);
    }
    if dry_run {
        println!("dry run: nothing changed");
        return Ok(0);
    }
    let mut applied = 0;
    for (node, changes) in &mut plans {
        for change in changes.iter() {
            node.apply(change)
                .map_err(|Failure(e)| Failure(format!("{e} (while applying: {change})")))?;
            applied += 1;
        }
    }
    println!("applied {applied} change(s)");
    Ok(0)
}

fn diff(path: &str, url: &str) -> Result<u8, Failure> {
    let file = read_file(path)?;
    let plans = plans(&file, url)?;
    let mut differ = false;
    for (node, changes) in &plans {
        if changes.is_empty() {
            println!("{}: equal", node.address);
        } else {
            differ = true;
            println!("{} disagrees with {path}: {}", node.address, plan::summary(changes));
            for change in changes {
                println!("  {change}");
            }
        }
    }
    Ok(u8::from(differ))
}

fn export(url: &str) -> Result<u8, Failure> {
    let mut nodes = primaries(url)?;
    let wanted = url_address(url);
    let first = nodes.iter().position(|n| Some(&n.address) == wanted.as_ref()).unwrap_or(0);
    let mut tables = Vec::with_capacity(nodes.len());
    for node in &mut nodes {
        tables.push(node.table()?);
    }
    let Some(table) = tables.get(first) else {
        return Err(Failure("no node to export".into()));
    };
    let yaml = table.to_yaml().map_err(Failure)?;
    print!("{yaml}");
    let mut disagree = false;
    for (node, other) in nodes.iter().zip(&tables) {
        let changes = plan::plan(table, other);
        if !changes.is_empty() {
            disagree = true;
            eprintln!(
                "{} disagrees with {} (exported): {}",
                node.address,
                nodes.get(first).map_or("", |n| n.address.as_str()),
                plan::summary(&changes)
            );
        }
    }
    Ok(u8::from(disagree))
}

/// `host:port` of a URL, as [`Node::address`] names it.
fn url_address(url: &str) -> Option<String> {
    use redis::IntoConnectionInfo;
    match url.into_connection_info().ok()?.addr {
        redis::ConnectionAddr::Tcp(host, port)
        | redis::ConnectionAddr::TcpTls { host, port, .. } => Some(format!("{host}:{port}")),
        redis::ConnectionAddr::Unix(path) => Some(path.display().to_string()),
    }
}
