//! Scale and cost: the daemon (`Daemon::start`, as `llm-probe run` starts it) with `--targets`
//! targets at `--interval`, each streaming `--tokens` tokens from a simulator that runs as a
//! separate `llm-probe simulate` process pinned to CPU 1; this process (the daemon) is pinned to
//! CPU 0. After a warm-up of one interval plus one stream, for `--window`:
//!
//! - CPU: `getrusage(RUSAGE_SELF)` user+system over the window ÷ window (share of one core);
//!   `/metrics` is scraped every `--scrape` by a `curl` process, from outside as Prometheus
//!   would, so neither its CPU nor the copy of the body it receives is counted here;
//! - RSS: `VmRSS` at the end and `VmHWM` (peak) from `/proc/self/status`;
//! - start lag: how late each probe started against its schedule (slot + k × interval). The
//!   schedule's origin is each task's first poll, which is not observable from outside; the lag
//!   is measured against each target's own least-late probe (so a constant offset is not
//!   counted), and the offset from the instant `Daemon::start` returned is shown too;
//! - `/metrics`: in-process `Metrics::render` (and `render_gzip`) time and size, and the HTTP
//!   scrape time (`--gzip true`, the default: curl asks for gzip, as Prometheus does);
//! - `--history-full true`: every pair's status-page history filled before the warm-up, as
//!   20 minutes at 10 s leave it, so a short window measures a long-running daemon's memory;
//! - `--connection reuse`: the targets keep their connections (default `fresh`, as
//!   `llm-probe`'s default: a new TCP connection per probe);
//! - `--malloc-stats true`: glibc's counters after the window (and, with glibc, its heap in
//!   use and held before each scrape in any run).

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use llm_probe::config;
use llm_probe::daemon::Daemon;
use llm_probe::schedule::slot;

use crate::stats::{buckets, histogram_quantile, ms, row, Dist, HEADER};
use crate::{loadavg, pin_to_cpu, Opts};

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

pub fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// (target, when the probe started, TTFT − scripted in ms if it succeeded): 40 bytes, the
/// target's name shared with the daemon. These live in the daemon's process, so their bytes
/// are reported beside its RSS.
type Record = (Arc<str>, SystemTime, Option<f32>);

struct Sim(Child);
impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `llm-probe simulate` (pinned to CPU 1 with taskset when `pin`) on a free port.
fn spawn_simulator(bin: &str, args: &[String], pin: bool) -> (Sim, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = if pin {
        let mut c = Command::new("taskset");
        c.args(["-c", "1", bin]);
        c
    } else {
        Command::new(bin)
    };
    cmd.args(["--log.level", "warn", "simulate", "--web.listen-address"])
        .arg(format!("127.0.0.1:{port}"))
        .args(args)
        .stdout(Stdio::null());
    // Wrapped at once, so that it is killed and waited for on every path (Drop).
    let sim = Sim(cmd.spawn().expect("start the simulator"));
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return (sim, format!("http://127.0.0.1:{port}/v1"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the simulator did not start on port {port}");
}

/// Pushes the history's limit of records into every pair's ring, oldest first, one interval
/// apart and ending one interval ago (so none is pruned by age and the daemon's own probes
/// replace them one by one).
fn prefill_history(daemon: &Daemon, targets: usize, interval: Duration) {
    use llm_probe::history::{ItlSummary, RecentProbe};
    use llm_probe::measure::TraceId;
    let n = daemon.history.limits().max_probes;
    let identity: Arc<str> = Arc::from("sim (model sim)");
    let scenario: Arc<str> = Arc::from("chat");
    let now = SystemTime::now();
    for i in 0..targets {
        let target: Arc<str> = Arc::from(format!("t{i:04}"));
        for k in (1..=n).rev() {
            let mut id = [0u8; 16];
            id[..8].copy_from_slice(&(i as u64).to_be_bytes());
            id[8..].copy_from_slice(&(k as u64 + 1).to_be_bytes());
            daemon.history.push_probe(RecentProbe {
                target: target.clone(),
                scenario: scenario.clone(),
                replica: "".into(),
                started_at: now - interval * k as u32,
                ttft: Some(Duration::from_millis(200)),
                output_tokens_per_second: Some(50.0),
                tpot: Some(Duration::from_millis(20)),
                itl: Some(ItlSummary {
                    p50: Duration::from_millis(20),
                    p95: Duration::from_millis(21),
                }),
                e2e: Some(Duration::from_millis(1460)),
                output_tokens: Some(64),
                failure: None,
                identity: Some(identity.clone()),
                trace_id: TraceId::from_bytes(id),
            });
        }
    }
}

pub fn main(opts: &Opts) {
    let targets = opts.num("targets", 1000usize);
    let interval = opts.dur("interval", "10s");
    let tokens = opts.num("tokens", 64u32);
    let ttft = opts.dur("ttft", "200ms");
    let itl = opts.dur("itl", "20ms");
    let window = opts.dur("window", "60s");
    let scrape = opts.dur("scrape", "15s");
    let bin = opts.str("bin", "target/release/llm-probe");
    let pin = !opts.0.contains_key("no-pin");
    let (_sim, url) = spawn_simulator(
        &bin,
        &[
            "--ttft".into(),
            humantime::format_duration(ttft).to_string(),
            "--itl".into(),
            humantime::format_duration(itl).to_string(),
            "--tokens".into(),
            tokens.to_string(),
            // `--headers with-first-token`: the simulator holds each response's headers until
            // its first token, as Ollama does (the probe's wait for them is then the TTFT).
            "--headers".into(),
            opts.str("headers", "at-once"),
        ],
        pin,
    );
    let pinned = pin && pin_to_cpu(0);
    // As `llm-probe run` does first thing.
    llm_probe::app::return_large_buffers_to_os();
    let mut yaml = format!(
        "defaults:\n  interval: {}\n  timeout: {}\nscenarios:\n  - name: chat\n    messages: [{{role: user, content: \"Say something.\"}}]\n    max_tokens: {tokens}\ntargets:\n",
        humantime::format_duration(interval),
        // At most the interval (the config refuses a longer timeout).
        humantime::format_duration(interval.min(Duration::from_secs(10)))
    );
    // `--connection fresh` (the default of `llm-probe`: a new TCP connection per probe) or
    // `reuse` (BENCHMARKS §18: what the connection per probe costs).
    let connection = opts.str("connection", "fresh");
    for i in 0..targets {
        yaml.push_str(&format!(
            "  - name: t{i:04}\n    protocol: openai-chat\n    base_url: {url}\n    model: sim\n    connection: {connection}\n"
        ));
    }
    let cfg = config::parse(&yaml, "<bench>", &|_| None).expect("bench config");
    // Each outcome carries target names of its own: a record keeps the target's shared name
    // instead, so that records hold no heap allocation per probe (one would stay live for the
    // whole run and count as the daemon's growth; BENCHMARKS §19).
    let target_names: std::collections::HashMap<Arc<str>, Arc<str>> = (cfg.targets.iter())
        .map(|t| {
            let name: Arc<str> = t.name.as_str().into();
            (name.clone(), name)
        })
        .collect();
    // `--runtime one-worker|current-thread` exist for BENCHMARKS §14's experiments (measured,
    // not adopted): the daemon itself runs tokio's default runtime. `--coalesce` is
    // `llm-probe run --probe.coalesce-reads` (default 2ms; `0s`: off, as before §15).
    let coalesce = opts.dur("coalesce", "2ms");
    let mut builder = match opts.str("runtime", "multi-thread").as_str() {
        "multi-thread" => tokio::runtime::Builder::new_multi_thread(),
        "one-worker" => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(1);
            b
        }
        "current-thread" => tokio::runtime::Builder::new_current_thread(),
        other => panic!("--runtime {other:?}: multi-thread, one-worker or current-thread"),
    };
    llm_probe::probe::coalesce::set_wait(coalesce);
    builder.on_thread_park(llm_probe::probe::coalesce::on_park);
    let rt = builder.enable_all().build().unwrap();
    rt.block_on(async move {
        let t_build = Instant::now();
        let daemon = Daemon::start(cfg, "127.0.0.1:0".parse().unwrap(), None)
            .await
            .expect("daemon");
        let start_took = t_build.elapsed();
        // `--history-full true`: every pair's status-page history as 20 minutes of probing
        // leave it (the default 120 records, all successes with an identity line and a trace
        // id), so a 60 s window measures the memory of a daemon that has run that long.
        if opts.str("history-full", "false") == "true" {
            prefill_history(&daemon, targets, interval);
        }
        let rss_started = status_kib("VmRSS:");
        let wall_started = SystemTime::now();
        // Room for every probe of the run up front: no doubling copies, and capacity not yet
        // written is not resident.
        let warmup = interval.min(Duration::from_secs(10)) + ttft + itl * tokens;
        let expected = (warmup + window).as_secs_f64() / interval.as_secs_f64();
        let records: Arc<Mutex<Vec<Record>>> = Arc::new(Mutex::new(Vec::with_capacity(
            ((expected + 2.0) * targets as f64) as usize,
        )));
        let records_kib =
            |r: &Mutex<Vec<Record>>| (r.lock().unwrap().len() * std::mem::size_of::<Record>()) as u64 / 1024;
        let mut rx = daemon.subscribe();
        let rec = records.clone();
        let script_ttft = ttft.as_secs_f64();
        // Token events of the probes finished so far (for CPU per token event).
        let events = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let ev = events.clone();
        // Outcomes the collector missed (it lagged behind the broadcast): must be 0.
        let missed = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let lost = missed.clone();
        let collector = tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(o) => {
                        let n = o.result.as_ref().map_or(0, |m| m.token_events);
                        ev.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
                        let target = target_names.get(&o.target).cloned().unwrap_or_else(|| o.target.clone());
                        rec.lock().unwrap().push((
                            target,
                            o.started_at,
                            o.result
                                .as_ref()
                                .ok()
                                .map(|m| ms(m.ttft.as_secs_f64() - script_ttft) as f32),
                        ))
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        lost.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                    }
                    Err(_) => return,
                }
            }
        });
        tokio::time::sleep(warmup).await;
        let metrics_url = format!("http://{}/metrics", daemon.addr);
        let (cpu0, t0) = (cpu_seconds(), Instant::now());
        let events0 = events.load(std::sync::atomic::Ordering::Relaxed);
        let load_before = loadavg();
        let mut scrapes = Dist::new("HTTP GET /metrics (scrape during the window, by curl)");
        // RSS before each scrape: flat, or growing with the probes kept?
        let mut rss_series: Vec<(u64, u64)> = Vec::new();
        // The per-pair histograms' heap (native buckets; classic buckets and exemplars) beside
        // it: the part of the RSS that grows with the spread of the values observed.
        let mut hist_series: Vec<(u64, (usize, usize))> = Vec::new();
        let mut heap_series = Vec::new();
        let mut size = 0usize;
        // `--gzip true` (the default): curl asks for gzip as Prometheus does, and `size` is
        // the compressed body; `false`: the plain body, as every run before §16.
        let gzip = opts.str("gzip", "true") == "true";
        while t0.elapsed() < window {
            let t = Instant::now();
            hist_series.push((t0.elapsed().as_secs(), daemon.metrics.histogram_heap_bytes()));
            heap_series.push((t0.elapsed().as_secs(), glibc_heap()));
            rss_series.push((
                t0.elapsed().as_secs(),
                status_kib("VmRSS:").saturating_sub(records_kib(&records)),
            ));
            // The scraper is another process (as Prometheus is), on the simulator's CPU: its
            // CPU and the memory of the body it receives are not the daemon's.
            let mut curl = tokio::process::Command::new(if pinned { "taskset" } else { "curl" });
            if pinned {
                curl.args(["-c", "1", "curl"]);
            }
            if gzip {
                curl.arg("--compressed");
            }
            let out = curl
                .args(["-sS", "-o", "/dev/null", "-w", "%{size_download} %{time_total}"])
                .arg(&metrics_url)
                .output()
                .await
                .expect("run curl");
            let text = String::from_utf8_lossy(&out.stdout);
            let mut it = text.split_whitespace();
            size = it.next().and_then(|v| v.parse().ok()).expect("curl's size");
            let secs: f64 = it.next().and_then(|v| v.parse().ok()).expect("curl's time");
            scrapes.push(ms(secs));
            let next = t + scrape;
            tokio::time::sleep_until(next.min(t0 + window).into()).await;
        }
        let (cpu, secs) = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
        let window_events = events.load(std::sync::atomic::Ordering::Relaxed) - events0;
        let load_after = loadavg();
        let (rss, hwm) = (status_kib("VmRSS:"), status_kib("VmHWM:"));
        let (rss_anon, rss_file) = (status_kib("RssAnon:"), status_kib("RssFile:"));
        let own_records = records_kib(&records) as f64 / 1024.0;
        if opts.str("malloc-stats", "false") == "true" {
            // glibc's own account of the heap (to stderr): bytes in use vs held per arena.
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            // SAFETY: malloc_stats only reads the allocator's counters and prints them.
            unsafe {
                libc::malloc_stats()
            };
        }
        // What glibc would give back if asked (`malloc_trim(0)`: free whole pages anywhere in
        // the heaps; the daemon also asks every 15 s), and how long asking takes; before
        // the renders below add their own.
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            let before = status_kib("VmRSS:");
            let t = Instant::now();
            llm_probe::trim::return_free_memory_to_os();
            let took = t.elapsed();
            eprintln!(
                "malloc_trim(0) after the window: {:.2} ms, RSS {:.1} → {:.1} MiB",
                took.as_secs_f64() * 1e3,
                before as f64 / 1024.0,
                status_kib("VmRSS:") as f64 / 1024.0
            );
        }
        let mut render = Dist::new("`Metrics::render` in-process (after the window)");
        let mut render_size = 0;
        for _ in 0..10 {
            let t = Instant::now();
            let (_, body) = daemon.metrics.render(None);
            render.push(ms(t.elapsed().as_secs_f64()));
            render_size = body.len();
        }
        let mut render_om = Dist::new("`Metrics::render` OpenMetrics");
        for _ in 0..10 {
            let t = Instant::now();
            let _ = daemon.metrics.render(Some("application/openmetrics-text"));
            render_om.push(ms(t.elapsed().as_secs_f64()));
        }
        let mut render_gz = Dist::new("`Metrics::render_gzip` text 0.0.4");
        let mut gz_size = 0;
        for _ in 0..10 {
            let t = Instant::now();
            gz_size = daemon
                .metrics
                .render_gzip(llm_probe::metrics::Exposition::Text)
                .expect("gzip render")
                .len();
            render_gz.push(ms(t.elapsed().as_secs_f64()));
        }
        let daemon_metrics_text = daemon.metrics.render(None);
        daemon.stop().await;
        collector.abort();

        // Start lag.
        let recs = records.lock().unwrap().clone();
        let mut upper = Dist::new("probe start − (`Daemon::start` return + slot + k·interval)");
        let mut lower = Dist::new("probe start lag vs the target's least-late probe");
        let mut ttft_err = Dist::new("TTFT − scripted (from `sent`, incl. connect)");
        let mut by_target: std::collections::HashMap<&str, Vec<f64>> = Default::default();
        let iv = interval.as_secs_f64();
        for (name, at, err) in &recs {
            let s = slot(name, &["chat"], 0, interval);
            let (first, steady) = (s.first.as_secs_f64(), s.steady.as_secs_f64());
            let since = at
                .duration_since(wall_started)
                .map(|d| d.as_secs_f64())
                .unwrap_or_else(|e| -e.duration().as_secs_f64());
            // The first probe at `first`, then `steady + k × interval` (k ≥ 1).
            let k = ((since - steady) / iv).round().max(1.0);
            let lag = if since < steady + iv / 2.0 {
                since - first
            } else {
                since - steady - k * iv
            };
            upper.push(ms(lag));
            by_target.entry(name).or_default().push(lag);
            if let Some(e) = err {
                ttft_err.push(f64::from(*e));
            }
        }
        for lags in by_target.values() {
            let min = lags.iter().copied().fold(f64::INFINITY, f64::min);
            for l in lags {
                lower.push(ms(l - min));
            }
        }
        let ok = recs.iter().filter(|r| r.2.is_some()).count();
        println!(
            "\n#### {targets} targets × 1 scenario, interval {}, {tokens} tokens (TTFT {ttft:?}, ITL {itl:?}) — daemon in-process{}, simulator a separate process{}; read coalescing {}\n",
            humantime::format_duration(interval),
            if pinned { " pinned to CPU 0" } else { "" },
            if pin { " pinned to CPU 1" } else { "" },
            if coalesce.is_zero() {
                "off".to_string()
            } else {
                format!(
                    "{} (held off at the end: {})",
                    humantime::format_duration(coalesce),
                    llm_probe::probe::coalesce::wait_now().is_none()
                )
            },
        );
        println!(
            "`Daemon::start` took {:.0} ms (config with {targets} targets: one HTTP client each); warm-up {:.1} s; window {:.1} s; probes recorded {} ({} ok); loadavg {load_before} → {load_after}\n",
            start_took.as_secs_f64() * 1e3,
            warmup.as_secs_f64(),
            secs,
            recs.len(),
            ok,
        );
        println!("| cost | value | target |\n|---|---:|---|");
        println!(
            "| CPU over the window (user+sys ÷ wall) | {:.1} % of one core | < 10 % |",
            cpu / secs * 100.0
        );
        println!(
            "| token events in the window (of probes finished in it) | {window_events} ({:.0}/s; outcomes missed by the collector: {}) | |",
            window_events as f64 / secs,
            missed.load(std::sync::atomic::Ordering::Relaxed)
        );
        println!(
            "| CPU per token event | {:.1} µs | |",
            cpu / window_events.max(1) as f64 * 1e6
        );
        // What the daemon's own `llm_probe_read_delay_seconds` says (absent in builds before kernel receive stamps).
        let (_, body) = daemon_metrics_text;
        let b = buckets(&body, "llm_probe_read_delay_seconds");
        if b.is_empty() {
            println!("| `llm_probe_read_delay_seconds` | absent (no kernel timestamps) | |");
        } else {
            println!(
                "| `llm_probe_read_delay_seconds` count / P50 / P99 (`histogram_quantile`) | {} / {:.3} ms / {:.3} ms | |",
                b.last().map_or(0.0, |&(_, c)| c),
                ms(histogram_quantile(0.5, &b)),
                ms(histogram_quantile(0.99, &b))
            );
        }
        println!(
            "| RSS at end / peak (VmHWM) | {:.1} MiB / {:.1} MiB | < 50 MiB |",
            rss as f64 / 1024.0,
            hwm as f64 / 1024.0
        );
        println!(
            "| of which the bench's own per-probe records (not the daemon's) | {own_records:.1} MiB | |"
        );
        println!(
            "| of which anonymous / file-backed (the binary's code) | {:.1} MiB / {:.1} MiB | |",
            rss_anon as f64 / 1024.0,
            rss_file as f64 / 1024.0
        );
        println!(
            "| RSS before each scrape, less the bench's own records (s into the window: MiB) | {} | |",
            rss_series
                .iter()
                .map(|(s, kib)| format!("{s}: {:.1}", *kib as f64 / 1024.0))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mib = |b: usize| b as f64 / (1024.0 * 1024.0);
        if heap_series.iter().any(|(_, h)| h.is_some()) {
            println!(
                "| glibc heap before each scrape, in use / held, the bench's records included (s: MiB) | {} | |",
                heap_series
                    .iter()
                    .filter_map(|(s, h)| h.map(|(used, held)| format!("{s}: {:.1} / {:.1}", mib(used), mib(held))))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        println!(
            "| per-pair histograms' heap before each scrape, native buckets / classic and exemplars (s: MiB) | {} | |",
            hist_series
                .iter()
                .map(|(s, (n, o))| format!("{s}: {:.1} / {:.1}", mib(*n), mib(*o)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!(
            "| RSS right after `Daemon::start` (before probing) | {:.1} MiB | |",
            rss_started as f64 / 1024.0
        );
        println!(
            "| start lag P99 (vs each target's least-late probe) | {:.2} ms | < 10 ms |",
            lower.p99()
        );
        println!(
            "| `Metrics::render` P50 / max (text 0.0.4) | {:.2} ms / {:.2} ms | < 20 ms |",
            render.summary().2,
            render.summary().4
        );
        println!(
            "| `/metrics` size (text 0.0.4) | {:.2} MiB ({render_size} bytes); gzip {gz_size} bytes; scraped {size}{} | |",
            render_size as f64 / (1 << 20) as f64,
            if gzip { " (gzip, as Prometheus asks)" } else { " (plain)" }
        );
        println!("\n{HEADER}");
        for d in [
            &mut upper,
            &mut lower,
            &mut ttft_err,
            &mut render,
            &mut render_om,
            &mut render_gz,
            &mut scrapes,
        ] {
            println!("{}", row(d));
        }
    });
}

/// glibc's heap: bytes in use by allocations and bytes held from the kernel (arenas and mapped
/// blocks), from `mallinfo2`; `None` on other C libraries.
fn glibc_heap() -> Option<(usize, usize)> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's counters.
        let m = unsafe { libc::mallinfo2() };
        Some((m.uordblks + m.hblkhd, m.arena + m.hblkhd))
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}
