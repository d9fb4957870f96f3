//! A scenario's answer checks and structured requests: `expect:`, `tools:`, `tool_choice:`,
//! `response_format:` and `schema_cache:` (`docs/answer-checks.md`).

use serde_json::Value as Json;

use super::*;
use crate::check::{Checks, Degeneration, Pattern, Schema, Tool};
use crate::config::raw::RawExpect;
use crate::config::SchemaCache;

/// What the structured keys of one scenario validate to.
pub(super) struct Structured {
    pub checks: Checks,
    pub tools: Vec<Json>,
    pub tool_choice: Option<Json>,
    pub response_format: Option<Json>,
    pub schema_cache: SchemaCache,
}

/// Most patterns or strings per list, and the longest regex, so a config cannot make the
/// checks expensive by accident.
const MAX_LIST: usize = 32;
const MAX_REGEX_LEN: usize = 1024;
/// Largest `json_schema_file` read.
const MAX_SCHEMA_FILE_BYTES: u64 = crate::config::files::MAX_SMALL_FILE_BYTES;
/// Characters of a schema compiler's error shown (its messages quote the offending schema,
/// which may be megabytes).
const MAX_SCHEMA_ERROR_CHARS: usize = 300;

impl Validator<'_> {
    pub(super) fn structured(
        &mut self,
        path: &str,
        pre: &str,
        raw: &mut RawScenario,
    ) -> Structured {
        let mut checks = Checks::default();
        let expect = raw.expect.take().unwrap_or_default();
        self.expect(&format!("{path}.expect"), pre, expect, &mut checks);

        let tools = raw.tools.take().unwrap_or_default();
        for (i, tool) in tools.iter().enumerate() {
            if let Some(t) = self.tool(&format!("{path}.tools[{i}]"), pre, i, tool) {
                if checks.tools.iter().any(|o| o.name == t.name) {
                    self.problem(
                        format!("{path}.tools[{i}]"),
                        format!("{pre}tools[{i}] repeats the tool name \"{}\"; give each tool its own name.", t.name),
                    );
                }
                checks.tools.push(t);
            }
        }
        let tool_choice = raw.tool_choice.take();
        if let Some(choice) = &tool_choice {
            let tp = format!("{path}.tool_choice");
            if tools.is_empty() {
                self.problem(
                    tp.clone(),
                    format!("{pre}tool_choice is set but the scenario declares no tools; add tools: or remove tool_choice."),
                );
            }
            match choice {
                Json::String(s) if matches!(s.as_str(), "auto" | "none") => {}
                Json::String(s) if matches!(s.as_str(), "required" | "any") => {
                    checks.tool_call_required = true;
                }
                Json::Object(o) => {
                    let named = o
                        .get("function")
                        .and_then(|f| f.get("name"))
                        .or_else(|| o.get("name"))
                        .and_then(Json::as_str);
                    match named {
                        Some(n) if checks.tools.iter().any(|t| t.name == n) => {
                            checks.tool_call_required = true;
                        }
                        Some(n) => self.problem(
                            tp,
                            format!("{pre}tool_choice names the function \"{n}\", which is not among the scenario's tools; name one of them."),
                        ),
                        None => self.problem(
                            tp,
                            format!("{pre}tool_choice is an object without a function name; use auto, none, required or {{type: function, function: {{name: NAME}}}}."),
                        ),
                    }
                }
                _ => self.problem(
                    tp,
                    format!("{pre}tool_choice must be auto, none, required or {{type: function, function: {{name: NAME}}}}."),
                ),
            }
        }

        let response_format = raw.response_format.take();
        if let Some(rf) = &response_format {
            let rp = format!("{path}.response_format");
            match rf.get("type").and_then(Json::as_str) {
                Some("json_schema") => {
                    let schema = rf.get("json_schema").and_then(|j| j.get("schema"));
                    match schema {
                        Some(s) => match Schema::compile(s.clone()) {
                            Ok(s) => {
                                // The format's schema is the answer's check unless expect
                                // names its own.
                                if checks.json_schema.is_none() {
                                    checks.json_schema = Some(s);
                                }
                            }
                            Err(e) => self.problem(
                                rp,
                                format!("{pre}response_format.json_schema.schema is not a valid JSON Schema ({}); fix the schema.", schema_error(&e)),
                            ),
                        },
                        None => self.problem(
                            rp,
                            format!("{pre}response_format of type json_schema needs json_schema: {{name: NAME, schema: {{…}}}}."),
                        ),
                    }
                }
                Some("json_object") => checks.json = true,
                Some("text") => {}
                _ => self.problem(
                    rp,
                    format!("{pre}response_format needs a type: json_schema (with json_schema: {{name, schema}}), json_object or text."),
                ),
            }
        }

        let schema_cache = match raw.schema_cache.as_deref() {
            None | Some("warm") => SchemaCache::Warm,
            Some("cold") => SchemaCache::Cold,
            Some(other) => {
                self.problem(
                    format!("{path}.schema_cache"),
                    format!("{pre}schema_cache \"{other}\" is not supported; use warm (the schema is sent verbatim) or cold (a nonce in its description makes the engine compile it on every probe)."),
                );
                SchemaCache::Warm
            }
        };
        if schema_cache == SchemaCache::Cold && response_format.is_none() && tools.is_empty() {
            self.problem(
                format!("{path}.schema_cache"),
                format!("{pre}schema_cache: cold needs a schema to vary; add response_format (type json_schema) or tools."),
            );
        }
        Structured {
            checks,
            tools,
            tool_choice,
            response_format,
            schema_cache,
        }
    }

    fn expect(&mut self, path: &str, pre: &str, raw: RawExpect, checks: &mut Checks) {
        checks.case_insensitive = raw.case_insensitive.unwrap_or(false);
        let contains = raw.contains.map(|c| c.into_vec()).unwrap_or_default();
        if contains.len() > MAX_LIST || contains.iter().any(String::is_empty) {
            self.problem(
                format!("{path}.contains"),
                format!("{pre}expect.contains needs 1 to {MAX_LIST} non-empty strings."),
            );
        }
        checks.contains = contains;
        let regexes = raw.regex.map(|c| c.into_vec()).unwrap_or_default();
        if regexes.len() > MAX_LIST {
            self.problem(
                format!("{path}.regex"),
                format!("{pre}expect.regex has more than {MAX_LIST} expressions; combine them."),
            );
        }
        for (i, r) in regexes.iter().enumerate() {
            // The length first: a long pattern is not compiled at all.
            if r.len() > MAX_REGEX_LEN {
                self.problem(
                    format!("{path}.regex[{i}]"),
                    format!("{pre}expect.regex[{i}] is longer than {MAX_REGEX_LEN} characters; shorten it."),
                );
                continue;
            }
            let built = regex::RegexBuilder::new(r)
                .case_insensitive(checks.case_insensitive)
                .size_limit(1 << 20)
                .dfa_size_limit(1 << 20)
                .build();
            match built {
                Ok(re) => checks.regex.push(Pattern(re)),
                Err(e) => self.problem(
                    format!("{path}.regex[{i}]"),
                    format!("{pre}expect.regex[{i}] is not a valid regular expression (Rust regex syntax): {}", one_line(&e.to_string())),
                ),
            }
        }
        checks.json = raw.json.unwrap_or(false);
        let schema = match (raw.json_schema, raw.json_schema_file) {
            (Some(_), Some(_)) => {
                self.problem(
                    format!("{path}.json_schema_file"),
                    format!("{pre}expect sets both json_schema and json_schema_file; keep one."),
                );
                None
            }
            (Some(s), None) => Some((s, format!("{path}.json_schema"), "json_schema".to_string())),
            (None, Some(file)) => {
                let full = self.relative_to_config(&file);
                // Bounded like every file a config names: a regular file of at most 1 MiB,
                // read within the time limit (not a FIFO, a device or a directory).
                let read = crate::config::files::read(&full, MAX_SCHEMA_FILE_BYTES)
                    .map_err(|e| format!("{e}; {}", e.fix()))
                    .and_then(|b| serde_json::from_slice::<Json>(&b).map_err(|e| e.to_string()));
                match read {
                    Ok(s) => Some((
                        s,
                        format!("{path}.json_schema_file"),
                        format!("json_schema_file {}", full.display()),
                    )),
                    Err(e) => {
                        self.problem(
                            format!("{path}.json_schema_file"),
                            format!("{pre}expect.json_schema_file {} cannot be read as JSON ({e}); give the path of a JSON Schema file, relative to this file.", full.display()),
                        );
                        None
                    }
                }
            }
            (None, None) => None,
        };
        if let Some((source, at, what)) = schema {
            match Schema::compile(source) {
                Ok(s) => checks.json_schema = Some(s),
                Err(e) => self.problem(
                    at,
                    format!(
                        "{pre}expect.{what} is not a valid JSON Schema ({}); fix the schema.",
                        schema_error(&e)
                    ),
                ),
            }
        }
        checks.min_output_tokens = raw.min_output_tokens;
        checks.max_output_tokens = raw.max_output_tokens;
        if let (Some(min), Some(max)) = (raw.min_output_tokens, raw.max_output_tokens) {
            if min > max {
                self.problem(
                    format!("{path}.min_output_tokens"),
                    format!("{pre}expect.min_output_tokens ({min}) is above max_output_tokens ({max}); swap them."),
                );
            }
        }
        if let Some(d) = raw.degeneration {
            let on = Degeneration::default();
            checks.degeneration = Some(Degeneration {
                repetition_loop: d.repetition_loop.unwrap_or(on.repetition_loop),
                punctuation_only: d.punctuation_only.unwrap_or(on.punctuation_only),
                special_tokens: d.special_tokens.unwrap_or(on.special_tokens),
                empty_after_reasoning: d.empty_after_reasoning.unwrap_or(on.empty_after_reasoning),
            });
        }
    }

    /// One `tools:` entry: `{type: function, function: {name, description?, parameters?}}`.
    fn tool(&mut self, path: &str, pre: &str, i: usize, raw: &Json) -> Option<Tool> {
        let function = raw.get("function");
        let name = function.and_then(|f| f.get("name")).and_then(Json::as_str);
        let Some(name) = name.filter(|n| !n.is_empty()) else {
            self.problem(
                path.to_string(),
                format!("{pre}tools[{i}] needs the shape {{type: function, function: {{name: NAME, description: TEXT, parameters: {{JSON Schema}}}}}}."),
            );
            return None;
        };
        let parameters = match function.and_then(|f| f.get("parameters")) {
            None => None,
            Some(p) => match Schema::compile(p.clone()) {
                Ok(s) => Some(s),
                Err(e) => {
                    self.problem(
                        format!("{path}.function.parameters"),
                        format!("{pre}tools[{i}].function.parameters is not a valid JSON Schema ({}); fix the schema.", schema_error(&e)),
                    );
                    return None;
                }
            },
        };
        Some(Tool {
            name: name.to_string(),
            parameters,
        })
    }
}

/// `text` on one line (regex errors are multi-line drawings).
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` cut to `max` characters, `…` when cut.
fn cut(text: &str, max: usize) -> String {
    let mut out: String = text.chars().take(max).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

/// A schema compiler's error for a config message: on one line, at most
/// [`MAX_SCHEMA_ERROR_CHARS`] characters (its messages quote the schema).
fn schema_error(e: &str) -> String {
    one_line(&cut(e, MAX_SCHEMA_ERROR_CHARS))
}
