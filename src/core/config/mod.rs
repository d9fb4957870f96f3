//! Configuration: YAML loading, validation, defaults.
//!
//! This is the only module that knows YAML. [`load`] / [`parse`] turn a probes file
//! (see `probes.example.yaml` at the repository root) into a fully resolved [`Config`]:
//! defaults applied, scenario references resolved to `Arc<Scenario>`, API keys read
//! from the environment or a file, header names and values validated.
//!
//! The file is strict in the spirit of blackbox_exporter: unknown keys are errors at
//! every level. Semantic problems are collected (all of them, not just the first) and
//! reported as full sentences in the spirit of gatus' `ValidateAndSetDefaults`, each
//! with `file:line:column`, the path of the offending key and, for targets and
//! scenarios, a `target "NAME": ` / `scenario "NAME": ` prefix. YAML syntax errors and
//! type errors detected by serde stop at the first one.

pub mod aws;
pub mod baseline_file;
pub mod cost;
pub mod credentials;
pub mod durations;
pub mod files;
pub mod hints;
pub(crate) mod locate;
pub mod long_prompt;
mod raw;
pub mod replicas;
mod schema_errors;
mod secret_headers;
mod tls;
mod validate;
mod yaml_features;

pub use secret_headers::{is_secret_header, SECRET_HEADERS, SECRET_HEADER_WORDS};
pub use tls::{ConnectionPolicy, Tls, DEFAULT_CONNECT_TIMEOUT};

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Built-in default probe interval, used when neither `defaults.interval` nor the
/// target's `interval` is set.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(15);
/// Built-in default probe timeout, used when neither `defaults.timeout` nor the
/// target's `timeout` is set. It is lowered to the interval when the interval is shorter.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Azure OpenAI `api-version` used when a target does not set `api_version` (the GA version
/// that streams `stream_options.include_usage`).
pub const DEFAULT_AZURE_API_VERSION: &str = "2024-10-21";

/// Longest target or scenario name, in characters: names are the `target` and `scenario` label
/// values of every series, so a long one is repeated in every line of `/metrics`.
pub const MAX_NAME_LEN: usize = 128;
/// Longest `model`, in characters (the `model` label of every series; long enough for cloud
/// model ARNs and `org/repo` names with a revision).
pub const MAX_MODEL_LEN: usize = 256;

/// A loaded, validated configuration. Immutable; share it behind an `Arc` and swap
/// the whole thing on reload.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where it came from: the file path as given to [`load`], or the `source`
    /// given to [`parse`] (e.g. `"<built-in>"`), with control characters escaped
    /// ([`crate::sanitize::terminal_safe`]): it is printed and logged.
    pub source: String,
    /// All scenarios, in file order. Names are unique.
    pub scenarios: Vec<Arc<Scenario>>,
    /// All targets, in file order. Names are unique; each has at least one scenario.
    pub targets: Vec<Arc<Target>>,
    /// With [`Secrets::Isolate`]: every credential that could not be read (an unset or empty
    /// `api_key_env` variable, a missing or unreadable `api_key_file` or TLS file), located and
    /// naming the variable or file, never a value. Each such target is in `targets` with its
    /// [`Target::credentials_error`] set: it is scheduled and fails every probe with the reason
    /// `credentials` until the file can be read. Empty with [`Secrets::Read`] (they are errors).
    pub credential_problems: Vec<Problem>,
}

/// A canned prompt sent as one streaming request.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Unique name; used as the `scenario` metric label. Matches `[A-Za-z0-9_.:-]+`, at most
    /// [`MAX_NAME_LEN`] characters.
    pub name: String,
    /// The chat messages, in order. Never empty; every content is non-empty.
    pub messages: Vec<Message>,
    /// Maximum output tokens to request (≥ 1).
    pub max_tokens: u32,
    /// Sampling temperature for this scenario; overrides the target's when set.
    /// See [`Target::temperature_for`].
    pub temperature: Option<f64>,
    /// Whether to defeat (`cold`) or use (`warm`) the server's prefix cache.
    pub prefix_cache: PrefixCache,
    /// Extra top-level keys merged into the request JSON; wins over the target's
    /// `extra_body`. See [`Target::extra_body_for`].
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// The answer checks (`expect:`, plus what `tools`/`tool_choice`/`response_format`
    /// imply), compiled; the built-in degeneration checks when nothing is set.
    /// See `docs/answer-checks.md`.
    pub checks: crate::check::Checks,
    /// Tool definitions sent with the request (`tools:`, OpenAI's shape:
    /// `{type: function, function: {name, description, parameters}}`); empty: none.
    pub tools: Vec<serde_json::Value>,
    /// `tool_choice:` as given (`auto`, `required`, `none` or a named function).
    pub tool_choice: Option<serde_json::Value>,
    /// `response_format:` as given (e.g. `{type: json_schema, json_schema: {name, schema}}`).
    pub response_format: Option<serde_json::Value>,
    /// Whether the structured-output schema is made unique per probe (`cold`) so the engine
    /// compiles its grammar on every probe, or sent verbatim (`warm`, the default).
    pub schema_cache: SchemaCache,
    /// A prefix-cache canary (`cache_canary: true`): every probe sends the prompt twice back to
    /// back with one fresh nonce at its start, and the warm/cold TTFT ratio is exported.
    pub cache_canary: bool,
    /// A generated long prompt (`prompt_tokens:`, `needle:`): its user message is the last of
    /// [`Scenario::messages`], built at load; the answer must repeat its code word (check
    /// `context_truncated`) and a server count far below it is the anomaly `prompt_truncated`.
    pub long_prompt: Option<long_prompt::LongPrompt>,
    /// The user messages of a multi-turn conversation after the first request (`turns:`): a
    /// probe sends `messages`, then for each of these the conversation so far (the earlier
    /// answers as assistant messages) and it; at most [`MAX_TURNS`] − 1. Empty: one request.
    pub turns: Vec<String>,
}

/// The most requests of one multi-turn probe (`messages` and at most this minus one `turns`):
/// the `turn` label's values are `1` to this.
pub const MAX_TURNS: usize = 8;

/// How a structured-output scenario treats the engine's grammar (schema) cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SchemaCache {
    /// The schema is sent verbatim: a cached grammar is measured.
    #[default]
    Warm,
    /// A unique nonce goes into the schema's `description` on every probe (and into each
    /// tool's parameters' `description`), so the engine compiles the grammar again: the
    /// compilation is measured in TTFT.
    Cold,
}

/// One chat message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// `system`, `developer`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The text; never empty, but for an assistant message that only calls tools.
    pub content: String,
    /// The tool calls of an `assistant` message (a conversation that already called a tool);
    /// empty for every other role.
    pub tool_calls: Vec<ToolCallMessage>,
    /// The call a `tool` message answers (the `id` of an earlier assistant tool call); `None`
    /// for every other role.
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A message of `role` with `content` only.
    pub fn text(role: &str, content: impl Into<String>) -> Message {
        Message {
            role: role.into(),
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A tool call an assistant message of a scenario made (`messages[].tool_calls[]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCallMessage {
    /// The call's id, unique in the scenario (given, or `call_J_K` for message J's call K).
    pub id: String,
    /// The name of one of the scenario's `tools`.
    pub name: String,
    /// The arguments, a JSON object.
    pub arguments: serde_json::Map<String, serde_json::Value>,
}

/// How a scenario treats the server's prefix (KV) cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PrefixCache {
    /// Put a unique nonce at the very start of the prompt on every probe, so the
    /// server's prefix cache cannot serve the canned prompt and flatter TTFT.
    #[default]
    Cold,
    /// Send the prompt verbatim, to measure the cached path.
    Warm,
}

impl PrefixCache {
    /// The YAML spelling: `"cold"` or `"warm"`.
    pub fn as_str(self) -> &'static str {
        match self {
            PrefixCache::Cold => "cold",
            PrefixCache::Warm => "warm",
        }
    }
}

/// The wire protocol spoken to a target (docs/protocols.md). Match exhaustively.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// OpenAI-compatible `POST {base_url}/chat/completions` with `stream: true`
    /// (vLLM, SGLang, llama.cpp server, TGI Messages, Ollama `/v1`, OpenAI, …). YAML: `openai-chat`.
    OpenAiChat,
    /// OpenAI legacy completions, `POST {base_url}/completions`. YAML: `openai-completions`.
    OpenAiCompletions,
    /// OpenAI Responses, `POST {base_url}/responses`. YAML: `openai-responses`.
    OpenAiResponses,
    /// Anthropic Messages, `POST {base_url}/messages`. YAML: `anthropic`.
    Anthropic,
    /// Ollama native chat, `POST {base_url}/api/chat` (NDJSON; base_url without `/v1`).
    /// YAML: `ollama`.
    Ollama,
    /// Hugging Face TGI native, `POST {base_url}/generate_stream`. YAML: `tgi`.
    Tgi,
    /// Azure OpenAI chat,
    /// `POST {base_url}/openai/deployments/{deployment}/chat/completions?api-version=…`.
    /// YAML: `azure-openai`.
    AzureOpenAi,
    /// llama.cpp native `POST {base_url}/completion` (base_url without `/v1`). YAML: `llama-cpp`.
    LlamaCpp,
    /// Google Gemini (AI Studio),
    /// `POST {base_url}/v1beta/models/{model}:streamGenerateContent?alt=sse`, key in
    /// `x-goog-api-key`. YAML: `gemini`.
    Gemini,
    /// Gemini on Vertex AI,
    /// `POST {base_url}/publishers/google/models/{model}:streamGenerateContent?alt=sse` with
    /// `base_url` = `https://{location}-aiplatform.googleapis.com/v1/projects/{project}/locations/{location}`
    /// and an OAuth access token as `Authorization: Bearer`. YAML: `vertex-gemini`.
    VertexGemini,
    /// Amazon Bedrock ConverseStream,
    /// `POST {base_url}/model/{model}/converse-stream` (AWS's binary event stream, SigV4-signed
    /// with the target's AWS credentials, or a Bedrock API key as a bearer token).
    /// YAML: `bedrock`.
    Bedrock,
}

impl Protocol {
    /// Every protocol, in the order they are listed in error messages.
    pub const ALL: &'static [Protocol] = &[
        Protocol::OpenAiChat,
        Protocol::OpenAiCompletions,
        Protocol::OpenAiResponses,
        Protocol::Anthropic,
        Protocol::Ollama,
        Protocol::Tgi,
        Protocol::AzureOpenAi,
        Protocol::LlamaCpp,
        Protocol::Gemini,
        Protocol::VertexGemini,
        Protocol::Bedrock,
    ];

    /// The YAML spelling, e.g. `"openai-chat"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::OpenAiChat => "openai-chat",
            Protocol::OpenAiCompletions => "openai-completions",
            Protocol::OpenAiResponses => "openai-responses",
            Protocol::Anthropic => "anthropic",
            Protocol::Ollama => "ollama",
            Protocol::Tgi => "tgi",
            Protocol::AzureOpenAi => "azure-openai",
            Protocol::LlamaCpp => "llama-cpp",
            Protocol::Gemini => "gemini",
            Protocol::VertexGemini => "vertex-gemini",
            Protocol::Bedrock => "bedrock",
        }
    }

    /// Parses the YAML spelling; `None` for anything unknown.
    pub fn from_name(name: &str) -> Option<Protocol> {
        Protocol::ALL.iter().copied().find(|p| p.as_str() == name)
    }

    /// The HTTP header that carries the API key (lower case): `x-api-key` for Anthropic,
    /// `api-key` for Azure OpenAI, `x-goog-api-key` for Gemini, `authorization`
    /// (`Bearer <key>`) for the others (Vertex AI's access token included).
    pub fn auth_header(self) -> &'static str {
        match self {
            Protocol::Anthropic => "x-api-key",
            Protocol::AzureOpenAi => "api-key",
            Protocol::Gemini => "x-goog-api-key",
            _ => "authorization",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An endpoint to probe, with every default applied.
#[derive(Clone, PartialEq)]
pub struct Target {
    /// Unique name; used as the `target` metric label. Matches `[A-Za-z0-9_.:-]+`, at most
    /// [`MAX_NAME_LEN`] characters.
    pub name: String,
    /// Wire protocol.
    pub protocol: Protocol,
    /// Absolute `http`/`https` URL without credentials, query or fragment, as written
    /// (e.g. `http://127.0.0.1:8000/v1`); the protocol appends its path to it.
    pub base_url: reqwest::Url,
    /// Model name sent in the request and used as the `model` metric label: at most
    /// [`MAX_MODEL_LEN`] characters, no control or bidirectional-control characters.
    pub model: String,
    /// The API key, resolved at load time from `api_key_env` / `api_key_file`
    /// (surrounding whitespace trimmed). `None` when neither is configured.
    pub api_key: Option<Secret>,
    /// Where the key came from, for summaries: `"env NAME"` or `"file PATH"`. Never the key.
    pub api_key_source: Option<String>,
    /// The `api_key_file`, when the key comes from one and secrets are read: a prober re-reads
    /// it (and the TLS files) when it changes ([`credentials`]).
    pub api_key_file: Option<credentials::KeyFile>,
    /// Why the target's credentials could not be read at load time (loaded with
    /// [`Secrets::Isolate`]): sentences naming the variable or file, never a value. A prober
    /// fails every probe of such a target with the reason `credentials` until its files can be
    /// read.
    pub credentials_error: Option<String>,
    /// Extra HTTP headers: `defaults.headers` merged with the target's (the target
    /// wins; names compare case-insensitively). Names and values are valid HTTP.
    pub headers: Vec<(String, String)>,
    /// Header names (lower case) the file marks secret with `secret_headers:` (`defaults`' and
    /// the target's), in addition to the built-in list; see [`Target::is_secret_header`].
    pub secret_headers: Vec<String>,
    /// Time between the starts of two probes of the same scenario (100 ms to 1 day, see
    /// [`durations`]).
    pub interval: Duration,
    /// Deadline for one whole probe, request and stream included (1 ms to 1 day, ≤ `interval`).
    pub timeout: Duration,
    /// Target-level sampling temperature (target's, else `defaults.temperature`).
    pub temperature: Option<f64>,
    /// Extra top-level keys merged into every request JSON to this target.
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// The scenarios to run, resolved, in the order listed (all scenarios, in file
    /// order, when the target does not list any). Never empty.
    pub scenarios: Vec<Arc<Scenario>>,
    /// Service-level objectives (target's fields over `defaults.slo` over built-ins).
    pub slo: Slo,
    /// Azure OpenAI deployment name (`Some` exactly when the protocol is `azure-openai`).
    pub deployment: Option<String>,
    /// Azure OpenAI `api-version` query value (`Some` exactly when the protocol is
    /// `azure-openai`; default [`DEFAULT_AZURE_API_VERSION`]).
    pub api_version: Option<String>,
    /// Path (starting with `/`) of a JSON endpoint on the target's host whose `version` field
    /// names the server build (e.g. `/version` on vLLM); fetched after every probe, outside the
    /// measurement, into the `server_version` label of `llm_probe_endpoint_info`.
    pub version_path: Option<String>,
    /// TLS settings for `https` base URLs: extra CA, client certificate (mTLS), verification.
    pub tls: Tls,
    /// Longest time to set up the TCP (and TLS) connection; at most `timeout`.
    pub connect_timeout: Duration,
    /// Whether each probe opens a fresh connection (default) or reuses an idle one.
    pub connection: ConnectionPolicy,
    /// Pinned baselines (`baseline_file:`), read and checked at load: at most one per scenario
    /// of the target, each naming this target and one of its scenarios. Exported as the
    /// `llm_probe_baseline_*` gauges; they do not change how the target is probed.
    pub baselines: Vec<Arc<baseline_file::Baseline>>,
    /// Prices and monthly budget (`cost:`), when the endpoint is metered: the money probes
    /// spend is counted, and a budget stretches the interval ([`cost`]).
    pub cost: Option<cost::Cost>,
    /// AWS signing (region and credentials) of a `bedrock` target that has no API key (`Some`
    /// exactly then); see [`aws`].
    pub aws: Option<aws::AwsAuth>,
    /// The engine's own Prometheus `/metrics` to read at each probe (`server_metrics_url:`);
    /// `None` when not configured.
    pub server_metrics: Option<ServerMetrics>,
    /// Where its replicas are discovered (`replicas:`); `None`: the target is probed at
    /// `base_url` as resolved by the system, one pair per scenario.
    pub replicas: Option<replicas::Replicas>,
}

/// Where and how a target's engine metrics are read before each probe ([`crate::engine`]).
#[derive(Clone, PartialEq, Eq)]
pub struct ServerMetrics {
    /// Absolute `http`/`https` URL of the engine's `/metrics` (e.g.
    /// `http://127.0.0.1:8000/metrics`), without user-info or fragment. Requested with the
    /// target's TLS settings; never shown unredacted.
    pub url: reqwest::Url,
    /// Which engine's metric names to read (`server_metrics_adapter:`, default `auto`).
    pub adapter: crate::engine::Adapter,
    /// Send the target's API key (`Authorization: Bearer …`) with the request
    /// (`server_metrics_send_api_key: true`); off by default, so a key never goes to a
    /// metrics endpoint the user did not mean it for.
    pub send_api_key: bool,
}

impl std::fmt::Debug for ServerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerMetrics")
            .field("url", &crate::sanitize::redact_url(self.url.as_str()))
            .field("adapter", &self.adapter.as_str())
            .field("send_api_key", &self.send_api_key)
            .finish()
    }
}

impl Target {
    /// True when `other` probes the same endpoint in the same way: every setting equal except
    /// the list of scenarios (a reload keeps the schedule and series of such a target's
    /// unchanged scenarios). Destructures every field, so a new field must be considered here.
    pub fn same_settings(&self, other: &Target) -> bool {
        let Target {
            name,
            protocol,
            base_url,
            model,
            api_key,
            api_key_source,
            api_key_file,
            credentials_error,
            headers,
            secret_headers,
            interval,
            timeout,
            temperature,
            extra_body,
            scenarios: _,
            slo,
            deployment,
            api_version,
            version_path,
            tls,
            connect_timeout,
            connection,
            // Exported, not probed with: the daemon re-exports the baselines on every reload.
            baselines: _,
            cost,
            aws,
            server_metrics,
            replicas,
        } = self;
        *name == other.name
            && *protocol == other.protocol
            && *base_url == other.base_url
            && *model == other.model
            && *api_key == other.api_key
            && *api_key_source == other.api_key_source
            && *api_key_file == other.api_key_file
            && *credentials_error == other.credentials_error
            && *headers == other.headers
            && *secret_headers == other.secret_headers
            && *interval == other.interval
            && *timeout == other.timeout
            && *temperature == other.temperature
            && *extra_body == other.extra_body
            && *slo == other.slo
            && *deployment == other.deployment
            && *api_version == other.api_version
            && *version_path == other.version_path
            && *tls == other.tls
            && *connect_timeout == other.connect_timeout
            && *connection == other.connection
            && *cost == other.cost
            && *aws == other.aws
            && *server_metrics == other.server_metrics
            && *replicas == other.replicas
    }

    /// One line for `check-config`: name, protocol, base_url, model, interval,
    /// timeout, scenario names and where the key comes from (never the key), with control
    /// characters escaped ([`crate::sanitize::terminal_safe`]).
    ///
    /// Example: `local-vllm: openai-chat http://127.0.0.1:8000/v1 model=my-model
    /// interval=15s timeout=10s scenarios=[chat_short, code_completion] api_key=env LOCAL_VLLM_KEY`
    pub fn summary(&self) -> String {
        let scenarios: Vec<&str> = self.scenarios.iter().map(|s| s.name.as_str()).collect();
        let line = format!(
            "{}: {} {} model={} interval={} timeout={} scenarios=[{}] api_key={}",
            self.name,
            self.protocol,
            self.base_url,
            self.model,
            humantime::format_duration(self.interval),
            humantime::format_duration(self.timeout),
            scenarios.join(", "),
            self.api_key_source.as_deref().unwrap_or("none"),
        ) + &self.aws_summary()
            + &self.transport_summary()
            + &self.baseline_summary()
            + &self
                .replicas
                .as_ref()
                .map(|r| r.summary())
                .unwrap_or_default();
        // File paths may hold any character: printed escaped.
        crate::sanitize::terminal_safe(&line).into_owned()
    }

    /// A `bedrock` target's signing for [`Target::summary`]: ` aws=env AWS_ACCESS_KEY_ID
    /// region=us-east-1` (or `aws=profile NAME in FILE`), nothing for other targets.
    fn aws_summary(&self) -> String {
        match &self.aws {
            Some(a) => format!(" aws={} region={}", a.source.describe(), a.region),
            None => String::new(),
        }
    }

    /// The interval its scenarios are probed at: `interval`, or longer when a monthly budget
    /// needs it ([`cost::spend`]).
    pub fn effective_interval(&self) -> Duration {
        cost::spend(self).map_or(self.interval, |s| s.effective_interval)
    }

    /// The temperature to send for `scenario`: the scenario's, else the target's.
    pub fn temperature_for(&self, scenario: &Scenario) -> Option<f64> {
        scenario.temperature.or(self.temperature)
    }

    /// The extra request-body keys for `scenario`: the target's `extra_body` with
    /// the scenario's merged over it (scenario wins, shallow merge).
    pub fn extra_body_for(
        &self,
        scenario: &Scenario,
    ) -> serde_json::Map<String, serde_json::Value> {
        let mut merged = self.extra_body.clone();
        for (k, v) in &scenario.extra_body {
            merged.insert(k.clone(), v.clone());
        }
        merged
    }
}

impl Target {
    /// The pinned baseline of `scenario`, if `baseline_file:` names one.
    pub fn baseline_for(&self, scenario: &str) -> Option<&Arc<baseline_file::Baseline>> {
        self.baselines.iter().find(|b| b.scenario == scenario)
    }

    /// True when the value of header `name` (any case) is a credential: a built-in secret
    /// header ([`is_secret_header`]) or one this target's `secret_headers` names. Such values
    /// are sent marked sensitive and never shown in `Debug` output.
    pub fn is_secret_header(&self, name: &str) -> bool {
        is_secret_header(name)
            || self
                .secret_headers
                .iter()
                .any(|s| s.eq_ignore_ascii_case(name))
    }

    /// The scenarios with a pinned baseline, for [`Target::summary`]: ` baselines=[chat, code]`,
    /// nothing when there are none.
    fn baseline_summary(&self) -> String {
        if self.baselines.is_empty() {
            return String::new();
        }
        let names: Vec<&str> = self.baselines.iter().map(|b| b.scenario.as_str()).collect();
        format!(" baselines=[{}]", names.join(", "))
    }

    /// The non-default transport settings, for [`Target::summary`]: ` connection=reuse`,
    /// ` tls.ca_file=…`, ` tls.client_cert=…`, and a loud ` TLS-VERIFICATION-OFF`.
    fn transport_summary(&self) -> String {
        let mut s = String::new();
        if self.connection != ConnectionPolicy::Fresh {
            s += &format!(" connection={}", self.connection.as_str());
        }
        if let Some(ca) = &self.tls.ca_file {
            s += &format!(" tls.ca_file={}", ca.display());
        }
        if let Some((cert, _)) = &self.tls.client_files {
            s += &format!(" tls.client_cert={}", cert.display());
        }
        if self.tls.insecure_skip_verify {
            s += " TLS-VERIFICATION-OFF";
        }
        s
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(k, v)| {
                let v = if self.is_secret_header(k) {
                    "<redacted>"
                } else {
                    v.as_str()
                };
                (k.as_str(), v)
            })
            .collect();
        let scenarios: Vec<&str> = self.scenarios.iter().map(|s| s.name.as_str()).collect();
        f.debug_struct("Target")
            .field("name", &self.name)
            .field("protocol", &self.protocol)
            .field("base_url", &self.base_url.as_str())
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .field("api_key_source", &self.api_key_source)
            .field("api_key_file", &self.api_key_file)
            .field("credentials_error", &self.credentials_error)
            .field("headers", &headers)
            .field("secret_headers", &self.secret_headers)
            .field("interval", &self.interval)
            .field("timeout", &self.timeout)
            .field("temperature", &self.temperature)
            .field("extra_body", &self.extra_body)
            .field("scenarios", &scenarios)
            .field("slo", &self.slo)
            .field("deployment", &self.deployment)
            .field("api_version", &self.api_version)
            .field("version_path", &self.version_path)
            .field("tls", &self.tls)
            .field("connect_timeout", &self.connect_timeout)
            .field("connection", &self.connection)
            .field("cost", &self.cost)
            .field("aws", &self.aws)
            .field("server_metrics", &self.server_metrics)
            .field("replicas", &self.replicas)
            .field(
                "baselines",
                &self
                    .baselines
                    .iter()
                    .map(|b| b.scenario.as_str())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Service-level objectives of a target. The metrics module makes each threshold a
/// histogram bucket boundary.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slo {
    /// P95 time-to-first-token objective (> 0). Default 300 ms.
    pub ttft_p95: Duration,
    /// Floor for output tokens per second (> 0, finite). Default 30.
    pub output_tokens_per_second_min: f64,
    /// Floor for the share of a hosted API's rate-limit window left (0 to 1, exclusive);
    /// below it, `LlmProbeRateLimitHeadroomLow` fires. Default 0.1.
    pub rate_limit_headroom_min: f64,
    /// Floor for the prefill speed of a generated long prompt (`prompt_tokens:`), prompt
    /// tokens per second of TTFT (> 0, finite); below it, `LlmProbePrefillBelowFloor` fires.
    /// No default: prefill speed differs by orders of magnitude between a CPU and a GPU.
    pub prefill_tokens_per_second_min: Option<f64>,
}

impl Default for Slo {
    fn default() -> Self {
        Slo {
            ttft_p95: Duration::from_millis(300),
            output_tokens_per_second_min: 30.0,
            rate_limit_headroom_min: 0.1,
            prefill_tokens_per_second_min: None,
        }
    }
}

/// A secret string (an API key). `Debug` and `Display` print `<redacted>`; the only
/// way to the value is [`Secret::expose`], to be called where the header is built.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: String) -> Self {
        Secret(value)
    }

    /// The secret value. Never log or format it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Everything wrong with a config file. `Display` prints one [`Problem`] per line.
/// Semantic problems are all collected; a YAML syntax or type error is reported alone.
#[derive(Debug, thiserror::Error)]
#[error("{}", display_lines(.problems))]
pub struct ConfigError {
    /// At least one problem, in file order where known.
    pub problems: Vec<Problem>,
}

fn display_lines(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(Problem::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

impl ConfigError {
    pub(crate) fn single(source: &str, message: String) -> Self {
        ConfigError {
            problems: vec![Problem::new(source, None, "", &message)],
        }
    }
}

/// One problem in a config file.
///
/// `Display`: `{source}:{line}:{column}: {path}: {message}`; `:{line}:{column}` is
/// omitted when unknown and `{path}: ` when empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The file path, or the `source` given to [`parse`], control characters escaped.
    pub source: String,
    /// 1-based line of the offending node, when known.
    pub line: Option<usize>,
    /// 1-based column of the offending node, when known.
    pub column: Option<usize>,
    /// Path of the offending key, e.g. `targets[0].interval`; empty for the whole file.
    pub path: String,
    /// A full sentence that names the field and says how to fix it.
    pub message: String,
}

impl Problem {
    /// The one way problems are made: `path` and `message` are made safe to show on any
    /// channel (a terminal, a log, an HTTP body) with [`crate::sanitize::for_message`]: a URL
    /// quoted anywhere in them loses its user-info and query values, control characters are
    /// escaped; so are those in `source` (a file name is not always chosen by the operator: a CI
    /// job checks every file of a pull request). `at` is the 1-based (line, column), when known.
    pub(crate) fn new(source: &str, at: Option<(usize, usize)>, path: &str, message: &str) -> Self {
        Problem {
            source: crate::sanitize::terminal_safe(source).into_owned(),
            line: at.map(|l| l.0),
            column: at.map(|l| l.1),
            path: crate::sanitize::for_message(path),
            message: crate::sanitize::for_message(message),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)?;
        if let (Some(line), Some(column)) = (self.line, self.column) {
            write!(f, ":{line}:{column}")?;
        }
        f.write_str(": ")?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

/// Reads and validates the config file at `path`; API keys named by `api_key_env`
/// come from the process environment. Relative `api_key_file` paths are resolved
/// against the directory of `path`.
///
/// # Errors
/// A [`ConfigError`] if the file cannot be read, is not valid YAML, does not match
/// the schema, or fails validation (see [`parse`]).
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    load_with(path, Secrets::Read)
}

/// Whether validation resolves the API keys a config names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Secrets {
    /// Look up every `api_key_env` variable and read every `api_key_file` and TLS file; one
    /// that cannot be read is a problem of the file. What `check-config` does.
    Read,
    /// As `Read`, but a credential that cannot be read is not a problem of the file: the
    /// target is kept with [`Target::credentials_error`] set and the problem is listed in
    /// [`Config::credential_problems`]. What `run`, a reload and `probe-once` do, so that one
    /// target's missing key never stops the others. Syntax and schema problems are errors as
    /// with `Read`.
    Isolate,
    /// Check that `api_key_env` and `api_key_file` are well-formed but do not look them up or
    /// read them: for checking a probes file where the keys are not present (a CI pipeline).
    /// The targets of the returned [`Config`] carry no key.
    Skip,
}

/// [`load`], with the choice of resolving the API keys or not.
///
/// # Errors
/// As [`load`].
pub fn load_with(path: &Path, secrets: Secrets) -> Result<Config, ConfigError> {
    let source = path.display().to_string();
    let bytes = files::read(path, files::MAX_CONFIG_BYTES).map_err(|e| {
        ConfigError::single(
            &source,
            match e {
                files::ReadError::NotFound | files::ReadError::PermissionDenied => {
                    format!("cannot read the config file: {e}; check the path and its permissions.")
                }
                _ => format!("cannot read the config file: {e}; {}.", e.fix()),
            },
        )
    })?;
    let text = String::from_utf8(bytes).map_err(|_| {
        ConfigError::single(
            &source,
            "the config file is not UTF-8 text; save it as UTF-8 (a probes file is YAML)."
                .to_string(),
        )
    })?;
    parse_with(&text, &source, &|name| std::env::var(name).ok(), secrets)
}

/// [`load_with`] on a blocking thread, for callers on the async runtime: the runtime's workers
/// never wait for a file (every read also has its own time limit, see [`files`]).
///
/// # Errors
/// As [`load`].
pub async fn load_off_runtime(path: PathBuf, secrets: Secrets) -> Result<Config, ConfigError> {
    let source = path.display().to_string();
    tokio::task::spawn_blocking(move || load_with(&path, secrets))
        .await
        .unwrap_or_else(|e| {
            Err(ConfigError::single(
                &source,
                format!("loading the config file failed inside llm-probe ({e}); this is a bug, please report it."),
            ))
        })
}

/// Parses and validates config `text`. `source` names it in errors and
/// [`Config::source`] (a path, or `"<built-in>"`); relative `api_key_file` paths are
/// resolved against the directory of `source`. `env` looks up environment variables
/// (for `api_key_env`), so tests need not touch the process environment.
///
/// # Errors
/// A [`ConfigError`] listing every semantic problem found, or the first YAML syntax
/// or type error.
pub fn parse(
    text: &str,
    source: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    parse_with(text, source, env, Secrets::Read)
}

/// [`parse`], with the choice of resolving the API keys or not.
///
/// # Errors
/// As [`parse`].
pub fn parse_with(
    text: &str,
    source: &str,
    env: &dyn Fn(&str) -> Option<String>,
    secrets: Secrets,
) -> Result<Config, ConfigError> {
    validate::parse(text, source, env, secrets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn public_types_are_send_sync() {
        assert_send_sync::<Config>();
        assert_send_sync::<Target>();
        assert_send_sync::<Scenario>();
        assert_send_sync::<ConfigError>();
    }

    #[test]
    fn problem_display_omits_unknown_parts() {
        let mut p = Problem {
            source: "f.yaml".into(),
            line: Some(3),
            column: Some(5),
            path: "targets[0].interval".into(),
            message: "Bad.".into(),
        };
        assert_eq!(p.to_string(), "f.yaml:3:5: targets[0].interval: Bad.");
        p.line = None;
        p.path.clear();
        assert_eq!(p.to_string(), "f.yaml: Bad.");
    }

    #[test]
    fn secret_is_redacted() {
        let s = Secret::new("sk-unit".into());
        assert_eq!(format!("{s} {s:?}"), "<redacted> <redacted>");
        assert_eq!(s.expose(), "sk-unit");
    }
}
