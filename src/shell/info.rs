//! `INFO ratelimit`, assembled at the top from every room that counts something: the command
//! counters and the waiting room (`features::stats`), propagation's form
//! (`server::propagation`), the interned parameter sets (`server::values`), `RL.TOP`'s summary
//! (`features::top`), the version, and the policy table (`features::policies`).

use redis_module::InfoContext;

use crate::shell::features::{policies, stats, top};
use crate::shell::server::{api, propagation, values, version};

/// Adds the `stats` and `policies` sections (Redis prefixes them and every field with the
/// module name: `# ratelimit_stats`, `ratelimit_token_calls:…`).
pub fn add_info(ctx: &InfoContext, _for_crash_report: bool) {
    let mut fields = stats::info_fields();
    let now = api::api().map_or(0, |api| api.now_ms());
    let top = top::stats(now);
    for (name, value) in [
        ("propagation_verbatim", i64::from(propagation::verbatim_now())),
        ("inline_entries", i64::try_from(values::live_entries()).unwrap_or(i64::MAX)),
        ("top_refusals", i64::try_from(top.refusals).unwrap_or(i64::MAX)),
        ("top_tracked", i64::try_from(top.tracked).unwrap_or(i64::MAX)),
        ("top_error_bound", i64::try_from(top.error_bound).unwrap_or(i64::MAX)),
    ] {
        fields.push((name.to_string(), value));
    }
    let mut section = ctx.builder().add_section("stats");
    section = match section.field("version", version::VERSION.to_string()) {
        Ok(s) => s,
        Err(_) => return,
    };
    for (name, value) in &fields {
        section = match section.field(name, *value) {
            Ok(s) => s,
            Err(_) => return,
        };
    }
    let Ok(builder) = section.build_section() else {
        return;
    };
    // `# ratelimit_policies`: the table's size, then one line per policy.
    let (totals, lines) = policies::info_lines();
    let mut section = builder.add_section("policies");
    for (name, value) in totals {
        section = match section.field(name, value) {
            Ok(s) => s,
            Err(_) => return,
        };
    }
    for (name, fields) in &lines {
        let mut dictionary = section.add_dictionary(name);
        for (field, value) in fields {
            dictionary = match dictionary.field(field, *value) {
                Ok(d) => d,
                Err(_) => return,
            };
        }
        section = match dictionary.build_dictionary() {
            Ok(s) => s,
            Err(_) => return,
        };
    }
    if let Ok(builder) = section.build_section() {
        let _ = builder.build_info();
    }
}
