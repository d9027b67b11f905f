//! `RESPONSE_DYNAMIC_METADATA=true`: the response carries the request as dynamic metadata,
//! which Envoy puts in the filter's namespace (`envoy.filters.http.ratelimit`) for routes,
//! access logs and later filters — envoyproxy/ratelimit's fields: `domain`, `descriptors`
//! (each `{entries: ["key=value", …], limit?, hitsAddend?}`), `hitsAddend` (when not 0),
//! `quotaModeEnabled`, and `quotaModeViolations` (the indices of the quota-mode descriptors
//! over their limit, when any).

use std::collections::HashMap;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::google::protobuf::{value::Kind, ListValue, Struct, Value};

use super::config::Unit;

/// What the decision knows of quota mode, for the metadata.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Quota {
    /// A descriptor of the request has a `quota_mode` limit.
    pub enabled: bool,
    /// The quota-mode descriptors over their limit (indices in the request).
    pub violations: Vec<usize>,
}

fn string(text: String) -> Value {
    Value { kind: Some(Kind::StringValue(text)) }
}

fn number(n: f64) -> Value {
    Value { kind: Some(Kind::NumberValue(n)) }
}

fn list(values: Vec<Value>) -> Value {
    Value { kind: Some(Kind::ListValue(ListValue { values })) }
}

fn descriptor(d: &RateLimitDescriptor) -> Value {
    let mut fields = HashMap::new();
    let entries = d.entries.iter().map(|e| string(format!("{}={}", e.key, e.value))).collect();
    fields.insert("entries".to_string(), list(entries));
    if let Some(limit) = &d.limit {
        let unit = Unit::from_proto(limit.unit).map_or("UNKNOWN".to_string(), |u| u.name());
        fields.insert(
            "limit".to_string(),
            string(format!("requests_per_unit:{} unit:{unit}", limit.requests_per_unit)),
        );
    }
    if let Some(hits) = &d.hits_addend {
        fields.insert("hitsAddend".to_string(), number(hits.value as f64));
    }
    Value { kind: Some(Kind::StructValue(Struct { fields })) }
}

/// The metadata of `request`'s answer.
pub fn of(request: &RateLimitRequest, quota: &Quota) -> Struct {
    let mut fields = HashMap::new();
    fields.insert("domain".to_string(), string(request.domain.clone()));
    fields.insert(
        "descriptors".to_string(),
        list(request.descriptors.iter().map(descriptor).collect()),
    );
    if request.hits_addend != 0 {
        fields.insert("hitsAddend".to_string(), number(f64::from(request.hits_addend)));
    }
    if !quota.violations.is_empty() {
        let violations = quota.violations.iter().map(|&i| number(i as f64)).collect();
        fields.insert("quotaModeViolations".to_string(), list(violations));
    }
    fields.insert(
        "quotaModeEnabled".to_string(),
        Value { kind: Some(Kind::BoolValue(quota.enabled)) },
    );
    Struct { fields }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
        Entry, RateLimitOverride,
    };

    #[test]
    fn the_request_as_envoyproxy_writes_it() {
        let request = RateLimitRequest {
            domain: "d".into(),
            descriptors: vec![
                RateLimitDescriptor {
                    entries: vec![Entry { key: "k".into(), value: "v".into() }],
                    hits_addend: Some(envoy_types::pb::google::protobuf::UInt64Value { value: 7 }),
                    ..Default::default()
                },
                RateLimitDescriptor {
                    entries: vec![Entry { key: "a".into(), value: String::new() }],
                    limit: Some(RateLimitOverride { requests_per_unit: 3, unit: 2 }),
                    ..Default::default()
                },
            ],
            hits_addend: 0,
        };
        let quota = Quota { enabled: true, violations: vec![1] };
        let m = of(&request, &quota);
        assert_eq!(m.fields["domain"], string("d".into()));
        assert!(!m.fields.contains_key("hitsAddend"));
        assert_eq!(m.fields["quotaModeViolations"], list(vec![number(1.0)]));
        assert_eq!(m.fields["quotaModeEnabled"], Value { kind: Some(Kind::BoolValue(true)) });
        let Some(Kind::ListValue(descriptors)) = &m.fields["descriptors"].kind else { panic!() };
        let Some(Kind::StructValue(first)) = &descriptors.values[0].kind else { panic!() };
        assert_eq!(first.fields["entries"], list(vec![string("k=v".into())]));
        assert_eq!(first.fields["hitsAddend"], number(7.0));
        let Some(Kind::StructValue(second)) = &descriptors.values[1].kind else { panic!() };
        assert_eq!(second.fields["limit"], string("requests_per_unit:3 unit:MINUTE".into()));
        let none = of(&request, &Quota::default());
        assert!(!none.fields.contains_key("quotaModeViolations"));
    }
}
