//! What each subcommand does, one file each: `main` parses the command line and calls [`run`],
//! which hands each subcommand its flags. `run.rs` (the daemon, its signals and reloads),
//! `check_config.rs`, `probe_once.rs`, `simulate.rs`; `signals.rs` (SIGINT, SIGTERM, SIGHUP);
//! `demo` and `healthcheck` are modules of their own, and `bench`, `compare` and `baseline` run
//! in the offline tools (`crate::bench::command`, …).

use std::process::ExitCode;

use crate::cli::{Cli, Command};
use crate::config::{self, Config};
use crate::demo;
use crate::logging::{self, stderr_line};
use crate::simulate::Script;

mod check_config;
mod probe_once;
mod run;
mod signals;
mod simulate;

pub use probe_once::PROBE_ONCE_CONCURRENCY;
pub use signals::{shutdown_signal, SHUTDOWN_DEADLINE};

/// Makes glibc's `malloc` hand allocations of 1 MiB and more straight back to the kernel when
/// they are freed. The `/metrics` body is the one such allocation (about 18 KiB per
/// (target, scenario), so 18 MiB at 1,000); under glibc's default *dynamic* threshold, the
/// first freed body raises the threshold to its own size, every later body comes from the heap,
/// and the freed heap stays resident: RSS then carries a dead copy of the last body between
/// scrapes (measured with `benches/run.sh render`: 37 MiB instead of 19 MiB after rendering
/// 1,000 targets). No effect on other C libraries (musl already maps large blocks).
pub fn return_large_buffers_to_os() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a tuning parameter of the allocator; any value is valid.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// Runs one subcommand to completion; the exit code follows the CLI contract (1 on invalid
/// config or a failed probe).
pub async fn run(cli: Cli) -> ExitCode {
    return_large_buffers_to_os();
    logging::init(&cli.log_level, cli.log_format);
    let result = match cli.command {
        Command::Run {
            config_file,
            listen,
            web,
            config_watch,
            shard,
            coalesce_reads,
        } => {
            let web = web.server_options();
            return run::daemon(
                config_file,
                listen,
                web,
                config_watch,
                shard,
                coalesce_reads,
            )
            .await;
        }
        Command::CheckConfig {
            config_file,
            skip_secrets,
            shard_count,
        } => {
            let secrets = if skip_secrets {
                config::Secrets::Skip
            } else {
                config::Secrets::Read
            };
            return check_config::run(&config_file, secrets, shard_count).await;
        }
        Command::ProbeOnce {
            config_file,
            target,
            scenario,
            output,
        } => match load(&config_file, config::Secrets::Isolate).await {
            Some(cfg) => {
                return probe_once::run(&cfg, target.as_deref(), scenario.as_deref(), output).await
            }
            None => return ExitCode::FAILURE,
        },
        Command::Simulate {
            listen,
            ttft,
            itl,
            tokens,
            tokens_per_event,
            reasoning_tokens,
            model,
            fault,
            prefix_cache,
            answer,
            headers,
            rate_limit,
            context_limit,
            context_overflow,
            load,
        } => {
            let script = Script {
                load: load.into(),
                ttft,
                itl,
                tokens,
                tokens_per_event,
                reasoning_tokens,
                model,
                fault,
                prefix_cache: prefix_cache.is_on(),
                answer,
                headers,
                rate_limit,
                context_limit,
                context_overflow,
                ..Script::default()
            };
            simulate::run(listen, script).await
        }
        Command::Bench(args) => {
            return crate::bench::command::run((*args).into(), shutdown_signal()).await
        }
        Command::Compare {
            before,
            after,
            prometheus,
            output,
            alpha,
            threshold,
            force,
            resamples,
            seed,
            lengths,
            fail_on,
        } => {
            let options = crate::compare::Options {
                rule: crate::compare::verdict::Rule { alpha, threshold },
                force,
                resamples: resamples as usize,
                seed,
                lengths,
                fail_on_inconclusive: fail_on == crate::compare::FailOn::Inconclusive,
            };
            return match (before, after) {
                (Some(before), Some(after)) => {
                    crate::compare::run(&before, &after, &options, output)
                }
                _ => match crate::compare::from_prometheus::Request::try_from(*prometheus) {
                    Ok(req) => crate::compare::from_prometheus::run(&req, &options, output).await,
                    Err(e) => {
                        stderr_line(format_args!("llm-probe compare: {e}"));
                        ExitCode::from(2)
                    }
                },
            };
        }
        Command::Baseline(crate::cli::BaselineCommand::Save {
            from,
            level,
            rate,
            prometheus_url,
            prometheus_timeout,
            target,
            scenario,
            window,
            out,
        }) => {
            use crate::baseline::save::Pick;
            let pick = match (level, rate) {
                (Some(c), _) => Pick::Concurrency(c),
                (None, Some(r)) => Pick::Rate(r),
                (None, None) => Pick::Default,
            };
            return match (from, prometheus_url, target, scenario, window) {
                (Some(from), ..) => crate::baseline::save::run(&from, pick, &out),
                (None, Some(url), Some(target), Some(scenario), Some(window)) => {
                    let req = crate::baseline::prometheus::Request {
                        url,
                        target,
                        scenario,
                        window,
                        timeout: prometheus_timeout,
                    };
                    crate::baseline::prometheus::run(&req, &out).await
                }
                // clap's groups and `requires` rule this out (a usage error, exit 2).
                _ => {
                    stderr_line(format_args!(
                        "llm-probe baseline save: give --from FILE, or --prometheus.url with \
                         --target, --scenario and --range"
                    ));
                    ExitCode::from(2)
                }
            };
        }
        Command::Healthcheck(args) => return crate::healthcheck::run(&args.into()).await,
        Command::Demo { listen, every } => demo::run(listen, every, shutdown_signal())
            .await
            .map_err(anyhow::Error::from),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            stderr_line(format_args!("llm-probe: {e:#}"));
            ExitCode::FAILURE
        }
    }
}

/// The config at `path` (read off the runtime), or `None` after printing every problem to
/// stderr. With [`config::Secrets::Isolate`], each credential that cannot be read is logged
/// (its target fails its probes with the reason `credentials`).
async fn load(path: &std::path::Path, secrets: config::Secrets) -> Option<Config> {
    match config::load_off_runtime(path.to_path_buf(), secrets).await {
        Ok(c) => {
            crate::daemon::log_credential_problems(&c);
            if secrets != config::Secrets::Read {
                for w in config::hints::warnings(&c) {
                    tracing::warn!(source = %c.source, warning = %w, "the configuration looks wrong");
                }
            }
            Some(c)
        }
        Err(e) => {
            stderr_line(e);
            None
        }
    }
}
