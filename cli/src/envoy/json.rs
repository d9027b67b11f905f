//! The HTTP API of envoyproxy/ratelimit: `POST /json` with a `RateLimitRequest` in proto3 JSON
//! (`{"domain": "d", "descriptors": [{"entries": [{"key": "k", "value": "v"}]}]}`), answered
//! with the `RateLimitResponse` in proto3 JSON: 200 (OK), 429 (OVER_LIMIT), 400 for a request
//! that does not parse or that the service refuses, 500 when the answer is UNKNOWN.
//!
//! Proto3 JSON as protojson reads it: field names in lowerCamelCase or as in the .proto,
//! 64-bit integers as numbers or strings, enums by name or number; unknown fields are errors.
//! Written as protojson writes it: lowerCamelCase, enums by name, default values left out,
//! durations as `"35s"`.

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::value::Kind;
use envoy_types::pb::google::protobuf::{Struct, UInt64Value, Value as ProtoValue};
use serde_json::{json, Map, Value};

use super::config::Unit;

/// An object's fields, each under its JSON or its .proto name; any other is an error.
struct Fields<'a> {
    what: &'static str,
    map: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    fn new(
        what: &'static str,
        value: &'a Value,
        known: &[(&str, &str)],
    ) -> Result<Fields<'a>, String> {
        let Value::Object(map) = value else { return Err(format!("{what}: not an object")) };
        for name in map.keys() {
            if !known.iter().any(|(json, proto)| name == json || name == proto) {
                return Err(format!("{what}: unknown field {name:?}"));
            }
        }
        Ok(Fields { what, map })
    }

    fn get(&self, (json, proto): (&str, &str)) -> Option<&'a Value> {
        self.map.get(json).or_else(|| self.map.get(proto)).filter(|v| !v.is_null())
    }

    fn string(&self, name: (&str, &str)) -> Result<String, String> {
        match self.get(name) {
            None => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(format!("{}.{}: not a string: {other}", self.what, name.0)),
        }
    }

    fn uint(&self, name: (&str, &str), max: u64) -> Result<Option<u64>, String> {
        let bad = || format!("{}.{}: not an integer from 0 to {max}", self.what, name.0);
        let n = match self.get(name) {
            None => return Ok(None),
            Some(Value::Number(n)) => n.as_u64().ok_or_else(bad)?,
            Some(Value::String(s)) => s.parse().map_err(|_| bad())?,
            Some(_) => return Err(bad()),
        };
        if n > max {
            return Err(bad());
        }
        Ok(Some(n))
    }

    fn list(&self, name: (&str, &str)) -> Result<&'a [Value], String> {
        match self.get(name) {
            None => Ok(&[]),
            Some(Value::Array(items)) => Ok(items),
            Some(_) => Err(format!("{}.{}: not a list", self.what, name.0)),
        }
    }
}

const DOMAIN: (&str, &str) = ("domain", "domain");
const DESCRIPTORS: (&str, &str) = ("descriptors", "descriptors");
const HITS: (&str, &str) = ("hitsAddend", "hits_addend");
const ENTRIES: (&str, &str) = ("entries", "entries");
const LIMIT: (&str, &str) = ("limit", "limit");
const KEY: (&str, &str) = ("key", "key");
const VALUE: (&str, &str) = ("value", "value");
const RPU: (&str, &str) = ("requestsPerUnit", "requests_per_unit");
const UNIT: (&str, &str) = ("unit", "unit");

fn unit(value: Option<&Value>) -> Result<i32, String> {
    match value {
        None => Ok(0),
        Some(Value::String(name)) if name == "UNKNOWN" => Ok(0),
        Some(Value::String(name)) => (1..=7)
            .find_map(|n| Unit::from_proto(n).filter(|u| u.name() == *name).map(|_| n))
            .ok_or_else(|| format!("limit.unit: unknown unit {name:?}")),
        Some(Value::Number(n)) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| format!("limit.unit: bad value {n}")),
        Some(other) => Err(format!("limit.unit: bad value {other}")),
    }
}

fn descriptor(value: &Value) -> Result<RateLimitDescriptor, String> {
    let d = Fields::new(
        "descriptor",
        value,
        &[ENTRIES, LIMIT, HITS, ("isNegativeHits", "is_negative_hits")],
    )?;
    let mut entries = Vec::new();
    for entry in d.list(ENTRIES)? {
        let e = Fields::new("entry", entry, &[KEY, VALUE])?;
        entries.push(Entry { key: e.string(KEY)?, value: e.string(VALUE)? });
    }
    let limit = match d.get(LIMIT) {
        None => None,
        Some(limit) => {
            let l = Fields::new("limit", limit, &[RPU, UNIT])?;
            let requests_per_unit = l.uint(RPU, u64::from(u32::MAX))?.unwrap_or(0) as u32;
            Some(RateLimitOverride { requests_per_unit, unit: unit(l.get(UNIT))? })
        }
    };
    let hits_addend = d.uint(HITS, u64::MAX)?.map(|value| UInt64Value { value });
    let is_negative_hits = match d.get(("isNegativeHits", "is_negative_hits")) {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("descriptor.isNegativeHits: not a boolean".into()),
    };
    Ok(RateLimitDescriptor { entries, limit, hits_addend, is_negative_hits })
}

/// A request from its proto3 JSON.
pub fn parse_request(body: &[u8]) -> Result<RateLimitRequest, String> {
    let value: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let r = Fields::new("request", &value, &[DOMAIN, DESCRIPTORS, HITS])?;
    let descriptors = r.list(DESCRIPTORS)?.iter().map(descriptor).collect::<Result<_, _>>()?;
    let hits_addend = r.uint(HITS, u64::from(u32::MAX))?.unwrap_or(0) as u32;
    Ok(RateLimitRequest { domain: r.string(DOMAIN)?, descriptors, hits_addend })
}

fn code_name(code: i32) -> &'static str {
    match Code::try_from(code) {
        Ok(Code::Ok) => "OK",
        Ok(Code::OverLimit) => "OVER_LIMIT",
        _ => "UNKNOWN",
    }
}

fn status(s: &DescriptorStatus) -> Value {
    let mut out = Map::new();
    if s.code != 0 {
        out.insert("code".into(), json!(code_name(s.code)));
    }
    if let Some(limit) = &s.current_limit {
        let mut l = Map::new();
        if !limit.name.is_empty() {
            l.insert("name".into(), json!(limit.name));
        }
        if limit.requests_per_unit != 0 {
            l.insert("requestsPerUnit".into(), json!(limit.requests_per_unit));
        }
        if let Some(unit) = Unit::from_proto(limit.unit) {
            l.insert("unit".into(), json!(unit.name()));
        }
        out.insert("currentLimit".into(), Value::Object(l));
    }
    if s.limit_remaining != 0 {
        out.insert("limitRemaining".into(), json!(s.limit_remaining));
    }
    if let Some(d) = &s.duration_until_reset {
        out.insert("durationUntilReset".into(), json!(format!("{}s", d.seconds)));
    }
    Value::Object(out)
}

fn headers(list: &[HeaderValue]) -> Value {
    Value::Array(list.iter().map(|h| json!({"key": h.key, "value": h.value})).collect())
}

/// A `google.protobuf.Struct` as the JSON object it stands for.
fn structure(s: &Struct) -> Value {
    let mut fields: Vec<(&String, &ProtoValue)> = s.fields.iter().collect();
    fields.sort_by(|a, b| a.0.cmp(b.0));
    Value::Object(fields.into_iter().map(|(k, v)| (k.clone(), value(v))).collect())
}

fn value(v: &ProtoValue) -> Value {
    match &v.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::NumberValue(n)) => json!(n),
        Some(Kind::StringValue(s)) => json!(s),
        Some(Kind::BoolValue(b)) => json!(b),
        Some(Kind::StructValue(s)) => structure(s),
        Some(Kind::ListValue(l)) => Value::Array(l.values.iter().map(value).collect()),
    }
}

/// A response in proto3 JSON, and its HTTP status (200, 429, or 500 for UNKNOWN).
pub fn render_response(response: &RateLimitResponse) -> (u16, Value) {
    let mut out = Map::new();
    out.insert("overallCode".into(), json!(code_name(response.overall_code)));
    if !response.statuses.is_empty() {
        out.insert("statuses".into(), Value::Array(response.statuses.iter().map(status).collect()));
    }
    if !response.response_headers_to_add.is_empty() {
        out.insert("responseHeadersToAdd".into(), headers(&response.response_headers_to_add));
    }
    if !response.request_headers_to_add.is_empty() {
        out.insert("requestHeadersToAdd".into(), headers(&response.request_headers_to_add));
    }
    if let Some(metadata) = &response.dynamic_metadata {
        out.insert("dynamicMetadata".into(), structure(metadata));
    }
    let http = match Code::try_from(response.overall_code) {
        Ok(Code::Ok) => 200,
        Ok(Code::OverLimit) => 429,
        _ => 500,
    };
    (http, Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_as_protojson_reads_them() {
        let r = parse_request(
            br#"{"domain": "d", "hits_addend": "3", "descriptors": [
                {"entries": [{"key": "k", "value": "v"}], "hitsAddend": 0},
                {"entries": [{"key": "a"}], "limit": {"requestsPerUnit": 5, "unit": "MINUTE"}}]}"#,
        )
        .unwrap();
        assert_eq!((r.domain.as_str(), r.hits_addend), ("d", 3));
        assert_eq!(r.descriptors[0].entries[0].value, "v");
        assert_eq!(r.descriptors[0].hits_addend, Some(UInt64Value { value: 0 }));
        assert_eq!(
            r.descriptors[1].limit,
            Some(RateLimitOverride { requests_per_unit: 5, unit: 2 })
        );
        for bad in [
            &b"not json"[..],
            br#"[]"#,
            br#"{"domian": "d"}"#,
            br#"{"domain": 1}"#,
            br#"{"descriptors": [{"entries": [{"key": "k", "vlaue": "v"}]}]}"#,
            br#"{"hitsAddend": -1}"#,
            br#"{"hitsAddend": 4294967296}"#,
            br#"{"descriptors": [{"limit": {"unit": "FORTNIGHT"}}]}"#,
        ] {
            assert!(parse_request(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn responses_render_as_protojson_writes_them() {
        let response = RateLimitResponse {
            overall_code: Code::OverLimit as i32,
            statuses: vec![DescriptorStatus {
                code: Code::OverLimit as i32,
                current_limit: Some(
                    envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::RateLimit {
                        name: String::new(),
                        requests_per_unit: 10,
                        unit: 2,
                    },
                ),
                limit_remaining: 0,
                duration_until_reset: Some(envoy_types::pb::google::protobuf::Duration {
                    seconds: 35,
                    nanos: 0,
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let (http, body) = render_response(&response);
        assert_eq!(http, 429);
        assert_eq!(
            body,
            json!({"overallCode": "OVER_LIMIT", "statuses": [{"code": "OVER_LIMIT",
                "currentLimit": {"requestsPerUnit": 10, "unit": "MINUTE"},
                "durationUntilReset": "35s"}]})
        );
        let ok = RateLimitResponse { overall_code: Code::Ok as i32, ..Default::default() };
        assert_eq!(render_response(&ok).0, 200);
        assert_eq!(render_response(&RateLimitResponse::default()).0, 500);
    }
}
