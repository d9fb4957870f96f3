//! What each subcommand does. `main` parses the command line and calls [`run`].

use std::process::ExitCode;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::cli::{Cli, Command, Output};
use crate::config::{self, Config};
use crate::daemon::Daemon;
use crate::logging::{self, stderr_line, stdout_text};
use crate::probe::Prober;
use crate::simulate::{Script, Simulator};
use crate::{demo, report};

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
            crate::probe::coalesce::set_wait(coalesce_reads);
            tracing::info!(
                wait = %humantime::format_duration(crate::probe::coalesce::wait()),
                "wake-up coalescing (--probe.coalesce-reads; 0s: off)"
            );
            let shard =
                match crate::shard::from_flags(shard.index, shard.index_from_hostname, shard.count)
                {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::error!(error = %e, "llm-probe cannot run");
                        return ExitCode::FAILURE;
                    }
                };
            // Before the config loads: a SIGHUP or SIGTERM while a large file is read must not
            // end the process with the signal's default action.
            let shutdown = shutdown_signal();
            let hup = hangup_signal();
            // What --config.watch compares with: the content before it was loaded.
            let watched = match config_watch {
                true => Some(crate::watch::fingerprint_off_runtime(&config_file).await),
                false => None,
            };
            let loaded = tokio::select! {
                _ = shutdown.cancelled() => return ExitCode::SUCCESS,
                c = load_for_run(&config_file) => c,
            };
            match loaded {
                Some(cfg) => {
                    let run = Serve {
                        config_file,
                        shard,
                        watched,
                        web: web.server_options(),
                    };
                    // The daemon's errors are log records too: every line `run` writes is in
                    // the --log.format.
                    return match serve_until_signal(cfg, listen, run, shutdown, hup).await {
                        Ok(()) => ExitCode::SUCCESS,
                        Err(e) => {
                            tracing::error!(error = %format!("{e:#}"), "llm-probe cannot run");
                            ExitCode::FAILURE
                        }
                    };
                }
                None => return ExitCode::FAILURE,
            }
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
            return check_config(&config_file, secrets, shard_count).await;
        }
        Command::ProbeOnce {
            config_file,
            target,
            scenario,
            output,
        } => match load(&config_file, config::Secrets::Isolate).await {
            Some(cfg) => {
                return probe_once(&cfg, target.as_deref(), scenario.as_deref(), output).await
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
                ..Script::default()
            };
            simulate(listen, script).await
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

/// `run`'s configuration (credentials isolated, see [`config::Secrets::Isolate`]), or `None`
/// after logging every problem, one log record each.
async fn load_for_run(path: &std::path::Path) -> Option<Config> {
    match config::load_off_runtime(path.to_path_buf(), config::Secrets::Isolate).await {
        Ok(c) => {
            crate::daemon::log_credential_problems(&c);
            for w in config::hints::warnings(&c) {
                tracing::warn!(source = %c.source, warning = %w, "the configuration looks wrong");
            }
            config::cost::log_spend(&c);
            Some(c)
        }
        Err(e) => {
            for p in &e.problems {
                tracing::error!(problem = %p, "the configuration is invalid; llm-probe cannot run");
            }
            None
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

async fn check_config(
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
    for t in &cfg.targets {
        out += &format!("  {}\n", t.summary());
        if let Some(spend) = config::cost::spend(t) {
            out += &format!("    {}\n", config::cost::describe(t, &spend));
        }
    }
    if let Some(total) = config::cost::total_spend(&cfg) {
        out += &format!("{total}\n");
    }
    if let Some(count) = shard_count {
        out += &shard_assignment(&cfg, count);
    }
    if secrets == config::Secrets::Skip {
        out += "API keys not checked (--skip-secrets): api_key_env variables were not looked up, api_key_file files not read\n";
    }
    stdout_text(out);
    ExitCode::SUCCESS
}

/// `check-config --shard.count N`: one block per replica with the pairs it probes.
fn shard_assignment(cfg: &Config, count: u32) -> String {
    let mut by_shard = vec![Vec::new(); count as usize];
    for t in &cfg.targets {
        for s in &t.scenarios {
            by_shard[crate::shard::owner(&t.name, &s.name, count) as usize]
                .push(format!("{}/{}", t.name, s.name));
        }
    }
    let total: usize = by_shard.iter().map(Vec::len).sum();
    let mut out =
        format!("shard assignment for --shard.count {count} ({total} target/scenario pairs):\n");
    for (i, pairs) in by_shard.iter_mut().enumerate() {
        pairs.sort();
        out += &format!("  shard {i}: {} pairs\n", pairs.len());
        for p in pairs.iter() {
            out += &format!("    {p}\n");
        }
    }
    out
}

/// How long the process may take to end after SIGINT or SIGTERM before it exits regardless
/// (a thread stuck in a read or a computation would otherwise keep it alive for ever).
pub const SHUTDOWN_DEADLINE: std::time::Duration = std::time::Duration::from_secs(20);

/// Ends the process [`SHUTDOWN_DEADLINE`] from now unless it has ended by then: a plain thread,
/// so that it still runs while the async runtime waits for a blocked thread at its shutdown.
fn exit_after_deadline() {
    let _ = std::thread::Builder::new()
        .name("shutdown-deadline".into())
        .spawn(|| {
            std::thread::sleep(SHUTDOWN_DEADLINE);
            crate::logging::stderr_line(format_args!(
                "llm-probe: still running {} after the signal to stop (a stuck read or computation); exiting",
                humantime::format_duration(SHUTDOWN_DEADLINE)
            ));
            std::process::exit(1);
        });
}

/// A token cancelled on SIGINT or SIGTERM. The handlers are installed before this returns.
/// After the first signal the process ends within [`SHUTDOWN_DEADLINE`] whatever it is
/// doing, and a second signal ends it at once (exit status 130).
pub fn shutdown_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    #[cfg(unix)]
    {
        use tokio::signal::unix::SignalKind;
        let mut int = install(SignalKind::interrupt(), "SIGINT");
        let mut term = install(SignalKind::terminate(), "SIGTERM");
        tokio::spawn(async move {
            tokio::select! { _ = next(&mut int) => {}, _ = next(&mut term) => {} }
            tracing::info!("shutting down");
            exit_after_deadline();
            t.cancel();
            tokio::select! { _ = next(&mut int) => {}, _ = next(&mut term) => {} }
            crate::logging::stderr_line(format_args!(
                "llm-probe: a second signal to stop; exiting now"
            ));
            std::process::exit(130);
        });
    }
    #[cfg(not(unix))]
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutting down");
        t.cancel();
    });
    token
}

#[cfg(unix)]
type Hangup = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangup = ();

/// The SIGHUP stream (installed now, so that from here on SIGHUP no longer ends the process).
fn hangup_signal() -> Hangup {
    #[cfg(unix)]
    return install(tokio::signal::unix::SignalKind::hangup(), "SIGHUP");
}

/// A handler for `kind`, or `None` (logged) if it cannot be installed.
#[cfg(unix)]
fn install(
    kind: tokio::signal::unix::SignalKind,
    name: &str,
) -> Option<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(kind)
        .inspect_err(
            |e| tracing::error!(signal = name, error = %e, "cannot install a signal handler"),
        )
        .ok()
}

/// The next delivery of `signal`; never, if it has no handler.
#[cfg(unix)]
async fn next(signal: &mut Option<tokio::signal::unix::Signal>) {
    if let Some(s) = signal {
        if s.recv().await.is_some() {
            return;
        }
    }
    std::future::pending().await
}

/// How `run` serves, beyond the configuration and the address.
struct Serve {
    config_file: std::path::PathBuf,
    shard: crate::shard::Shard,
    /// `Some(fingerprint before loading)` with --config.watch.
    watched: Option<Option<u64>>,
    /// The exporter's own server (`--web.*`).
    web: crate::server::ServerOptions,
}

async fn serve_until_signal(
    cfg: Config,
    listen: std::net::SocketAddr,
    run: Serve,
    shutdown: CancellationToken,
    hup: Hangup,
) -> anyhow::Result<()> {
    let daemon = Daemon::start_full(
        cfg,
        listen,
        Some(run.config_file.clone()),
        run.web,
        run.shard,
    )
    .await?;
    let scheme = if daemon.server.web.current().tls.is_some() {
        "https"
    } else {
        "http"
    };
    if let Some(applied) = run.watched {
        tokio::spawn(crate::watch::watch(
            run.config_file,
            applied,
            daemon.reloader(),
            shutdown.clone(),
            crate::watch::PERIOD,
        ));
    }
    let url = format!(
        "{scheme}://{}{}/metrics",
        daemon.addr,
        daemon.server.urls.route_prefix()
    );
    tracing::info!("serving metrics on {url}");
    reload_on_sighup(daemon.reloader(), shutdown.clone(), hup);
    shutdown.cancelled().await;
    daemon.stop().await;
    Ok(())
}

/// Reloads the configuration on every SIGHUP until `shutdown`.
fn reload_on_sighup(
    tx: tokio::sync::mpsc::Sender<crate::reload::ReloadRequest>,
    shutdown: CancellationToken,
    mut hup: Hangup,
) {
    #[cfg(unix)]
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = next(&mut hup) => {}
            }
            tracing::info!("SIGHUP: reloading the configuration");
            // The daemon logs the outcome.
            let _ = crate::reload::request(&tx).await;
        }
    });
    #[cfg(not(unix))]
    let _ = (tx, shutdown, hup);
}

/// Probes `probe-once` runs at the same time (the others wait; the output keeps config order).
pub const PROBE_ONCE_CONCURRENCY: usize = 8;

async fn probe_once(
    cfg: &Config,
    target: Option<&str>,
    scenario: Option<&str>,
    output: Output,
) -> ExitCode {
    let targets: Vec<_> = cfg
        .targets
        .iter()
        .filter(|t| target.is_none_or(|n| t.name == n))
        .collect();
    if targets.is_empty() {
        let names: Vec<_> = cfg.targets.iter().map(|t| t.name.as_str()).collect();
        stderr_line(format_args!(
            "llm-probe: no target named {:?} in {}; targets: {}",
            target.unwrap_or(""),
            cfg.source,
            names.join(", ")
        ));
        return ExitCode::FAILURE;
    }
    // Every selected pair, in config order; probed PROBE_ONCE_CONCURRENCY at a time and
    // printed in this order (each as soon as the ones before it are printed).
    let mut pairs = Vec::new();
    for t in targets {
        let prober = match Prober::new(Arc::clone(t)) {
            Ok(p) => p,
            Err(e) => {
                stderr_line(format_args!(
                    "llm-probe: target {:?}: cannot build an HTTP client: {e}",
                    t.name
                ));
                return ExitCode::FAILURE;
            }
        };
        for s in t
            .scenarios
            .iter()
            .filter(|s| scenario.is_none_or(|n| s.name == n))
        {
            pairs.push((prober.clone(), Arc::clone(s)));
        }
    }
    let slots = Arc::new(tokio::sync::Semaphore::new(PROBE_ONCE_CONCURRENCY));
    let probes: Vec<_> = pairs
        .into_iter()
        .map(|(prober, s)| {
            let slots = Arc::clone(&slots);
            tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
                let _slot = slots.acquire_owned().await;
                prober.probe(&s).await
            }))
        })
        .collect();
    let ran = probes.len();
    let mut failed = 0;
    for probe in probes {
        let outcome = match probe.await {
            Ok(o) => o,
            Err(e) => {
                stderr_line(format_args!(
                    "llm-probe: a probe panicked (a bug in llm-probe; please report it): {}",
                    crate::schedule::panic_message(e)
                ));
                return ExitCode::FAILURE;
            }
        };
        failed += usize::from(!outcome.is_success());
        let text = match output {
            Output::Json => report::json_line(&outcome),
            Output::Text => report::to_text(&outcome),
        };
        // A closed stdout (`| head`) ends the run quietly instead of panicking.
        if std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes()).is_err() {
            logging::LOG_WRITE_FAILURES.inc();
            return ExitCode::FAILURE;
        }
    }
    if ran == 0 {
        stderr_line(format_args!(
            "llm-probe: no scenario named {:?} on the selected targets",
            scenario.unwrap_or("")
        ));
        return ExitCode::FAILURE;
    }
    if failed > 0 {
        stderr_line(format_args!("llm-probe: {failed} of {ran} probes failed"));
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

async fn simulate(listen: std::net::SocketAddr, script: Script) -> anyhow::Result<()> {
    let desc = format!(
        "TTFT {}, a token event every {}, {} tokens ({} per event, {} reasoning), fault {}, headers {}, {}, {}",
        humantime::format_duration(script.ttft),
        humantime::format_duration(script.itl),
        script.tokens,
        script.tokens_per_event,
        script.reasoning_tokens,
        crate::simulate::Fault::NAMES
            .iter()
            .find(|(_, f)| *f == script.fault)
            .map_or("?", |(n, _)| *n),
        match script.headers {
            crate::simulate::HeadersAt::AtOnce => "at once",
            crate::simulate::HeadersAt::WithFirstToken => "with the first token",
        },
        load_summary(&script.load),
        match script.rate_limit {
            0 => "no request quota".to_string(),
            n => format!("a quota of {n} requests a minute"),
        },
    );
    let sim = Simulator::start(listen, script).await?;
    stderr_line(format_args!(
        "llm-probe simulator: OpenAI-compatible endpoint at {} ({desc}); also /v1/completions, /v1/responses, /v1/messages, /api/chat, /generate_stream, /completion, /openai/deployments/{{d}}/chat/completions, Gemini (/v1beta/models/{{m}}:streamGenerateContent, /v1/projects/{{p}}/locations/{{l}}/publishers/google/models/{{m}}:streamGenerateContent) and Bedrock (/model/{{id}}/converse-stream) at {}; its load in vLLM's metric names (for server_metrics_url) at {}/metrics",
        sim.base_url(),
        sim.root_url(),
        sim.root_url()
    ));
    shutdown_signal().cancelled().await;
    Ok(())
}

fn load_summary(l: &crate::simulate::Load) -> String {
    let slots = match l.slots {
        0 => "unlimited slots".to_string(),
        1 => "1 slot".to_string(),
        n => format!("{n} slots"),
    };
    format!(
        "{slots}, prefill {} per prompt token, ITL +{}% per extra stream, jitter sigma {} (seed {})",
        humantime::format_duration(l.prefill_per_token),
        l.itl_slowdown_per_stream * 100.0,
        l.jitter,
        l.seed
    )
}
