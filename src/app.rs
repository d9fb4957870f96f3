//! What each subcommand does. `main` parses the command line and calls [`run`].

use std::process::ExitCode;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::cli::{Cli, Command, LogFormat, Output};
use crate::config::{self, Config};
use crate::daemon::Daemon;
use crate::probe::Prober;
use crate::simulate::{Script, Simulator};
use crate::{demo, report};

/// Installs the `tracing` subscriber on stderr with `level` (a level or filter directive).
pub fn init_logging(level: &str, format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_new(level).unwrap_or_else(|_| {
        eprintln!("llm-probe: --log.level {level:?} is not a level (error, warn, info, debug, trace); using info");
        tracing_subscriber::EnvFilter::new("info")
    });
    let stderr = std::io::stderr;
    let _ = match format {
        LogFormat::Logfmt => tracing_logfmt::builder()
            .subscriber_builder()
            .with_env_filter(filter)
            .with_writer(stderr)
            .try_init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .with_writer(stderr)
            .try_init(),
    };
}

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
    init_logging(&cli.log_level, cli.log_format);
    let result = match cli.command {
        Command::Run {
            config_file,
            listen,
        } => match load(&config_file, config::Secrets::Read) {
            Some(cfg) => serve_until_signal(cfg, listen, config_file).await,
            None => return ExitCode::FAILURE,
        },
        Command::CheckConfig {
            config_file,
            skip_secrets,
        } => {
            let secrets = if skip_secrets {
                config::Secrets::Skip
            } else {
                config::Secrets::Read
            };
            return check_config(&config_file, secrets);
        }
        Command::ProbeOnce {
            config_file,
            target,
            scenario,
            output,
        } => match load(&config_file, config::Secrets::Read) {
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
            };
            simulate(listen, script).await
        }
        Command::Bench(args) => return crate::bench::command::run(*args, shutdown_signal()).await,
        Command::Healthcheck { url } => return healthcheck(&url).await,
        Command::Demo { listen, every } => demo::run(listen, every, shutdown_signal()).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("llm-probe: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The config at `path`, or `None` after printing every problem to stderr.
fn load(path: &std::path::Path, secrets: config::Secrets) -> Option<Config> {
    match config::load_with(path, secrets) {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("{e}");
            None
        }
    }
}

fn check_config(path: &std::path::Path, secrets: config::Secrets) -> ExitCode {
    let Some(cfg) = load(path, secrets) else {
        return ExitCode::FAILURE;
    };
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    println!(
        "{}: OK, {}, {}",
        cfg.source,
        plural(cfg.targets.len(), "target"),
        plural(cfg.scenarios.len(), "scenario")
    );
    for t in &cfg.targets {
        println!("  {}", t.summary());
    }
    if secrets == config::Secrets::Skip {
        println!("API keys not checked (--skip-secrets): api_key_env variables were not looked up, api_key_file files not read");
    }
    ExitCode::SUCCESS
}

/// A token cancelled on SIGINT or SIGTERM.
pub fn shutdown_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("installing a SIGTERM handler");
            tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        tracing::info!("shutting down");
        t.cancel();
    });
    token
}

async fn serve_until_signal(
    cfg: Config,
    listen: std::net::SocketAddr,
    config_file: std::path::PathBuf,
) -> anyhow::Result<()> {
    let daemon = Daemon::start(cfg, listen, Some(config_file)).await?;
    eprintln!(
        "llm-probe: serving metrics on http://{}/metrics",
        daemon.addr
    );
    let shutdown = shutdown_signal();
    reload_on_sighup(daemon.reloader(), shutdown.clone());
    shutdown.cancelled().await;
    daemon.stop().await;
    Ok(())
}

/// Reloads the configuration on every SIGHUP until `shutdown`.
fn reload_on_sighup(
    tx: tokio::sync::mpsc::Sender<crate::daemon::ReloadRequest>,
    shutdown: CancellationToken,
) {
    #[cfg(unix)]
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            return;
        };
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                s = hup.recv() => if s.is_none() { return },
            }
            tracing::info!("SIGHUP: reloading the configuration");
            // The daemon logs the outcome.
            let _ = crate::daemon::request_reload(&tx).await;
        }
    });
    #[cfg(not(unix))]
    let _ = (tx, shutdown);
}

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
        eprintln!(
            "llm-probe: no target named {:?} in {}; targets: {}",
            target.unwrap_or(""),
            cfg.source,
            names.join(", ")
        );
        return ExitCode::FAILURE;
    }
    let mut ran = 0;
    let mut failed = 0;
    for t in targets {
        let prober = match Prober::new(Arc::clone(t)) {
            Ok(p) => p,
            Err(e) => {
                eprintln!(
                    "llm-probe: target {:?}: cannot build an HTTP client: {e}",
                    t.name
                );
                return ExitCode::FAILURE;
            }
        };
        for s in t
            .scenarios
            .iter()
            .filter(|s| scenario.is_none_or(|n| s.name == n))
        {
            let outcome = prober.probe(s).await;
            ran += 1;
            failed += usize::from(!outcome.is_success());
            let text = match output {
                Output::Json => format!("{}\n", report::to_json(&outcome)),
                Output::Text => report::to_text(&outcome),
            };
            // A closed stdout (`| head`) ends the run quietly instead of panicking.
            if std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes()).is_err() {
                return ExitCode::FAILURE;
            }
        }
    }
    if ran == 0 {
        eprintln!(
            "llm-probe: no scenario named {:?} on the selected targets",
            scenario.unwrap_or("")
        );
        return ExitCode::FAILURE;
    }
    if failed > 0 {
        eprintln!("llm-probe: {failed} of {ran} probes failed");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

async fn simulate(listen: std::net::SocketAddr, script: Script) -> anyhow::Result<()> {
    let desc = format!(
        "TTFT {}, a token event every {}, {} tokens ({} per event, {} reasoning), fault {}, {}",
        humantime::format_duration(script.ttft),
        humantime::format_duration(script.itl),
        script.tokens,
        script.tokens_per_event,
        script.reasoning_tokens,
        crate::simulate::Fault::NAMES
            .iter()
            .find(|(_, f)| *f == script.fault)
            .map_or("?", |(n, _)| *n),
        load_summary(&script.load),
    );
    let sim = Simulator::start(listen, script).await?;
    eprintln!(
        "llm-probe simulator: OpenAI-compatible endpoint at {} ({desc}); also /v1/completions, /v1/responses, /v1/messages, /api/chat, /generate_stream, /completion and /openai/deployments/{{d}}/chat/completions at {}",
        sim.base_url(),
        sim.root_url()
    );
    shutdown_signal().cancelled().await;
    Ok(())
}

fn load_summary(l: &crate::simulate::Load) -> String {
    let slots = match l.slots {
        0 => "unlimited slots".to_string(),
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

async fn healthcheck(url: &str) -> ExitCode {
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(3))
        .build();
    match client.map(|c| c.get(url)) {
        Ok(req) => match req.send().await {
            Ok(r) if r.status().is_success() => ExitCode::SUCCESS,
            Ok(r) => {
                eprintln!("llm-probe: {url} answered HTTP {}", r.status().as_u16());
                ExitCode::FAILURE
            }
            Err(e) => {
                eprintln!("llm-probe: {url}: {}", e.without_url());
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("llm-probe: {e}");
            ExitCode::FAILURE
        }
    }
}
