//! Answer checks: is the streamed answer right, not only fast? A scenario's `expect:` (and its
//! `tools:` / `response_format:`) become a compiled [`Checks`], evaluated on the assembled
//! answer ([`crate::measure::Answer`], reasoning kept apart) after the stream ended. A failed
//! check turns a measured probe into a failed one with the reason `wrong_answer`; the detail
//! names the check and a short, redacted excerpt of the answer. See `docs/answer-checks.md`.
//!
//! Check names are a fixed set ([`CheckName`]): they are the `check` label of
//! `llm_probe_answer_check_failures_total`; no answer text ever becomes a label.

pub mod degenerate;

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::measure::{Answer, Failure, FailureReason};

/// The fixed set of answer checks; the `check` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CheckName {
    /// A generated long prompt's needle (`prompt_tokens:`): the answer does not repeat the code
    /// word given at the prompt's start, as when the server cut the prompt to its context.
    ContextTruncated,
    /// `expect.contains`: every listed string occurs in the answer.
    Contains,
    /// `expect.regex`: every listed regular expression matches the answer.
    Regex,
    /// `expect.json`: the answer is one JSON document.
    Json,
    /// `expect.json_schema` (or `response_format`'s schema): the answer validates.
    JsonSchema,
    /// `expect.min_output_tokens`.
    MinOutputTokens,
    /// `expect.max_output_tokens`.
    MaxOutputTokens,
    /// Built in: a repeated n-gram loop at the end of the answer.
    RepetitionLoop,
    /// Built in: an answer of only punctuation or whitespace.
    PunctuationOnly,
    /// Built in: a chat-template or end-of-sequence token leaked into the answer.
    SpecialTokens,
    /// Built in: reasoning text but no answer and no tool call.
    EmptyAfterReasoning,
    /// `tool_choice` required a call (`required` or a named function) and the model answered
    /// with text.
    ToolCallMissing,
    /// A tool call named no declared tool, or its arguments are not JSON valid against the
    /// tool's `parameters` schema.
    ToolArguments,
}

impl CheckName {
    /// Every check, in label order.
    pub const ALL: [CheckName; 13] = [
        CheckName::ContextTruncated,
        CheckName::Contains,
        CheckName::Regex,
        CheckName::Json,
        CheckName::JsonSchema,
        CheckName::MinOutputTokens,
        CheckName::MaxOutputTokens,
        CheckName::RepetitionLoop,
        CheckName::PunctuationOnly,
        CheckName::SpecialTokens,
        CheckName::EmptyAfterReasoning,
        CheckName::ToolCallMissing,
        CheckName::ToolArguments,
    ];

    /// The label value (snake_case, stable).
    pub fn as_str(self) -> &'static str {
        match self {
            CheckName::ContextTruncated => "context_truncated",
            CheckName::Contains => "contains",
            CheckName::Regex => "regex",
            CheckName::Json => "json",
            CheckName::JsonSchema => "json_schema",
            CheckName::MinOutputTokens => "min_output_tokens",
            CheckName::MaxOutputTokens => "max_output_tokens",
            CheckName::RepetitionLoop => "repetition_loop",
            CheckName::PunctuationOnly => "punctuation_only",
            CheckName::SpecialTokens => "special_tokens",
            CheckName::EmptyAfterReasoning => "empty_after_reasoning",
            CheckName::ToolCallMissing => "tool_call_missing",
            CheckName::ToolArguments => "tool_arguments",
        }
    }
}

impl fmt::Display for CheckName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which built-in degeneration checks run (`expect.degeneration`); all on by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Degeneration {
    /// [`CheckName::RepetitionLoop`].
    pub repetition_loop: bool,
    /// [`CheckName::PunctuationOnly`].
    pub punctuation_only: bool,
    /// [`CheckName::SpecialTokens`].
    pub special_tokens: bool,
    /// [`CheckName::EmptyAfterReasoning`].
    pub empty_after_reasoning: bool,
}

impl Default for Degeneration {
    fn default() -> Self {
        Degeneration {
            repetition_loop: true,
            punctuation_only: true,
            special_tokens: true,
            empty_after_reasoning: true,
        }
    }
}

/// A JSON Schema, compiled once at config load.
#[derive(Clone)]
pub struct Schema {
    /// The schema as written.
    pub source: Value,
    validator: Arc<jsonschema::Validator>,
}

impl Schema {
    /// Compiles `source` (any draft `jsonschema` knows; remote `$ref`s are not fetched).
    ///
    /// Errors: the schema is not a valid JSON Schema (the message says where).
    pub fn compile(source: Value) -> Result<Self, String> {
        let validator = jsonschema::validator_for(&source).map_err(|e| e.to_string())?;
        Ok(Schema {
            source,
            validator: Arc::new(validator),
        })
    }

    /// `Err(first violation)` when `instance` does not validate.
    pub fn validate(&self, instance: &Value) -> Result<(), String> {
        self.validator.validate(instance).map_err(|e| {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { "/".into() } else { at };
            format!("at {at}: {e}")
        })
    }
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Schema").field(&self.source).finish()
    }
}

impl PartialEq for Schema {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

/// A declared tool: its function name and its compiled `parameters` schema (if it has one).
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// `function.name`.
    pub name: String,
    /// `function.parameters`, compiled.
    pub parameters: Option<Schema>,
}

/// A compiled regular expression that compares by its pattern.
#[derive(Debug, Clone)]
pub struct Pattern(pub regex::Regex);

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

/// A scenario's compiled answer checks. The default has the built-in degeneration checks only.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Checks {
    /// Strings that must all occur (`expect.contains`).
    pub contains: Vec<String>,
    /// Expressions that must all match (`expect.regex`), compiled with case folding when
    /// `case_insensitive`.
    pub regex: Vec<Pattern>,
    /// Compare `contains` without case (`expect.case_insensitive`); `regex` is compiled so.
    pub case_insensitive: bool,
    /// The answer must be one JSON document (`expect.json`).
    pub json: bool,
    /// The answer must validate against this schema (`expect.json_schema`, or the schema of
    /// `response_format` when `expect` gives none).
    pub json_schema: Option<Schema>,
    /// Least output tokens (`expect.min_output_tokens`).
    pub min_output_tokens: Option<u64>,
    /// Most output tokens (`expect.max_output_tokens`).
    pub max_output_tokens: Option<u64>,
    /// Built-in checks (`expect.degeneration`); `None` = the defaults (all on).
    pub degeneration: Option<Degeneration>,
    /// Declared tools (`tools:`): calls are checked against them.
    pub tools: Vec<Tool>,
    /// `tool_choice` requires a call (`required`, `any` or a named function).
    pub tool_call_required: bool,
    /// The code word a generated long prompt starts with (`prompt_tokens:` with `needle`): the
    /// answer must repeat it ([`repeats_code_word`]).
    pub code_word: Option<String>,
}

/// Letters and digits of `s`, in lower case: how an answer and a code word are compared.
fn fold(s: &str) -> Vec<char> {
    s.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// True when `answer` repeats `code`, compared on letters and digits only and without case
/// (`The code word is Violet Harbor 3817.` repeats `violet-harbor-3817`).
pub fn repeats_code_word(answer: &str, code: &str) -> bool {
    let (answer, code) = (fold(answer), fold(code));
    !code.is_empty() && answer.windows(code.len()).any(|w| w == code)
}

/// True when `answer` ends with the start of `code` (at least three of its letters and digits,
/// compared as [`repeats_code_word`] does) but not the whole of it: the answer stopped inside
/// the code word (`The code word is "violet-harb`), as when `max_tokens` cut it.
pub fn ends_inside_code_word(answer: &str, code: &str) -> bool {
    let (answer, code) = (fold(answer), fold(code));
    (3..code.len()).any(|k| answer.ends_with(&code[..k]))
}

/// Characters of the answer shown in a failure detail.
pub const EXCERPT_CHARS: usize = 80;

/// Why a check failed: the check (a label) and a detail (for logs and the status page only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckFailure {
    /// The check that failed.
    pub check: CheckName,
    /// What was expected, and an excerpt of the answer (not yet redacted: see
    /// [`CheckFailure::into_failure`]).
    pub detail: String,
}

impl CheckFailure {
    /// The probe failure: reason `wrong_answer`, detail `check <name>: <detail>` with every
    /// secret `redact` knows replaced, cut to [`Failure::MAX_DETAIL`] bytes.
    pub fn into_failure(self, redact: impl Fn(&mut String)) -> Failure {
        let mut detail = format!("check {}: {}", self.check, self.detail);
        redact(&mut detail);
        Failure::new(FailureReason::WrongAnswer, detail)
    }
}

/// At most [`EXCERPT_CHARS`] characters of `text`, quoted and escaped (control characters
/// visible), `…` when cut.
pub fn excerpt(text: &str) -> String {
    let mut cut: String = text.chars().take(EXCERPT_CHARS).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}

impl Checks {
    /// True when the scenario declares tools.
    pub fn has_tools(&self) -> bool {
        !self.tools.is_empty()
    }

    /// Evaluates every check on `answer` and the probe's `output_tokens` (N of the
    /// measurement); the first failure in [`CheckName::ALL`] order, else `Ok`. A probe that
    /// made tool calls is checked on its calls; the text checks then apply only to the text
    /// it wrote, if any.
    pub fn evaluate(&self, answer: &Answer, output_tokens: u64) -> Result<(), CheckFailure> {
        let fail = |check, detail: String| Err(CheckFailure { check, detail });
        let text = answer.text.as_str();
        let called = !answer.tool_calls.is_empty();
        let checks_text = !called || !text.trim().is_empty();
        if let Some(code) = self.code_word.as_deref() {
            if !repeats_code_word(text, code) {
                return fail(
                    CheckName::ContextTruncated,
                    format!(
                        "the answer does not repeat the code word {code:?} given at the start of the prompt (a server that cuts a prompt to its context drops its start): the answer was {}",
                        excerpt(text)
                    ),
                );
            }
        }
        if checks_text {
            for want in &self.contains {
                let found = if self.case_insensitive {
                    text.to_lowercase().contains(&want.to_lowercase())
                } else {
                    text.contains(want.as_str())
                };
                if !found {
                    return fail(
                        CheckName::Contains,
                        format!("expected {want:?}, the answer was {}", excerpt(text)),
                    );
                }
            }
            for re in &self.regex {
                if !re.0.is_match(text) {
                    return fail(
                        CheckName::Regex,
                        format!(
                            "expected a match of /{}/, the answer was {}",
                            re.0.as_str(),
                            excerpt(text)
                        ),
                    );
                }
            }
            if self.json || self.json_schema.is_some() {
                let doc = match serde_json::from_str::<Value>(strip_fence(text)) {
                    Ok(v) => v,
                    Err(e) => {
                        let check = match self.json {
                            true => CheckName::Json,
                            false => CheckName::JsonSchema,
                        };
                        return fail(
                            check,
                            format!(
                                "the answer is not JSON ({e}){}: {}",
                                cut_note(text, answer),
                                excerpt(text)
                            ),
                        );
                    }
                };
                if let Some(schema) = &self.json_schema {
                    if let Err(e) = schema.validate(&doc) {
                        return fail(
                            CheckName::JsonSchema,
                            format!("the answer does not match the schema {e}"),
                        );
                    }
                }
            }
        }
        if let Some(min) = self.min_output_tokens.filter(|&m| output_tokens < m) {
            return fail(
                CheckName::MinOutputTokens,
                format!("{output_tokens} output tokens, expected at least {min}"),
            );
        }
        if let Some(max) = self.max_output_tokens.filter(|&m| output_tokens > m) {
            return fail(
                CheckName::MaxOutputTokens,
                format!("{output_tokens} output tokens, expected at most {max}"),
            );
        }
        let d = self.degeneration.unwrap_or_default();
        if d.repetition_loop {
            if let Some(p) = degenerate::repetition_loop(text) {
                return fail(
                    CheckName::RepetitionLoop,
                    format!(
                        "the answer ends in a loop of a {p}-unit pattern: …{}",
                        excerpt(tail(text, EXCERPT_CHARS))
                    ),
                );
            }
        }
        if d.punctuation_only && !called && degenerate::punctuation_only(text) {
            return fail(
                CheckName::PunctuationOnly,
                format!("the answer has no letter or digit: {}", excerpt(text)),
            );
        }
        if d.special_tokens {
            if let Some(t) = degenerate::leaked_special_token(text) {
                return fail(
                    CheckName::SpecialTokens,
                    format!("the answer contains the special token {t}"),
                );
            }
        }
        if d.empty_after_reasoning
            && !called
            && text.trim().is_empty()
            && answer.reasoning_bytes > 0
        {
            return fail(
                CheckName::EmptyAfterReasoning,
                format!(
                    "{} bytes of reasoning and no answer (finish with a larger max_tokens, or the template lost the answer)",
                    answer.reasoning_bytes
                ),
            );
        }
        if self.tool_call_required && !called {
            return fail(
                CheckName::ToolCallMissing,
                format!(
                    "a tool call was required, the model answered {}",
                    excerpt(text)
                ),
            );
        }
        if self.has_tools() {
            for call in &answer.tool_calls {
                self.check_call(call, answer)
                    .or_else(|d| fail(CheckName::ToolArguments, d))?;
            }
        }
        Ok(())
    }

    fn check_call(&self, call: &crate::measure::ToolCall, answer: &Answer) -> Result<(), String> {
        let Some(tool) = self.tools.iter().find(|t| t.name == call.name) else {
            let names: Vec<&str> = self.tools.iter().map(|t| t.name.as_str()).collect();
            return Err(format!(
                "a call of {:?}, which is not a declared tool ({})",
                excerpt(&call.name),
                names.join(", ")
            ));
        };
        let args = if call.arguments.trim().is_empty() {
            "{}"
        } else {
            call.arguments.as_str()
        };
        let doc: Value = serde_json::from_str(args).map_err(|e| {
            format!(
                "the arguments of {} are not JSON ({e}){}: {}",
                tool.name,
                cut_note(args, answer),
                excerpt(args)
            )
        })?;
        if let Some(schema) = &tool.parameters {
            schema.validate(&doc).map_err(|e| {
                format!(
                    "the arguments of {} do not match its parameters {e}",
                    tool.name
                )
            })?;
        }
        Ok(())
    }
}

/// `text` without surrounding whitespace and one surrounding Markdown code fence
/// (```` ```json … ``` ````), which models add around JSON they were asked for.
fn strip_fence(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return t;
    };
    // Drop the info string (`json`) on the fence's first line.
    match body.split_once('\n') {
        Some((_, inner)) => inner.trim(),
        None => body.trim(),
    }
}

/// When the probe kept only part of `kept` (the answer's text or a call's arguments, each cut
/// at [`crate::measure::MAX_ANSWER_BYTES`]): why its JSON does not parse, so a long valid answer is
/// not reported as broken JSON without saying so. Empty otherwise.
fn cut_note(kept: &str, answer: &Answer) -> String {
    // A cut string ends at most 3 bytes short of the cap (on a character boundary).
    let at_cap = kept.len() + 3 >= crate::measure::MAX_ANSWER_BYTES;
    if answer.dropped_bytes == 0 || !at_cap {
        return String::new();
    }
    format!(
        "; the probe kept only the first {} KiB and dropped {} bytes, so the JSON is cut: ask for a shorter answer",
        crate::measure::MAX_ANSWER_BYTES >> 10,
        answer.dropped_bytes
    )
}

/// The last `n` characters of `text`.
fn tail(text: &str, n: usize) -> &str {
    let start = text
        .char_indices()
        .rev()
        .nth(n.saturating_sub(1))
        .map_or(0, |(i, _)| i);
    &text[start..]
}

#[cfg(test)]
mod tests;
