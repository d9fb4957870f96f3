//! The structured parts of a request: tool definitions, `tool_choice` and `response_format`
//! (OpenAI chat's shape), and the per-probe nonce that makes a schema unique for
//! `schema_cache: cold` (`docs/answer-checks.md`).

use serde_json::{json, Value};

use crate::config::{Scenario, SchemaCache};

/// Adds the scenario's `tools`, `tool_choice` and `response_format` to an OpenAI chat body.
/// With `schema_cache: cold` every schema gets a fresh nonce in its `description`, so an engine
/// that caches compiled grammars by schema text compiles it again on this probe.
pub(super) fn add_openai(body: &mut Value, scenario: &Scenario) {
    let nonce = (scenario.schema_cache == SchemaCache::Cold).then(super::new_nonce);
    if !scenario.tools.is_empty() {
        let mut tools = scenario.tools.clone();
        if let Some(n) = &nonce {
            for t in &mut tools {
                if let Some(p) = t.get_mut("function").and_then(|f| f.get_mut("parameters")) {
                    mark(p, n);
                }
            }
        }
        body["tools"] = Value::Array(tools);
        if let Some(choice) = &scenario.tool_choice {
            body["tool_choice"] = openai_tool_choice(choice);
        }
    }
    if let Some(rf) = &scenario.response_format {
        let mut rf = rf.clone();
        if let (Some(n), Some(schema)) = (
            &nonce,
            rf.get_mut("json_schema").and_then(|j| j.get_mut("schema")),
        ) {
            mark(schema, n);
        }
        body["response_format"] = rf;
    }
}

/// `tool_choice` in OpenAI's spelling: `any` (Anthropic's word) is `required`, and a bare
/// `{name: NAME}` is `{type: function, function: {name: NAME}}`.
fn openai_tool_choice(choice: &Value) -> Value {
    match choice {
        Value::String(s) if s == "any" => json!("required"),
        Value::Object(o) if o.get("function").is_none() => match o.get("name") {
            Some(n) => json!({"type": "function", "function": {"name": n}}),
            None => choice.clone(),
        },
        _ => choice.clone(),
    }
}

/// Puts `nonce` at the start of a schema object's `description` (added when absent): a
/// description constrains nothing, so the answer's validity is unchanged.
fn mark(schema: &mut Value, nonce: &str) {
    if let Some(o) = schema.as_object_mut() {
        let old = o.get("description").and_then(Value::as_str).unwrap_or("");
        let new = match old {
            "" => format!("probe {nonce}"),
            _ => format!("probe {nonce}. {old}"),
        };
        o.insert("description".into(), Value::String(new));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cold_schema_differs_on_every_probe_and_keeps_its_description() {
        let mut a = json!({"type": "object", "description": "a city"});
        let mut b = a.clone();
        mark(&mut a, "n1");
        mark(&mut b, "n2");
        assert_ne!(a, b);
        assert!(a["description"].as_str().unwrap().ends_with("a city"));
    }

    #[test]
    fn tool_choice_spellings_become_openai_ones() {
        assert_eq!(openai_tool_choice(&json!("any")), json!("required"));
        assert_eq!(
            openai_tool_choice(&json!({"name": "f"})),
            json!({"type": "function", "function": {"name": "f"}})
        );
        assert_eq!(openai_tool_choice(&json!("auto")), json!("auto"));
    }
}
