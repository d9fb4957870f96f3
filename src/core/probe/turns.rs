//! A multi-turn probe (`turns:`): the scenario's messages, then for each follow-up the whole
//! conversation so far (each earlier answer as an assistant message) and the follow-up, on the
//! same nonce so that the server's prefix cache can serve the earlier turns. Each request is
//! measured like a probe; the probe's own numbers are the first turn's, every turn's are in
//! [`crate::measure::Observations::turns`]. The scenario's `expect:` checks the last turn's
//! answer; the earlier turns get the built-in degeneration checks only. A failed turn fails the
//! probe with its reason (the detail names the turn) and ends the conversation.
//! The server's rate-limit headers are the latest turn's, and a `Retry-After` of any turn holds
//! the next probe back.

use crate::check::Checks;
use crate::config::{Message, Scenario};
use crate::measure::{Failure, ProbeOutcome, Turn};

use super::{Armed, Limits};

/// Runs every turn of `scenario`; returns the probe's outcome and what its requests after the
/// first cost at `cost` (the first is priced by the caller, as a single request is).
pub(super) async fn converse(
    armed: &Armed,
    scenario: &Scenario,
    limits: &Limits,
    nonce: Option<String>,
    cost: Option<&crate::config::cost::Cost>,
) -> (ProbeOutcome, f64) {
    let total = scenario.turns.len() + 1;
    let turn = |k: usize, messages: Vec<Message>| Scenario {
        messages,
        turns: Vec::new(),
        checks: match k == total {
            true => scenario.checks.clone(),
            false => Checks {
                degeneration: scenario.checks.degeneration,
                ..Checks::default()
            },
        },
        ..scenario.clone()
    };
    let mut messages = scenario.messages.clone();
    let mut outcome = armed
        .probe(&turn(1, messages.clone()), limits, nonce.clone())
        .await;
    outcome.observations.turns.push(record(1, &outcome));
    if let Err(f) = &mut outcome.result {
        *f = Failure::new(f.reason, format!("turn 1 of {total}: {}", f.detail));
    }
    let mut answer = outcome.observations.answer.text.clone();
    let mut spent = 0.0;
    for (i, follow_up) in scenario.turns.iter().enumerate() {
        if outcome.result.is_err() {
            break;
        }
        let k = i + 2;
        messages.push(Message::text("assistant", std::mem::take(&mut answer)));
        messages.push(Message::text("user", follow_up.as_str()));
        let next = armed
            .probe(&turn(k, messages.clone()), limits, nonce.clone())
            .await;
        if let Some(cost) = cost {
            spent += super::spent(cost, &next);
        }
        outcome.observations.turns.push(record(k, &next));
        answer = next.observations.answer.text.clone();
        // What the server said of its quota is freshest on the latest turn (each turn spent
        // some), and a turn it asked to be left alone after holds the next probe back.
        if next.observations.rate_limits.is_some() {
            outcome.observations.rate_limits = next.observations.rate_limits.clone();
        }
        if let Some(wait) = next.observations.retry_after {
            let longest = outcome
                .observations
                .retry_after
                .map_or(wait, |w| w.max(wait));
            outcome.observations.retry_after = Some(longest);
        }
        if let Err(f) = next.result {
            outcome.observations.http_status = next.observations.http_status;
            outcome.observations.answer.failed_check = next.observations.answer.failed_check;
            outcome.result = Err(Failure::new(
                f.reason,
                format!("turn {k} of {total}: {}", f.detail),
            ));
        }
    }
    (outcome, spent)
}

/// What turn `k`'s request measured.
fn record(k: usize, o: &ProbeOutcome) -> Turn {
    let obs = &o.observations;
    let m = o.result.as_ref().ok();
    Turn {
        turn: k,
        ttft: m.map(|m| m.ttft),
        output_tokens_per_second: m.and_then(|m| m.output_tokens_per_second),
        output_tokens: m.map(|m| m.output_tokens).or(obs.usage.completion_tokens),
        prompt_tokens: obs.usage.prompt_tokens,
        cached_prompt_tokens: obs.usage.cached_prompt_tokens,
        server_prefill: m.and_then(|m| m.server_prefill),
        failure: o.result.as_ref().err().map(|f| f.reason),
    }
}
