//! The `scenarios:` section: each scenario's name, messages and request shape.

use super::*;

impl Validator<'_> {
    pub(super) fn scenario(
        &mut self,
        path: &str,
        i: usize,
        mut raw: RawScenario,
        seen: &HashMap<String, usize>,
    ) -> Option<Scenario> {
        let before = self.problems.len();
        let pre = entity_prefix("scenario", raw.name.as_deref(), i);
        let structured = self.structured(path, &pre, &mut raw);
        let name = self.name(
            path,
            &pre,
            "scenario",
            raw.name.as_deref(),
            seen,
            "scenarios",
        );

        let long_prompt = self.long_prompt(path, &pre, raw.name.as_deref(), &raw);
        // The needle wants the code word as text; a tool call has none, and would fail
        // `context_truncated` as if the server had cut the prompt.
        let calls_tools = !structured.checks.tools.is_empty()
            && structured.tool_choice != Some(serde_json::Value::from("none"));
        if calls_tools
            && long_prompt
                .as_ref()
                .is_some_and(|lp| lp.code_word.is_some())
        {
            self.problem(
                format!("{path}.prompt_tokens"),
                format!("{pre}prompt_tokens with its needle (on by default) asks for the code word in text, but the scenario declares tools: an answer that calls one has no text and fails context_truncated as if the server had cut the prompt; set needle: false or tool_choice: none, or remove tools."),
            );
        }
        let turns = self.turns(path, &pre, &raw, &structured.checks.tools);
        let mut messages = Vec::new();
        match raw.messages {
            // With prompt_tokens (valid, or already reported) the generated message is the
            // prompt: no second error that messages is missing.
            None if raw.prompt_tokens.is_some() => {}
            None => self.problem(
                format!("{path}.messages"),
                format!("{pre}messages is required; add at least one message, e.g. [{{role: user, content: \"Hello\"}}]."),
            ),
            Some(list) if list.is_empty() => self.problem(
                format!("{path}.messages"),
                format!("{pre}messages is empty; add at least one message, e.g. [{{role: user, content: \"Hello\"}}]."),
            ),
            Some(list) => {
                for (j, m) in list.into_iter().enumerate() {
                    let mp = format!("{path}.messages[{j}]");
                    if let Some(m) = self.message(&mp, &pre, j, m) {
                        if long_prompt.is_some() && !["system", "developer"].contains(&m.role.as_str()) {
                            self.problem(
                                format!("{mp}.role"),
                                format!("{pre}messages[{j}] is a \"{}\" message, but prompt_tokens generates the user message; keep only system or developer messages beside prompt_tokens, or remove prompt_tokens.", m.role),
                            );
                        }
                        messages.push(m);
                    }
                }
            }
        }
        if let Some(lp) = &long_prompt {
            messages.push(Message::text("user", lp.text()));
        }

        self.tool_round_trips(path, &pre, &messages, &structured.checks.tools);
        let max_tokens = self.max_tokens(path, &pre, raw.max_tokens);

        let temperature = raw
            .temperature
            .and_then(|t| self.temperature(&format!("{path}.temperature"), &pre, t));

        let prefix_cache = match raw.prefix_cache.as_deref() {
            None | Some("cold") => PrefixCache::Cold,
            Some("warm") => PrefixCache::Warm,
            Some(other) => {
                self.problem(
                    format!("{path}.prefix_cache"),
                    format!("{pre}prefix_cache \"{other}\" is not supported; use cold (a unique nonce starts every prompt so the server's prefix cache cannot serve it) or warm (the prompt is sent verbatim)."),
                );
                PrefixCache::Cold
            }
        };

        let extra_body = raw.extra_body.unwrap_or_default();
        self.extra_body(&format!("{path}.extra_body"), &pre, &extra_body);

        if self.problems.len() != before {
            return None;
        }
        Some(Scenario {
            name: name?,
            messages,
            max_tokens: max_tokens?,
            temperature,
            prefix_cache,
            extra_body,
            checks: crate::check::Checks {
                code_word: long_prompt.as_ref().and_then(|lp| lp.code_word.clone()),
                ..structured.checks
            },
            tools: structured.tools,
            tool_choice: structured.tool_choice,
            response_format: structured.response_format,
            schema_cache: structured.schema_cache,
            cache_canary: raw.cache_canary.unwrap_or(false),
            long_prompt,
            turns,
        })
    }

    /// `turns:` at most [`MAX_TURNS`] − 1 non-empty user messages, not with a generated prompt,
    /// tools (each turn's answer must be text the next turn can carry), a prefix-cache canary
    /// or a warm prefix cache.
    fn turns(
        &mut self,
        path: &str,
        pre: &str,
        raw: &RawScenario,
        tools: &[crate::check::Tool],
    ) -> Vec<String> {
        use crate::config::MAX_TURNS;
        let Some(turns) = &raw.turns else {
            return Vec::new();
        };
        let tp = format!("{path}.turns");
        if turns.is_empty() || turns.len() >= MAX_TURNS {
            self.problem(
                tp.clone(),
                format!("{pre}turns has {} entries; give 1 to {} follow-up user messages (a conversation of at most {MAX_TURNS} requests), or remove turns.", turns.len(), MAX_TURNS - 1),
            );
        }
        for (k, t) in turns.iter().enumerate() {
            if t.trim().is_empty() {
                self.problem(
                    format!("{tp}[{k}]"),
                    format!("{pre}turns[{k}] is empty; write the user's follow-up message."),
                );
            }
        }
        for (set, key, why) in [
            (raw.prompt_tokens.is_some(), "prompt_tokens", "its code word is asked for in one request"),
            (!tools.is_empty(), "tools", "a turn answered with a tool call has no text for the next turn; send a tool round trip in messages instead"),
            (raw.cache_canary == Some(true), "cache_canary", "a multi-turn probe measures the cache per turn already"),
            (raw.prefix_cache.as_deref() == Some("warm"), "prefix_cache: warm", "without the per-probe nonce the previous probe's cache serves turn 1 too, and turn 2 has nothing to be faster than"),
        ] {
            if set {
                self.problem(
                    tp.clone(),
                    format!("{pre}turns cannot be combined with {key} ({why}); remove one of them."),
                );
            }
        }
        turns.clone()
    }

    /// `prompt_tokens` (MIN ..= MAX of [`crate::config::long_prompt`]) and `needle` (only
    /// with it; on by default).
    fn long_prompt(
        &mut self,
        path: &str,
        pre: &str,
        name: Option<&str>,
        raw: &RawScenario,
    ) -> Option<LongPrompt> {
        use crate::config::long_prompt::{MAX_TOKENS, MIN_TOKENS};
        let Some(n) = raw.prompt_tokens else {
            if raw.needle.is_some() {
                self.problem(
                    format!("{path}.needle"),
                    format!("{pre}needle is set without prompt_tokens; the code word is part of a generated prompt: add prompt_tokens (e.g. 4000) or remove needle."),
                );
            }
            return None;
        };
        let range = MIN_TOKENS as i64..=MAX_TOKENS as i64;
        if !range.contains(&n) {
            self.problem(
                format!("{path}.prompt_tokens"),
                format!("{pre}prompt_tokens is {n}; set it between {MIN_TOKENS} and {MAX_TOKENS} (the size of the generated prompt, in tokens, e.g. 4000)."),
            );
            return None;
        }
        Some(LongPrompt::new(
            name.unwrap_or_default(),
            n as u32,
            raw.needle.unwrap_or(true),
        ))
    }

    /// `max_tokens`: required, 1 ..= `u32::MAX`.
    fn max_tokens(&mut self, path: &str, pre: &str, raw: Option<i64>) -> Option<u32> {
        let mp = format!("{path}.max_tokens");
        match raw {
            None => {
                self.problem(
                    mp,
                    format!("{pre}max_tokens is required; set it to the number of output tokens each probe may generate, e.g. 64."),
                );
                None
            }
            Some(n) if n < 1 => {
                self.problem(
                    mp,
                    format!("{pre}max_tokens is {n}; set it to at least 1 (it caps the output tokens each probe generates, e.g. 64)."),
                );
                None
            }
            Some(n) => match u32::try_from(n) {
                Ok(n) => Some(n),
                Err(_) => {
                    self.problem(
                        mp,
                        format!(
                            "{pre}max_tokens {n} is too large; set it to at most {}.",
                            u32::MAX
                        ),
                    );
                    None
                }
            },
        }
    }
    pub(super) fn message(
        &mut self,
        path: &str,
        pre: &str,
        j: usize,
        raw: RawMessage,
    ) -> Option<Message> {
        let roles = ROLES.join(", ");
        let role = match raw.role {
            None => {
                self.problem(
                    format!("{path}.role"),
                    format!("{pre}messages[{j}] has no role; set role to one of: {roles}."),
                );
                None
            }
            Some(r) if !ROLES.contains(&r.as_str()) => {
                self.problem(
                    format!("{path}.role"),
                    format!(
                        "{pre}messages[{j}].role \"{r}\" is not supported; use one of: {roles}."
                    ),
                );
                None
            }
            Some(r) => Some(r),
        };
        let role = role?;
        let calls = raw.tool_calls.unwrap_or_default();
        if !calls.is_empty() && role != "assistant" {
            self.problem(
                format!("{path}.tool_calls"),
                format!("{pre}messages[{j}] is a \"{role}\" message with tool_calls; only an assistant message calls tools."),
            );
        }
        let mut tool_calls = Vec::new();
        for (k, c) in calls.into_iter().enumerate() {
            let cp = format!("{path}.tool_calls[{k}]");
            let name = match c.name {
                Some(n) if !n.trim().is_empty() => Some(n),
                _ => {
                    self.problem(
                        format!("{cp}.name"),
                        format!("{pre}messages[{j}].tool_calls[{k}] has no name; name one of the scenario's tools."),
                    );
                    None
                }
            };
            let arguments = match c.arguments {
                None => Some(serde_json::Map::new()),
                Some(serde_json::Value::Object(o)) => Some(o),
                Some(_) => {
                    self.problem(
                        format!("{cp}.arguments"),
                        format!("{pre}messages[{j}].tool_calls[{k}].arguments is not a mapping; write the call's arguments as a mapping, e.g. {{city: Paris}}."),
                    );
                    None
                }
            };
            let id = match c.id {
                Some(id) if id.trim().is_empty() => {
                    self.problem(
                        format!("{cp}.id"),
                        format!("{pre}messages[{j}].tool_calls[{k}].id is empty; leave it out (call_{j}_{k} is used) or give the call an id."),
                    );
                    None
                }
                Some(id) => Some(id),
                None => Some(format!("call_{j}_{k}")),
            };
            if let (Some(id), Some(name), Some(arguments)) = (id, name, arguments) {
                tool_calls.push(ToolCallMessage {
                    id,
                    name,
                    arguments,
                });
            }
        }
        if raw.tool_call_id.is_some() && role != "tool" {
            self.problem(
                format!("{path}.tool_call_id"),
                format!("{pre}messages[{j}] is a \"{role}\" message with tool_call_id; only a tool message answers a call."),
            );
        }
        if role == "tool" && raw.tool_call_id.is_none() {
            self.problem(
                format!("{path}.tool_call_id"),
                format!("{pre}messages[{j}] is a tool result without tool_call_id; set it to the id of the assistant tool call it answers."),
            );
        }
        let content = match raw.content {
            Some(c) if !c.trim().is_empty() => Some(c),
            _ if !tool_calls.is_empty() => Some(String::new()),
            _ => {
                self.problem(
                    format!("{path}.content"),
                    format!(
                        "{pre}messages[{j}] has no content; write the message text in content."
                    ),
                );
                None
            }
        };
        Some(Message {
            role,
            content: content?,
            tool_calls,
            tool_call_id: raw.tool_call_id,
        })
    }

    /// The tool calls and results of a scenario's `messages` fit together as every protocol
    /// wants them: every call names a declared tool and has its own id (letters, digits, `_` and
    /// `-`, as Anthropic and Bedrock require), and is answered once, by a `tool` message right
    /// after its assistant message (only other results between).
    pub(super) fn tool_round_trips(
        &mut self,
        path: &str,
        pre: &str,
        messages: &[Message],
        tools: &[crate::check::Tool],
    ) {
        let mut ids: Vec<&str> = Vec::new();
        // The calls of the latest assistant message not answered yet: (id, message, call).
        let mut open: Vec<(&str, usize, usize)> = Vec::new();
        // The calls answered, by the message that answered them.
        let mut answered: HashMap<&str, usize> = HashMap::new();
        for (j, m) in messages.iter().enumerate() {
            if m.role != "tool" {
                for (id, jj, kk) in open.drain(..) {
                    self.problem(
                        format!("{path}.messages[{jj}].tool_calls[{kk}]"),
                        format!("{pre}messages[{jj}].tool_calls[{kk}] (id \"{id}\") has no tool result after it; add {{role: tool, tool_call_id: {id}, content: ...}} right after messages[{jj}] (every protocol wants each call answered before the conversation goes on), or remove the call."),
                    );
                }
            }
            for (k, c) in m.tool_calls.iter().enumerate() {
                let cp = format!("{path}.messages[{j}].tool_calls[{k}]");
                if !tools.iter().any(|t| t.name == c.name) {
                    let declared: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
                    let why = match declared.is_empty() {
                        true => {
                            "the scenario declares no tools; add the tool to tools:".to_string()
                        }
                        false => {
                            format!("declare it in tools: (declared: {})", declared.join(", "))
                        }
                    };
                    self.problem(
                        format!("{cp}.name"),
                        format!("{pre}messages[{j}].tool_calls[{k}] calls \"{}\", which is not a declared tool; {why}.", c.name),
                    );
                }
                let well_formed = c.id.len() <= 64
                    && (c.id.bytes()).all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
                if !well_formed {
                    self.problem(
                        format!("{cp}.id"),
                        format!("{pre}messages[{j}].tool_calls[{k}].id \"{}\" is not an id every protocol takes; use at most 64 ASCII letters, digits, \"_\" and \"-\" (Anthropic and Bedrock refuse others), e.g. call_1.", c.id),
                    );
                }
                if ids.contains(&c.id.as_str()) {
                    self.problem(
                        format!("{cp}.id"),
                        format!("{pre}messages[{j}].tool_calls[{k}].id \"{}\" is used by an earlier call; give each call its own id.", c.id),
                    );
                } else {
                    open.push((&c.id, j, k));
                }
                ids.push(&c.id);
            }
            let Some(id) = &m.tool_call_id else {
                continue;
            };
            let tp = format!("{path}.messages[{j}].tool_call_id");
            if !ids.contains(&id.as_str()) {
                self.problem(
                    tp,
                    format!("{pre}messages[{j}].tool_call_id \"{id}\" answers no earlier assistant tool call; set it to the id of one (calls without an id are call_J_K: message J, call K)."),
                );
            } else if let Some(earlier) = answered.get(id.as_str()) {
                self.problem(
                    tp,
                    format!("{pre}messages[{j}].tool_call_id \"{id}\" answers a call that messages[{earlier}] already answered; give each call one result."),
                );
            } else if let Some(at) = open.iter().position(|(o, _, _)| *o == id.as_str()) {
                open.remove(at);
                answered.insert(id, j);
            } else {
                answered.insert(id, j);
                self.problem(
                    tp,
                    format!("{pre}messages[{j}].tool_call_id \"{id}\" answers a call of an earlier turn; put each tool result right after the assistant message that made the call (only other results between)."),
                );
            }
        }
        for (id, jj, kk) in open {
            self.problem(
                format!("{path}.messages[{jj}].tool_calls[{kk}]"),
                format!("{pre}messages[{jj}].tool_calls[{kk}] (id \"{id}\") has no tool result after it; add {{role: tool, tool_call_id: {id}, content: ...}} right after messages[{jj}] (every protocol wants each call answered before the conversation goes on), or remove the call."),
            );
        }
    }
}
