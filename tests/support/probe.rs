//! One probe, built the same way by every test that judges a single outcome: a simulator
//! script (`common::stream(…).fault(…)`), then [`OneProbe`] — one target, one scenario — run
//! against a fresh simulator ([`OneProbe::of`]) or any URL ([`OneProbe::at`]).

use std::time::Duration;

use llm_probe::config::{Config, Protocol};
use llm_probe::measure::ProbeOutcome;
use llm_probe::probe::{Limits, Prober};
use llm_probe::simulate::{Fault, Script, Simulator};

/// Builder steps on a simulator script, so a test names only what differs from
/// `common::stream(ttft, itl, tokens)`.
pub trait ScriptExt {
    /// The script playing `fault`.
    fn fault(self, fault: Fault) -> Script;
    /// The script answering as `model`.
    fn model(self, model: &str) -> Script;
}

impl ScriptExt for Script {
    fn fault(self, fault: Fault) -> Script {
        Script { fault, ..self }
    }

    fn model(self, model: &str) -> Script {
        Script {
            model: model.into(),
            ..self
        }
    }
}

/// The fault-matrix stream: the first token after 30 ms, then 20 tokens 3 ms apart, playing
/// `fault`.
pub fn faulty(fault: Fault) -> Script {
    super::stream(30, 3, 20).fault(fault)
}

/// Where a target of protocol `p` points on a server whose root is `root` (e.g. the
/// simulator's `root_url()`), and the target keys that protocol needs.
pub fn location(p: Protocol, root: &str) -> (String, &'static str) {
    match p {
        Protocol::Ollama | Protocol::Tgi | Protocol::LlamaCpp | Protocol::Gemini => {
            (root.to_string(), "")
        }
        Protocol::AzureOpenAi => (root.to_string(), "    deployment: dep-1\n"),
        Protocol::VertexGemini => (
            format!("{root}/v1/projects/sim-project/locations/us-central1"),
            "",
        ),
        Protocol::Bedrock => (root.to_string(), "    aws_region: us-east-1\n"),
        _ => (format!("{root}/v1"), ""),
    }
}

/// Probes `cfg`'s first scenario of its first target once, with `limits` instead of the
/// defaults when given.
pub async fn probe_first(cfg: &Config, limits: Option<Limits>) -> ProbeOutcome {
    let t = cfg.targets[0].clone();
    let mut prober = Prober::new(t.clone()).unwrap();
    if let Some(limits) = limits {
        prober = prober.with_limits(limits);
    }
    prober.probe(&t.scenarios[0]).await
}

/// One probe of target `sim` (model `sim-model` unless set), scenario `chat` ("Say
/// something.", at most 64 tokens unless set), every 10 s, with a 2 s timeout unless set. The
/// environment gives every `AWS_*` variable the value `AKIDTEST` (Bedrock's credentials; no
/// other protocol reads them) unless set.
#[derive(Clone)]
pub struct OneProbe {
    protocol: Protocol,
    timeout: String,
    model: String,
    messages: String,
    max_tokens: u32,
    env: fn(&str) -> Option<String>,
    limits: Option<Limits>,
}

impl Default for OneProbe {
    fn default() -> Self {
        OneProbe {
            protocol: Protocol::OpenAiChat,
            timeout: "2s".into(),
            model: "sim-model".into(),
            messages: r#"[{role: user, content: "Say something."}]"#.into(),
            max_tokens: 64,
            env: |v| v.starts_with("AWS_").then(|| "AKIDTEST".to_string()),
            limits: None,
        }
    }
}

impl OneProbe {
    /// The wire protocol (openai-chat by default).
    pub fn protocol(self, protocol: Protocol) -> Self {
        OneProbe { protocol, ..self }
    }

    /// The probe's timeout, as the probes file writes it.
    pub fn timeout(self, timeout: &str) -> Self {
        OneProbe {
            timeout: timeout.into(),
            ..self
        }
    }

    /// The target's model.
    pub fn model(self, model: &str) -> Self {
        OneProbe {
            model: model.into(),
            ..self
        }
    }

    /// The scenario's `messages:` as a YAML flow sequence.
    pub fn messages(self, messages: &str) -> Self {
        OneProbe {
            messages: messages.into(),
            ..self
        }
    }

    /// The scenario's `max_tokens`.
    pub fn max_tokens(self, max_tokens: u32) -> Self {
        OneProbe { max_tokens, ..self }
    }

    /// The environment the config reads (credentials).
    pub fn env(self, env: fn(&str) -> Option<String>) -> Self {
        OneProbe { env, ..self }
    }

    /// The per-probe limits instead of the defaults.
    pub fn limits(self, limits: Limits) -> Self {
        OneProbe {
            limits: Some(limits),
            ..self
        }
    }

    /// Limits for a stream judged to its end: 2 MiB of body, 10 ms of draining after the end.
    pub fn drained(self) -> Self {
        self.limits(Limits {
            max_stream_bytes: 2 << 20,
            drain_after_end: Duration::from_millis(10),
            ..Limits::default()
        })
    }

    /// The probes file for a target at `base_url` with `target_extra` keys.
    pub fn yaml(&self, base_url: &str, target_extra: &str) -> String {
        format!(
            "defaults:\n  interval: 10s\n  timeout: {}\nscenarios:\n  - name: chat\n    messages: {}\n    max_tokens: {}\ntargets:\n  - name: sim\n    protocol: {}\n    base_url: {base_url}\n    model: {}\n{target_extra}",
            self.timeout,
            self.messages,
            self.max_tokens,
            self.protocol.as_str(),
            self.model,
        )
    }

    fn config(&self, base_url: &str, target_extra: &str) -> Config {
        let yaml = self.yaml(base_url, target_extra);
        llm_probe::config::parse(&yaml, "<test>", &self.env)
            .unwrap_or_else(|e| panic!("test config should load:\n{e}\n---\n{yaml}"))
    }

    /// Probes `base_url` once, as given (whatever the protocol).
    pub async fn at(&self, base_url: &str) -> ProbeOutcome {
        probe_first(&self.config(base_url, ""), self.limits).await
    }

    /// Probes the server whose root is `root` once, at the protocol's [`location`].
    pub async fn at_root(&self, root: &str) -> ProbeOutcome {
        let (base_url, extra) = location(self.protocol, root);
        probe_first(&self.config(&base_url, extra), self.limits).await
    }

    /// Probes a fresh simulator playing `script` once; returns the outcome and the simulator
    /// (what it received, when it sent each event).
    pub async fn of(&self, script: Script) -> (ProbeOutcome, Simulator) {
        let sim = super::simulator(script).await;
        let outcome = self.at_root(&sim.root_url()).await;
        (outcome, sim)
    }
}
