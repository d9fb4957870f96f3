//! Line/column lookup for semantic problems: walk yaml-rust2's marked events and
//! remember where every node starts, keyed by the same path syntax serde_yaml uses
//! (`targets[0].headers.X-Team`).

use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// Path → 1-based (line, column) of the node's first character.
#[derive(Debug, Default)]
pub(crate) struct Locations {
    map: HashMap<String, (usize, usize)>,
    keys: HashMap<String, (usize, usize)>,
}

impl Locations {
    /// Builds the map; on a parse error (already reported by serde_yaml) it is
    /// whatever was collected so far.
    pub fn build(text: &str) -> Self {
        let mut walker = Walker::default();
        let _ = Parser::new_from_str(text).load(&mut walker, false);
        Locations {
            map: walker.map,
            keys: walker.keys,
        }
    }

    /// Location of `path`, else of its nearest ancestor that has one (e.g. the
    /// enclosing mapping for a missing key).
    pub fn find(&self, path: &str) -> Option<(usize, usize)> {
        let mut p = path;
        loop {
            // The root mapping's position says nothing useful; report no location.
            if p.is_empty() {
                return None;
            }
            if let Some(loc) = self.map.get(p) {
                return Some(*loc);
            }
            p = parent(p);
        }
    }

    /// Location of the key that ends `path` as written (an unknown key is reported there),
    /// else [`find`](Self::find)'s answer.
    pub fn find_key(&self, path: &str) -> Option<(usize, usize)> {
        self.keys.get(path).copied().or_else(|| self.find(path))
    }
}

/// `a.b[2].c` → `a.b[2]` → `a.b` → `a` → ``.
fn parent(path: &str) -> &str {
    match path.rfind(['.', '[']) {
        Some(i) => &path[..i],
        None => "",
    }
}

enum Frame {
    Map {
        path: String,
        key: Option<String>,
        /// yaml-rust2 marks a block mapping's start after its first key, so the
        /// mapping is placed at its first key; this mark is the fallback when empty.
        unplaced: Option<(usize, usize)>,
    },
    Seq {
        path: String,
        next: usize,
    },
}

#[derive(Default)]
struct Walker {
    stack: Vec<Frame>,
    map: HashMap<String, (usize, usize)>,
    /// Where each mapping key itself is written (`map` has where its value starts).
    keys: HashMap<String, (usize, usize)>,
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

impl Walker {
    /// Called at the start of every node (at `at`); returns its path, or `None`
    /// when the node is a mapping key.
    fn node_path(&mut self, key_text: &str, at: (usize, usize)) -> Option<String> {
        match self.stack.last_mut() {
            None => Some(String::new()),
            Some(Frame::Seq { path, next }) => {
                let p = format!("{path}[{next}]");
                *next += 1;
                Some(p)
            }
            Some(Frame::Map {
                path,
                key,
                unplaced,
            }) => match key.take() {
                Some(k) => Some(join(path, &k)),
                None => {
                    if unplaced.take().is_some() {
                        self.map.entry(path.clone()).or_insert(at);
                    }
                    // This node is a key; complex keys get the placeholder "?".
                    self.keys.entry(join(path, key_text)).or_insert(at);
                    *key = Some(key_text.to_string());
                    None
                }
            },
        }
    }

    fn place(&mut self, path: String, at: (usize, usize)) {
        self.map.entry(path).or_insert(at);
    }
}

impl MarkedEventReceiver for Walker {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let at = (mark.line().max(1), mark.col() + 1);
        match ev {
            Event::Scalar(ref text, ..) => {
                if let Some(p) = self.node_path(text, at) {
                    self.place(p, at);
                }
            }
            Event::Alias(_) => {
                if let Some(p) = self.node_path("?", at) {
                    self.place(p, at);
                }
            }
            Event::MappingStart(..) => {
                let path = self.node_path("?", at).unwrap_or_else(|| "?".into());
                self.stack.push(Frame::Map {
                    path,
                    key: None,
                    unplaced: Some(at),
                });
            }
            Event::SequenceStart(..) => {
                let path = self.node_path("?", at).unwrap_or_else(|| "?".into());
                self.place(path.clone(), at);
                self.stack.push(Frame::Seq { path, next: 0 });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                if let Some(Frame::Map {
                    path,
                    unplaced: Some(start),
                    ..
                }) = self.stack.pop()
                {
                    self.place(path, start);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nested_nodes_and_falls_back_to_parents() {
        let text = "defaults:\n  interval: 15s\ntargets:\n  - name: a\n    headers: {X-A: b}\n  - name: c\n";
        let loc = Locations::build(text);
        assert_eq!(loc.find("defaults.interval"), Some((2, 13)));
        assert_eq!(loc.find("targets[0].name"), Some((4, 11)));
        assert_eq!(loc.find("targets[0].headers.X-A"), Some((5, 20)));
        assert_eq!(loc.find("targets[1].name"), Some((6, 11)));
        // Missing key: the enclosing mapping.
        assert_eq!(loc.find("targets[1].base_url"), Some((6, 5)));
        // A key itself, not its value.
        assert_eq!(loc.find_key("defaults.interval"), Some((2, 3)));
        assert_eq!(loc.find_key("targets[0].headers"), Some((5, 5)));
    }
}
