//! `redis-ratelimit`: the operator's binary beside the module.
//!
//! - `redis-ratelimit policy apply|diff|export`: policies as code (docs/policies.md, SPEC §10).
//! - `redis-ratelimit envoy`: the rate-limit service Envoy calls (docs/envoy.md).
//!
//! Each subcommand lives in its own module and owns its arguments; this file only dispatches.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod envoy;
mod policy;

/// The command line: one subcommand per job.
#[derive(Parser)]
#[command(name = "redis-ratelimit", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Policies as code: apply, diff or export the server-held policy table.
    Policy(policy::Args),
    /// Serve envoy.service.ratelimit.v3.RateLimitService, configured like envoyproxy/ratelimit.
    Envoy(envoy::Args),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Policy(args) => policy::run(args),
        Command::Envoy(args) => envoy::run(args),
    }
}
