//! The commands that read or restore a key whole: `RL.PEEK` (the answer a `DRYRUN COST 1`
//! request with the stored parameters would get), `RL.INFO` (the stored parameters and
//! state) and `RL.RESTORE` (a state written back, as propagation and AOF rewrites send it).
//! Their arguments are parsed by the core (`grammar::inspect`); the key is opened from the
//! call's own argument.

use crate::shell::execution::call::{held, Call, CommandError};
use crate::shell::features::stats::Counted;
use crate::shell::server::key::{Contents, Mode};
use crate::shell::server::reply::{self, FieldValue};
use ratelimit_core::grammar::inspect::{KeyRequest, RestoreRequest};
use ratelimit_core::steps::inspect::{describe_key, peek_key};
use ratelimit_core::steps::judge::{value_expiry, KeyError};
use ratelimit_core::store::codec;
/// `RL.PEEK key`: the reply a `DRYRUN COST 1` request with the stored parameters would get.
pub fn peek(call: &Call) -> Result<Counted, CommandError> {
    KeyRequest::parse_peek(call.args)?;
    let now = call.clock_ms();
    let mut key = call.open(Mode::Read)?;
    let reply = peek_key(held(&mut key)?.as_ref(), now);
    drop(key);
    match reply {
        Some(values) => reply::integers(call.api, call.ctx, &values),
        None => reply::null(call.api, call.ctx),
    }
    Ok(Counted::Answered)
}

/// `RL.INFO key`: the stored parameters and state, as field/value pairs.
pub fn info(call: &Call) -> Result<Counted, CommandError> {
    KeyRequest::parse_info(call.args)?;
    let now = call.clock_ms();
    let mut key = call.open(Mode::Read)?;
    let ttl_ms = key.expire_at_ms().map_or(-1, |at| at.saturating_sub(now).max(0));
    let described = describe_key(held(&mut key)?.as_ref(), now);
    drop(key);
    let Some(info) = described else {
        reply::null(call.api, call.ctx);
        return Ok(Counted::Answered);
    };
    let mut fields = vec![("algorithm", FieldValue::Text(info.algorithm.name()))];
    fields.extend(info.fields.into_iter().map(|(k, v)| (k, FieldValue::Int(v))));
    if let Some(leases) = &info.leases {
        fields.push(("leases", FieldValue::Leases(leases)));
    }
    fields.push(("updated_ms", FieldValue::Int(info.updated_ms)));
    fields.push(("ttl_ms", FieldValue::Int(ttl_ms)));
    // The now-dependent fields, computed at `now_ms` under the stored parameters.
    fields.push(("now_ms", FieldValue::Int(info.now_ms)));
    if let Some(window) = &info.window {
        let used = i64::try_from(window.used).unwrap_or(i64::MAX);
        fields.push(("window_used", FieldValue::Int(used)));
        fields.push(("window_oldest_ms", FieldValue::Int(window.oldest_ms.unwrap_or(-1))));
        if let Some((counts, start_ms)) = &window.buckets {
            fields.push(("window_counts", FieldValue::Counts(counts)));
            fields.push(("window_start_ms", FieldValue::Int(*start_ms)));
        }
    }
    reply::fields(call.api, call.ctx, &fields);
    Ok(Counted::Answered)
}

/// `RL.RESTORE key payload`: sets a key to an encoded limiter and its ban, if any (what the
/// AOF rewrite emits); the key expires at the limiter's reset instant or the ban's end.
pub fn restore(call: &Call) -> Result<Counted, CommandError> {
    let request = RestoreRequest::parse(call.args)?;
    let (limiter, ban) = codec::decode_value(request.payload)
        .map_err(|e| CommandError::Text(format!("ERR invalid RL.RESTORE payload: {e}")))?;
    let expire_at = value_expiry(&limiter, ban);
    let mut key = call.open(Mode::Write)?;
    if let Contents::Foreign(held) = key.contents() {
        return Err(KeyError::Foreign(held).into());
    }
    key.store(limiter, ban, expire_at).map_err(|e| CommandError::Text(e.into()))?;
    call.replicate_verbatim();
    call.notify_changed();
    drop(key);
    reply::ok(call.api, call.ctx);
    Ok(Counted::Answered)
}
