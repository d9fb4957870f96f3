//! YAML features serde_yaml leaves to its user: tags and merge keys. A custom tag (`!env X`)
//! would be silently dropped, so every one, on a value or a key, is a problem; merge keys
//! (`<<: *base`) are applied after checking that each merges mappings.

use std::cell::OnceCell;

use serde_yaml::Value;

use super::locate::Locations;
use super::schema_errors::{doc_prefix, serde_error};
use super::validate::located;
use super::ConfigError;

/// Reports every tag in `doc` (as problems located in `text`), then applies its merge keys.
/// Returns whether the document had a merge key.
pub(super) fn yaml_features(
    doc: &mut Value,
    text: &str,
    source: &str,
    locations: &OnceCell<Locations>,
) -> Result<bool, ConfigError> {
    let mut problems: Vec<(String, String)> = Vec::new();
    let mut merges = false;
    visit(doc, "", &mut |path, v| {
        match v {
        Value::Tagged(t) => problems.push((
            path.to_string(),
            format!("{}the YAML tag {} is not supported (llm-probe reads plain values); remove it and write the value itself.", doc_prefix(doc, path), t.tag),
        )),
        Value::Mapping(m) => {
            for k in m.keys() {
                if let Value::Tagged(t) = k {
                    let at = match t.value.as_str() {
                        Some(k) if !path.is_empty() => format!("{path}.{k}"),
                        Some(k) => k.to_string(),
                        None => path.to_string(),
                    };
                    problems.push((
                        at,
                        format!("{}the YAML tag {} on a key is not supported (llm-probe reads plain keys); remove it.", doc_prefix(doc, path), t.tag),
                    ));
                }
            }
            let Some(value) = m.get("<<") else { return };
            merges = true;
            let mergeable = match value {
                Value::Mapping(_) => true,
                Value::Sequence(list) => list.iter().all(Value::is_mapping),
                _ => false,
            };
            if !mergeable {
                let at = if path.is_empty() { "<<".to_string() } else { format!("{path}.<<") };
                problems.push((
                    at,
                    format!("{}a merge key (<<) must be followed by a mapping, an alias of one (<<: *base) or a list of them; fix the value or write the keys out.", doc_prefix(doc, path)),
                ));
            }
        }
        _ => {}
    }
    });
    if !problems.is_empty() {
        let locations = locations.get_or_init(|| Locations::build(text));
        return Err(ConfigError {
            problems: located(locations, source, problems),
        });
    }
    if merges {
        doc.apply_merge()
            .map_err(|e| serde_error(e, source, None))?;
    }
    Ok(merges)
}

/// Calls `f` on every node of `v` with its path (`targets[0].headers.X-Team`), parents first.
fn visit(v: &Value, path: &str, f: &mut dyn FnMut(&str, &Value)) {
    f(path, v);
    match v {
        Value::Mapping(m) => {
            for (k, child) in m {
                if let Some(k) = k.as_str() {
                    let p = if path.is_empty() {
                        k.to_string()
                    } else {
                        format!("{path}.{k}")
                    };
                    visit(child, &p, f);
                }
            }
        }
        Value::Sequence(list) => {
            for (i, child) in list.iter().enumerate() {
                visit(child, &format!("{path}[{i}]"), f);
            }
        }
        Value::Tagged(t) => visit(&t.value, path, f),
        _ => {}
    }
}
