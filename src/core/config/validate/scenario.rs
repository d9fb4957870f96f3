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

        let mut messages = Vec::new();
        match raw.messages {
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
                    if let Some(m) = self.message(&format!("{path}.messages[{j}]"), &pre, j, m) {
                        messages.push(m);
                    }
                }
            }
        }

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
            checks: structured.checks,
            tools: structured.tools,
            tool_choice: structured.tool_choice,
            response_format: structured.response_format,
            schema_cache: structured.schema_cache,
            cache_canary: raw.cache_canary.unwrap_or(false),
        })
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
        let content = match raw.content {
            Some(c) if !c.trim().is_empty() => Some(c),
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
            role: role?,
            content: content?,
        })
    }
}
