//! `redis-ratelimit envoy`: the Envoy rate-limit service (placeholder until the gateway issue lands).

use std::process::ExitCode;

/// Arguments of `redis-ratelimit envoy` (its settings come from envoyproxy/ratelimit's
/// environment variables).
#[derive(clap::Args)]
pub struct Args {}

/// Serves until stopped.
pub fn run(_args: Args) -> ExitCode {
    eprintln!("redis-ratelimit envoy: not built yet");
    ExitCode::from(2)
}
