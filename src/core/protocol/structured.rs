//! The structured parts of a request: tool definitions, `tool_choice` and `response_format`
//! (OpenAI chat's shape, as a scenario declares them), their mapping onto the other protocols
//! with tools (Responses, Anthropic, Ollama, Gemini, Bedrock), and the per-probe nonce that makes
//! a schema unique for `schema_cache: cold` (`docs/answer-checks.md`).

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

/// One declared tool, protocol-neutral: its name, description and parameters schema (with the
/// cold nonce already in it).
struct Function {
    name: Value,
    description: Option<Value>,
    parameters: Value,
}

/// The scenario's tools as [`Function`]s, each `parameters` marked with the cold nonce when the
/// scenario asks for a cold schema. A tool without `parameters` takes `{type: object}`.
fn functions(scenario: &Scenario) -> Vec<Function> {
    let nonce = (scenario.schema_cache == SchemaCache::Cold).then(super::new_nonce);
    scenario
        .tools
        .iter()
        .map(|t| {
            let f = t.get("function").unwrap_or(&Value::Null);
            let mut parameters = f
                .get("parameters")
                .cloned()
                .unwrap_or_else(|| json!({"type": "object"}));
            if let Some(n) = &nonce {
                mark(&mut parameters, n);
            }
            Function {
                name: f.get("name").cloned().unwrap_or(Value::Null),
                description: f.get("description").cloned(),
                parameters,
            }
        })
        .collect()
}

/// A scenario's `tool_choice`, protocol-neutral.
#[derive(Debug, PartialEq)]
enum Choice<'a> {
    Auto,
    None,
    /// `required` (OpenAI) or `any` (Anthropic, Bedrock).
    Required,
    /// One function by name.
    Named(&'a Value),
}

/// The scenario's `tool_choice` (`None` when it gives none: the server's default, `auto`).
fn choice(scenario: &Scenario) -> Option<Choice<'_>> {
    let c = scenario.tool_choice.as_ref()?;
    Some(match c {
        Value::String(s) if s == "none" => Choice::None,
        Value::String(s) if s == "required" || s == "any" => Choice::Required,
        Value::Object(o) => match o
            .get("function")
            .and_then(|f| f.get("name"))
            .or_else(|| o.get("name"))
        {
            Some(n) => Choice::Named(n),
            None => Choice::Auto,
        },
        _ => Choice::Auto,
    })
}

/// Adds the scenario's tools to an OpenAI Responses body: `tools: [{type: function, name,
/// description, parameters}]` (flat, not nested in `function`), `tool_choice` `auto`, `none`,
/// `required` or `{type: function, name}`.
pub(super) fn add_responses(body: &mut Value, scenario: &Scenario) {
    let tools: Vec<Value> = functions(scenario)
        .into_iter()
        .map(|f| {
            let mut t = json!({"type": "function", "name": f.name, "parameters": f.parameters});
            if let Some(d) = f.description {
                t["description"] = d;
            }
            t
        })
        .collect();
    if tools.is_empty() {
        return;
    }
    body["tools"] = Value::Array(tools);
    if let Some(c) = choice(scenario) {
        body["tool_choice"] = match c {
            Choice::Auto => json!("auto"),
            Choice::None => json!("none"),
            Choice::Required => json!("required"),
            Choice::Named(n) => json!({"type": "function", "name": n}),
        };
    }
}

/// Adds the scenario's tools to an Anthropic Messages body: `tools: [{name, description,
/// input_schema}]`, `tool_choice` `{type: auto | none | any | tool (with name)}`.
pub(super) fn add_anthropic(body: &mut Value, scenario: &Scenario) {
    let tools: Vec<Value> = functions(scenario)
        .into_iter()
        .map(|f| {
            let mut t = json!({"name": f.name, "input_schema": f.parameters});
            if let Some(d) = f.description {
                t["description"] = d;
            }
            t
        })
        .collect();
    if tools.is_empty() {
        return;
    }
    body["tools"] = Value::Array(tools);
    if let Some(c) = choice(scenario) {
        body["tool_choice"] = match c {
            Choice::Auto => json!({"type": "auto"}),
            Choice::None => json!({"type": "none"}),
            Choice::Required => json!({"type": "any"}),
            Choice::Named(n) => json!({"type": "tool", "name": n}),
        };
    }
}

/// Adds the scenario's tools to an Ollama chat body: `tools` in OpenAI chat's shape. Ollama has
/// no `tool_choice`: it is not sent (the answer checks still require a call when the scenario
/// does).
pub(super) fn add_ollama(body: &mut Value, scenario: &Scenario) {
    let tools: Vec<Value> = functions(scenario)
        .into_iter()
        .map(|f| {
            let mut func = json!({"name": f.name, "parameters": f.parameters});
            if let Some(d) = f.description {
                func["description"] = d;
            }
            json!({"type": "function", "function": func})
        })
        .collect();
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
}

/// Adds the scenario's tools to a Gemini body: `tools: [{functionDeclarations: [{name,
/// description, parametersJsonSchema}]}]` (the full JSON Schema field, not the OpenAPI subset of
/// `parameters`), and `toolConfig.functionCallingConfig.mode` `AUTO`, `NONE` or `ANY` (with
/// `allowedFunctionNames` for a named function).
pub(super) fn add_gemini(body: &mut Value, scenario: &Scenario) {
    let decls: Vec<Value> = functions(scenario)
        .into_iter()
        .map(|f| {
            let mut d = json!({"name": f.name, "parametersJsonSchema": f.parameters});
            if let Some(text) = f.description {
                d["description"] = text;
            }
            d
        })
        .collect();
    if decls.is_empty() {
        return;
    }
    body["tools"] = json!([{ "functionDeclarations": decls }]);
    if let Some(c) = choice(scenario) {
        let config = match c {
            Choice::Auto => json!({"mode": "AUTO"}),
            Choice::None => json!({"mode": "NONE"}),
            Choice::Required => json!({"mode": "ANY"}),
            Choice::Named(n) => json!({"mode": "ANY", "allowedFunctionNames": [n]}),
        };
        body["toolConfig"] = json!({ "functionCallingConfig": config });
    }
}

/// Adds the scenario's tools to a Bedrock Converse body: `toolConfig.tools[].toolSpec` with
/// `inputSchema.json`, and `toolConfig.toolChoice` `{auto: {}}`, `{any: {}}` or `{tool: {name}}`.
/// Converse has no `none`: with `tool_choice: none` no `toolChoice` is sent (the model's
/// default, auto).
pub(super) fn add_bedrock(body: &mut Value, scenario: &Scenario) {
    let tools: Vec<Value> = functions(scenario)
        .into_iter()
        .map(|f| {
            let mut spec = json!({"name": f.name, "inputSchema": {"json": f.parameters}});
            if let Some(d) = f.description {
                spec["description"] = d;
            }
            json!({ "toolSpec": spec })
        })
        .collect();
    if tools.is_empty() {
        return;
    }
    let mut config = json!({ "tools": tools });
    match choice(scenario) {
        Some(Choice::Auto) => config["toolChoice"] = json!({"auto": {}}),
        Some(Choice::Required) => config["toolChoice"] = json!({"any": {}}),
        Some(Choice::Named(n)) => config["toolChoice"] = json!({"tool": {"name": n}}),
        Some(Choice::None) | None => {}
    }
    body["toolConfig"] = config;
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
