//! A target's `baseline_file:`: the pinned baseline files it names (one path or a list), read
//! with the bounded reader, parsed ([`crate::config::baseline_file::parse`]) and matched to the target and its
//! scenarios. Every problem names the field and the baseline file.

use super::*;
use crate::config::baseline_file::Baseline;

impl Validator<'_> {
    /// The baselines `baseline_file:` names (relative paths against the probes file's directory).
    /// `target` is the target's name as written, `scenarios` its resolved scenarios (`None` when
    /// they are invalid, already reported: the scenario check is skipped then).
    pub(super) fn baseline_files(
        &mut self,
        path: &str,
        pre: &str,
        target: Option<&str>,
        raw: Option<&Value>,
        scenarios: Option<&[Arc<Scenario>]>,
    ) -> Vec<Arc<Baseline>> {
        let field = format!("{path}.baseline_file");
        let files: Vec<(String, &str)> = match raw {
            None => return Vec::new(),
            Some(Value::String(f)) => vec![(field.clone(), f.as_str())],
            Some(Value::Sequence(list)) if list.iter().all(Value::is_string) => list
                .iter()
                .enumerate()
                .filter_map(|(j, v)| Some((format!("{field}[{j}]"), v.as_str()?)))
                .collect(),
            Some(_) => {
                self.problem(
                    field,
                    format!("{pre}baseline_file must be a path or a list of paths (one baseline file per scenario, written by `llm-probe baseline save`), e.g. baseline_file: baselines/chat.json."),
                );
                return Vec::new();
            }
        };
        let mut out: Vec<(Arc<Baseline>, PathBuf)> = Vec::new();
        for (at, file) in files {
            let resolved = self.relative_to_config(file);
            let shown = resolved.display().to_string();
            let Some(b) = self.baseline_file(&at, pre, &resolved) else {
                continue;
            };
            if let Some(t) = target.filter(|t| *t != b.target) {
                self.problem(
                    at,
                    format!("{pre}baseline_file {shown} pins target \"{}\" (scenario \"{}\"), not \"{t}\"; save a baseline of this target with `llm-probe baseline save`, or name the file under target \"{}\".", b.target, b.scenario, b.target),
                );
                continue;
            }
            if let Some(list) = scenarios.filter(|l| !l.iter().any(|s| s.name == b.scenario)) {
                let names: Vec<&str> = list.iter().map(|s| s.name.as_str()).collect();
                self.problem(
                    at,
                    format!("{pre}baseline_file {shown} pins scenario \"{}\", which this target does not run (it runs: {}); add the scenario to the target's scenarios or remove the file.", b.scenario, names.join(", ")),
                );
                continue;
            }
            if let Some((_, other)) = out.iter().find(|(o, _)| o.scenario == b.scenario) {
                self.problem(
                    at,
                    format!("{pre}baseline_file {shown} pins scenario \"{}\" again ({} does already); keep one baseline file per scenario.", b.scenario, other.display()),
                );
                continue;
            }
            out.push((Arc::new(b), resolved));
        }
        out.into_iter().map(|(b, _)| b).collect()
    }

    /// One baseline file, read (regular file, at most 1 MiB, time-limited) and parsed.
    fn baseline_file(&mut self, at: &str, pre: &str, file: &Path) -> Option<Baseline> {
        let shown = file.display();
        let bytes = match crate::config::files::read(
            file,
            crate::config::files::MAX_SMALL_FILE_BYTES,
        ) {
            Ok(b) => b,
            Err(e) => {
                self.problem(
                    at,
                    format!("{pre}baseline_file {shown} cannot be read ({e}); {}, or write it with `llm-probe baseline save`.", e.fix()),
                );
                return None;
            }
        };
        let parsed = String::from_utf8(bytes)
            .map_err(|_| "not UTF-8 text".to_string())
            .and_then(|t| crate::config::baseline_file::parse(&t));
        match parsed {
            Ok(b) => Some(b),
            Err(e) => {
                self.problem(
                    at,
                    format!("{pre}baseline_file {shown} is not a usable baseline: {e}."),
                );
                None
            }
        }
    }
}
