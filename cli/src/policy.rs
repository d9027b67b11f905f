//! `redis-ratelimit policy …`: policies as code (placeholder until the operators issue lands).

use std::process::ExitCode;

/// Arguments of `redis-ratelimit policy`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs a policy subcommand.
pub fn run(_args: Args) -> ExitCode {
    eprintln!("redis-ratelimit policy: not built yet");
    ExitCode::from(2)
}
