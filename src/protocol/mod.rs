//! Per-API adapters: each turns a (target, scenario) into an HTTP request and the decoded events
//! of its stream into marks on the probe's [`Observations`]. One file per protocol, one shape
//! (the [`StreamProtocol`] trait), over the shared decoder and timeline.

mod json;
mod openai_chat;
mod prompt;

use std::time::Instant;

use crate::config::{Protocol, Scenario, Target};
use crate::decode::sse::SseEvent;
use crate::measure::{Failure, Observations};

pub use prompt::{new_nonce, render_messages};

/// An HTTP request ready to send: always a `POST` with a JSON body.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    /// Full URL of the streaming endpoint.
    pub url: reqwest::Url,
    /// Headers in addition to `content-type: application/json`. Values may hold the API key:
    /// never log them.
    pub headers: Vec<(String, String)>,
    /// The JSON body.
    pub body: serde_json::Value,
}

/// What the probe loop does after an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flow {
    /// Keep reading.
    Continue,
    /// The protocol's terminator (or an error event) was seen: the stream is over.
    Done,
    /// The stream cannot be trusted any further (e.g. a JSON payload that does not parse).
    Fail(Failure),
}

/// The stream side of a protocol: a fresh value per probe, fed every decoded SSE event with the
/// instant its read returned.
pub trait StreamProtocol: Send {
    /// Interprets one event: records tokens, counts, identity, errors and anomalies in `obs`.
    fn on_event(&mut self, event: &SseEvent, at: Instant, obs: &mut Observations) -> Flow;

    /// Whether a pending, unterminated event at end of stream is this protocol's harmless
    /// terminator (e.g. `data: [DONE]` without its blank line).
    fn is_terminator(&self, event: &SseEvent) -> bool;
}

/// Builds the streaming request for `scenario` on `target`. `nonce`, when given, is put at the
/// very start of the prompt (cold prefix cache, see [`crate::config::PrefixCache`]).
pub fn build_request(target: &Target, scenario: &Scenario, nonce: Option<&str>) -> RequestSpec {
    match target.protocol {
        Protocol::OpenAiChat => openai_chat::build_request(target, scenario, nonce),
    }
}

/// A fresh stream interpreter for `protocol`.
pub fn stream_for(protocol: Protocol) -> Box<dyn StreamProtocol> {
    match protocol {
        Protocol::OpenAiChat => Box::new(openai_chat::OpenAiChatStream),
    }
}

/// Joins `base` (e.g. `http://host:8000/v1`) and `path` (e.g. `chat/completions`), keeping any
/// path prefix of `base` whether or not it ends in `/`.
pub(crate) fn join_url(base: &reqwest::Url, path: &str) -> reqwest::Url {
    let mut url = base.clone();
    let joined = format!("{}/{}", base.path().trim_end_matches('/'), path);
    url.set_path(&joined);
    url
}

/// The request headers every protocol sends: `accept: text/event-stream`, then the target's
/// configured headers.
pub(crate) fn common_headers(target: &Target) -> Vec<(String, String)> {
    let mut h = vec![("accept".to_string(), "text/event-stream".to_string())];
    h.extend(target.headers.iter().cloned());
    h
}

/// Merges the target's then the scenario's `extra_body` into `body` (scenario wins).
pub(crate) fn merge_extra_body(body: &mut serde_json::Value, target: &Target, scenario: &Scenario) {
    if let Some(obj) = body.as_object_mut() {
        obj.extend(target.extra_body_for(scenario));
    }
}
