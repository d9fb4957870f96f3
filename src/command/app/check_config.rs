//! `llm-probe check-config`: validate the probes file, one line per target.

use std::process::ExitCode;

use crate::config::{self, Config};
use crate::logging::{stderr_line, stdout_text};

use super::load;

pub(super) async fn run(
    path: &std::path::Path,
    secrets: config::Secrets,
    shard_count: Option<u32>,
) -> ExitCode {
    let Some(cfg) = load(path, secrets).await else {
        return ExitCode::FAILURE;
    };
    for w in config::hints::warnings(&cfg) {
        stderr_line(format_args!(
            "{}: warning: {}",
            cfg.source,
            crate::sanitize::terminal_safe(&w)
        ));
    }
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let mut out = format!(
        "{}: OK, {}, {}\n",
        cfg.source,
        plural(cfg.targets.len(), "target"),
        plural(cfg.scenarios.len(), "scenario")
    );
    // Each file_sd target's replicas, read once for its line and the shard assignment.
    let mut discovered = Vec::with_capacity(cfg.targets.len());
    for t in &cfg.targets {
        let found = file_sd_replicas(&cfg, t).await;
        out += &format!("  {}\n", t.summary());
        out += &found
            .as_ref()
            .map_or_else(String::new, |(line, _)| line.clone());
        discovered.push(found.map(|(_, d)| d));
        if let Some(spend) = config::cost::spend(t) {
            out += &format!("    {}\n", config::cost::describe(t, &spend));
        }
    }
    if let Some(total) = config::cost::total_spend(&cfg) {
        out += &format!("{total}\n");
    }
    if let Some(count) = shard_count {
        out += &shard_assignment(&cfg, &discovered, count);
    }
    if secrets == config::Secrets::Skip {
        out += "API keys not checked (--skip-secrets): api_key_env variables were not looked up, api_key_file files not read\n";
    }
    stdout_text(out);
    ExitCode::SUCCESS
}

/// A `file_sd` target's replicas as `run` would discover them now, with a line giving their
/// count; `None` and a warning on stderr when the file cannot be used yet (`run` then probes the target once a
/// discovery succeeds; a sidecar may write the file later, so it is not an error). DNS and
/// http_sd are not asked: the machine checking may not reach the fleet's name server.
async fn file_sd_replicas(
    cfg: &Config,
    t: &config::Target,
) -> Option<(String, crate::replicas::Discovered)> {
    let spec = t.replicas.as_ref()?;
    let config::replicas::ReplicaSource::FileSd(path) = &spec.source else {
        return None;
    };
    match crate::replicas::discover(spec, &t.base_url).await {
        Ok(found) => {
            let line = match found.capped() {
                true => format!(
                    "    replicas: {} listed in {}, the first {} probed (replicas.max)\n",
                    found.found,
                    path.display(),
                    found.replicas.len()
                ),
                false => format!(
                    "    replicas: {} listed in {}\n",
                    found.replicas.len(),
                    path.display()
                ),
            };
            Some((line, found))
        }
        Err(e) => {
            stderr_line(format_args!(
                "{}: warning: target {:?}: {}; `run` probes this target only once a discovery succeeds",
                cfg.source,
                t.name,
                crate::sanitize::terminal_safe(&e.to_string())
            ));
            None
        }
    }
}

/// `check-config --shard.count N`: one block per replica with the pairs it probes. The
/// replicas of a `replicas:` target are spread over the shards per (target, replica,
/// scenario), as `run` spreads them: a `file_sd` file's are listed by replica
/// (`pool/chat@10.0.0.1:8000`); those of a source not asked here (DNS, http_sd, a file not
/// readable yet) are named in every shard's block, as spread.
fn shard_assignment(
    cfg: &Config,
    discovered: &[Option<crate::replicas::Discovered>],
    count: u32,
) -> String {
    let shards: Vec<crate::shard::Shard> = (0..count)
        .filter_map(|i| crate::shard::Shard::new(i, count).ok())
        .collect();
    let mut by_shard = vec![Vec::new(); count as usize];
    let mut spread = Vec::new();
    for (t, replicas) in cfg.targets.iter().zip(discovered) {
        for s in &t.scenarios {
            match (&t.replicas, replicas) {
                (None, _) => by_shard[crate::shard::owner(&t.name, &s.name, count) as usize]
                    .push(format!("{}/{}", t.name, s.name)),
                (Some(_), Some(found)) => {
                    for r in &found.replicas {
                        for (i, shard) in shards.iter().enumerate() {
                            if shard.owns_replica(&t.name, &r.label, &s.name) {
                                by_shard[i].push(format!("{}/{}@{}", t.name, s.name, r.label));
                            }
                        }
                    }
                }
                (Some(_), None) => spread.push(format!("{}/{}", t.name, s.name)),
            }
        }
    }
    let total: usize = by_shard.iter().map(Vec::len).sum();
    let mut out = format!("shard assignment for --shard.count {count} ({total} pairs):\n");
    for (i, pairs) in by_shard.iter_mut().enumerate() {
        pairs.sort();
        out += &format!("  shard {i}: {} pairs\n", pairs.len());
        for p in pairs.iter() {
            out += &format!("    {p}\n");
        }
        for p in &spread {
            out +=
                &format!("    {p} (its replicas, spread over the shards; not discovered here)\n");
        }
    }
    out
}
