//! YAML features serde_yaml leaves to its user: tags and merge keys. A custom tag (`!env X`)
//! would be silently dropped, so every one, on a value or a key, is a problem; merge keys
//! (`<<: *base`) are applied after checking that each merges mappings. And flow nesting depth:
//! libyaml (under serde_yaml) reads a whole document before serde_yaml's own recursion limit
//! applies, and its scanner takes time quadratic in the depth of `[`/`{` nesting (20,000 `[`
//! take seconds, 100,000 minutes), so a deeper file is refused before serde_yaml sees it.

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

/// Deepest nesting of flow collections (`[ ]`, `{ }`) a probes file may have (a probes file
/// needs 2 or 3; `extra_body` may nest its own JSON). serde_yaml refuses more than 128 levels
/// of any nesting, but only after libyaml has read the whole document.
pub(super) const MAX_DEPTH: usize = 100;

/// Refuses `text` when its flow collections nest deeper than [`MAX_DEPTH`], in one linear pass
/// over the text, before serde_yaml (whose libyaml scanner is quadratic in that depth) sees it.
pub(super) fn check_depth(text: &str, source: &str) -> Result<(), ConfigError> {
    match deep_flow(text, MAX_DEPTH) {
        None => Ok(()),
        Some(at) => Err(ConfigError {
            problems: vec![super::Problem::new(
                source,
                Some(at),
                "",
                &format!("lists and mappings in [ ] or {{ }} are nested more than {MAX_DEPTH} levels deep here; a probes file needs 2 or 3 (check for a run of unclosed [ or {{)."),
            )],
        }),
    }
}

/// The 1-based (line, column) where flow collections first nest deeper than `max`, reading just
/// enough of YAML's lexical rules not to count brackets inside quoted scalars, comments, block
/// scalars (`|`, `>`) or block-context plain text: a bracket opens a collection where a node may
/// start (after `: `, `- `, `? `, `---`, a tag or an anchor, at a line start, or anywhere inside
/// a flow collection).
fn deep_flow(text: &str, max: usize) -> Option<(usize, usize)> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    // The indentation a block scalar's lines exceed, while inside one.
    let mut block_scalar: Option<usize> = None;
    let mut node_start = true;
    for (n, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start_matches(' ').len();
        if let Some(parent) = block_scalar {
            if line.trim().is_empty() || indent > parent {
                continue;
            }
            block_scalar = None;
        }
        let mut rest = line;
        if depth == 0 && quote.is_none() {
            node_start = true;
            if let Some(after) = line.strip_prefix("---") {
                if after.is_empty() || after.starts_with([' ', '\t']) {
                    rest = after;
                }
            }
        }
        let offset = line.len() - rest.len();
        let mut chars = rest.char_indices().peekable();
        let mut after_space = true;
        while let Some((i, c)) = chars.next() {
            let next_is_space = chars.peek().is_none_or(|(_, n)| n.is_whitespace());
            if let Some(q) = quote {
                match c {
                    '\\' if q == '"' => {
                        chars.next();
                    }
                    '\'' if q == '\'' && chars.peek().is_some_and(|(_, n)| *n == '\'') => {
                        chars.next();
                    }
                    c if c == q => {
                        quote = None;
                        node_start = false;
                    }
                    _ => {}
                }
                after_space = false;
                continue;
            }
            match c {
                ' ' | '\t' => {
                    after_space = true;
                    continue;
                }
                '#' if after_space => break,
                '"' | '\'' if node_start => quote = Some(c),
                '[' | '{' if node_start || depth > 0 => {
                    depth += 1;
                    if depth > max {
                        return Some((n + 1, offset + i + 1));
                    }
                    node_start = true;
                }
                ']' | '}' if depth > 0 => {
                    depth -= 1;
                    node_start = false;
                }
                ',' if depth > 0 => node_start = true,
                ':' if depth > 0 || next_is_space => node_start = true,
                '-' | '?' if depth == 0 && node_start && next_is_space => {}
                '|' | '>' if depth == 0 && node_start => {
                    block_scalar = Some(indent);
                    break;
                }
                // A tag, an anchor or an alias: a node may still start after it.
                '!' | '&' | '*' if node_start => {
                    while chars.next_if(|(_, n)| !n.is_whitespace()).is_some() {}
                }
                _ => node_start = false,
            }
            after_space = false;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_nesting_deeper_than_the_limit_is_refused_with_its_place() {
        let open = |n: usize| "[".repeat(n);
        let ok = format!("a: {}{}\n", open(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(check_depth(&ok, "f").is_ok());
        let deep = format!("a: 1\nb: {}\n", open(MAX_DEPTH + 1));
        let e = check_depth(&deep, "f").unwrap_err().to_string();
        assert!(e.starts_with("f:2:104: "), "{e}");
        assert!(e.contains("nested more than 100 levels"), "{e}");
        // Every way a node can start.
        for prefix in [
            "- ",
            "? ",
            "--- ",
            "!!seq ",
            "&a ",
            "!t &a ",
            "x: !!seq ",
            "{a: ",
            "{\"a\":",
        ] {
            let deep = format!("{prefix}{}", open(MAX_DEPTH + 1));
            assert!(deep_flow(&deep, MAX_DEPTH).is_some(), "{prefix:?}");
        }
        // Brackets that are text: quoted, commented, in a block scalar, in block plain text.
        let text = open(MAX_DEPTH + 1);
        for ok in [
            format!("a: \"{text}\"\n"),
            format!("a: '{text}'\n"),
            format!("a: \"x\\\"{text}\"\n"),
            format!("a: 'it''s {text}'\n"),
            format!("a: 1 # {text}\n"),
            format!("a: |\n  {text}\n  {text}\nb: 1\n"),
            format!("  - content: >-\n      {text}\n"),
            format!("a: x {text}\n"),
            format!("a: [\"{text}\", '{text}']\n"),
        ] {
            assert_eq!(deep_flow(&ok, MAX_DEPTH), None, "{ok:?}");
        }
    }
}
