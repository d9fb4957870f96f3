//! TEMPORARY STUB — replaced by the config branch.
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug)]
pub struct Config {
    pub source: String,
    pub scenarios: Vec<Arc<Scenario>>,
    pub targets: Vec<Arc<Target>>,
}
#[derive(Debug)]
pub struct Scenario {
    pub name: String,
    pub messages: Vec<Message>,
    pub max_tokens: u32,
    pub temperature: Option<f64>,
    pub prefix_cache: PrefixCache,
    pub extra_body: serde_json::Map<String, serde_json::Value>,
}
#[derive(Debug, Clone)]
pub struct Message {
    pub role: String,
    pub content: String,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PrefixCache {
    #[default]
    Cold,
    Warm,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    OpenAiChat,
}
impl Protocol {
    pub fn as_str(self) -> &'static str {
        "openai-chat"
    }
}
#[derive(Debug)]
pub struct Target {
    pub name: String,
    pub protocol: Protocol,
    pub base_url: reqwest::Url,
    pub model: String,
    pub api_key: Option<Secret>,
    pub api_key_source: Option<String>,
    pub headers: Vec<(String, String)>,
    pub interval: Duration,
    pub timeout: Duration,
    pub temperature: Option<f64>,
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    pub scenarios: Vec<Arc<Scenario>>,
    pub slo: Slo,
}
impl Target {
    pub fn summary(&self) -> String {
        self.name.clone()
    }
}
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slo {
    pub ttft_p95: Duration,
    pub output_tokens_per_second_min: f64,
}
impl Default for Slo {
    fn default() -> Self {
        Slo {
            ttft_p95: Duration::from_millis(300),
            output_tokens_per_second_min: 30.0,
        }
    }
}
#[derive(Clone)]
pub struct Secret(String);
impl Secret {
    pub fn new(s: String) -> Self {
        Secret(s)
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}
impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}
#[derive(Debug, thiserror::Error)]
#[error("config error")]
pub struct ConfigError {
    pub problems: Vec<String>,
}
pub fn load(_path: &std::path::Path) -> Result<Config, ConfigError> {
    Err(ConfigError { problems: vec![] })
}
pub fn parse(
    _text: &str,
    _source: &str,
    _env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    Err(ConfigError { problems: vec![] })
}
