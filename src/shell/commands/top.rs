//! `RL.TOP [count] [POLICY name [CANDIDATE]] [RESET]`: the keys refused most often now, on
//! this node, from the summary `features::top` keeps; the call parsed by the core
//! (`grammar::top`).

use std::os::raw::c_longlong;

use crate::shell::execution::call::{Call, CommandError};
use crate::shell::features::stats::Counted;
use crate::shell::features::top::{self, with_top};
use crate::shell::server::reply;
use ratelimit_core::features::top::selector;
use ratelimit_core::grammar::top::TopRequest;

/// `RL.TOP [COUNT n] [POLICY name]` → `[[key, refused, last_refused_ms], ...]`, most refused
/// first; `RL.TOP RESET` → `OK`.
pub fn command(call: &Call) -> Result<Counted, CommandError> {
    match TopRequest::parse(call.args)? {
        TopRequest::Reset => {
            top::reset();
            reply::ok(call.api, call.ctx);
        }
        TopRequest::Read { count, policy } => {
            let now = call.clock_ms();
            let selected = policy.as_ref().map(selector);
            let rows = with_top(|top| top.top(now, count, selected.as_deref())).unwrap_or_default();
            let api = call.api;
            reply::array(api, call.ctx, rows.len());
            for row in &rows {
                let refused = c_longlong::try_from(row.refused).unwrap_or(c_longlong::MAX);
                reply::array(api, call.ctx, 3);
                reply::bulk(api, call.ctx, &row.key);
                reply::long(api, call.ctx, refused);
                reply::long(api, call.ctx, row.last_refused_ms);
            }
        }
    }
    Ok(Counted::Answered)
}
