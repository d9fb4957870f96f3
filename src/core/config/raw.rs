//! The file as written: serde shapes, strict (`deny_unknown_fields`) at every level.
//!
//! Everything that can be checked semantically (required keys, durations, enums,
//! ranges) is kept loose here (`Option`, `serde_yaml::Value`, `String`) so that
//! `validate` can report *all* such problems at once instead of serde's first one.

use serde::Deserialize;
use serde_json::Map;
use serde_yaml::{Mapping, Value};

type JsonObject = Map<String, serde_json::Value>;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFile {
    pub defaults: Option<RawDefaults>,
    pub scenarios: Option<Vec<RawScenario>>,
    pub targets: Option<Vec<RawTarget>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDefaults {
    pub interval: Option<Value>,
    pub timeout: Option<Value>,
    pub temperature: Option<f64>,
    pub headers: Option<Mapping>,
    pub secret_headers: Option<Vec<String>>,
    pub slo: Option<RawSlo>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSlo {
    pub ttft_p95: Option<Value>,
    pub output_tokens_per_second_min: Option<f64>,
    pub rate_limit_headroom_min: Option<f64>,
    pub prefill_tokens_per_second_min: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScenario {
    pub name: Option<String>,
    pub messages: Option<Vec<RawMessage>>,
    pub max_tokens: Option<i64>,
    pub temperature: Option<f64>,
    pub prefix_cache: Option<String>,
    pub extra_body: Option<JsonObject>,
    pub expect: Option<RawExpect>,
    pub tools: Option<Vec<serde_json::Value>>,
    pub tool_choice: Option<serde_json::Value>,
    pub response_format: Option<serde_json::Value>,
    pub schema_cache: Option<String>,
    pub cache_canary: Option<bool>,
    pub prompt_tokens: Option<i64>,
    pub needle: Option<bool>,
    pub turns: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawExpect {
    pub contains: Option<StringOrList>,
    pub regex: Option<StringOrList>,
    pub case_insensitive: Option<bool>,
    pub json: Option<bool>,
    pub json_schema: Option<serde_json::Value>,
    pub json_schema_file: Option<String>,
    pub min_output_tokens: Option<u64>,
    pub max_output_tokens: Option<u64>,
    pub degeneration: Option<RawDegeneration>,
}

/// One string or a list of them.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum StringOrList {
    One(String),
    Many(Vec<String>),
}

impl StringOrList {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            StringOrList::One(s) => vec![s],
            StringOrList::Many(v) => v,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDegeneration {
    pub repetition_loop: Option<bool>,
    pub punctuation_only: Option<bool>,
    pub special_tokens: Option<bool>,
    pub empty_after_reasoning: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMessage {
    pub role: Option<String>,
    pub content: Option<String>,
    pub tool_calls: Option<Vec<RawToolCall>>,
    pub tool_call_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawToolCall {
    pub id: Option<String>,
    pub name: Option<String>,
    pub arguments: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTarget {
    pub name: Option<String>,
    pub protocol: Option<String>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub api_key_env: Option<String>,
    pub api_key_file: Option<String>,
    pub interval: Option<Value>,
    pub timeout: Option<Value>,
    pub temperature: Option<f64>,
    pub headers: Option<Mapping>,
    pub secret_headers: Option<Vec<String>>,
    pub extra_body: Option<JsonObject>,
    pub scenarios: Option<Vec<String>>,
    pub slo: Option<RawSlo>,
    pub deployment: Option<String>,
    pub api_version: Option<String>,
    pub version_path: Option<String>,
    pub tls: Option<RawTls>,
    pub connect_timeout: Option<Value>,
    pub connection: Option<String>,
    pub baseline_file: Option<Value>,
    pub cost: Option<RawCost>,
    pub aws_region: Option<String>,
    pub aws_profile: Option<String>,
    pub server_metrics_url: Option<String>,
    pub server_metrics_adapter: Option<String>,
    pub server_metrics_send_api_key: Option<bool>,
    pub replicas: Option<RawReplicas>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawReplicas {
    pub dns: Option<RawDns>,
    pub dns_srv: Option<RawDnsSrv>,
    pub file_sd: Option<String>,
    pub http_sd: Option<String>,
    pub refresh: Option<Value>,
    pub max: Option<i64>,
    pub grace: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDns {
    pub nameserver: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDnsSrv {
    pub name: Option<String>,
    pub nameserver: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCost {
    pub input_per_million: Option<f64>,
    pub output_per_million: Option<f64>,
    pub monthly_budget: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTls {
    pub ca_file: Option<String>,
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
    pub insecure_skip_verify: Option<bool>,
}
