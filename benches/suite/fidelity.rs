//! Fidelity against ground truth: N concurrent streams, each probing the scripted simulator
//! back to back (a closed loop: each probe starts on a timer 5 ms after the previous ended, as
//! the daemon's schedule starts them; starts staggered over one probe's length so that N
//! streams are open at once), then every measurement is compared with the script.
//!
//! In-process mode (default): the simulator runs on its own thread and tokio runtime pinned to
//! CPU 1, the prober on CPU 0. Each stream is its own target whose requests carry an
//! `x-bench-stream` header, so each probe is matched with the request the simulator received,
//! and with the instants at which the simulator actually handed each event to the connection.
//! Errors are reported three ways:
//!
//! - `… − scripted`: measured minus the script, from the request's arrival (the brief's number);
//! - `sim late`: when the simulator actually sent minus when the script says (tokio's timer
//!   fires on whole-millisecond ticks, so this alone is 0–1 ms);
//! - `client`: measured minus the simulator's actual send (loopback + HTTP + decode + our
//!   scheduling): the part that is ours.
//!
//! `--url BASE` mode: probes an external simulator (`llm-probe simulate`), where only the
//! client-side view exists: measured TTFT (from our `sent` mark) minus the scripted TTFT. This is
//! the number the peer tools are compared on.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use llm_probe::config;
use llm_probe::measure::ProbeOutcome;
use llm_probe::metrics::Metrics;
use llm_probe::probe::{build_client, Prober};
use llm_probe::simulate::{ReceivedRequest, Script, Simulator, RECEIVED_CAPACITY};

use crate::stats::{buckets, histogram_quantile, ms, row, Dist, HEADER};
use crate::{loadavg, pin_to_cpu, Opts};

/// a − b in seconds, signed.
pub fn sd(a: Instant, b: Instant) -> f64 {
    if a >= b {
        (a - b).as_secs_f64()
    } else {
        -(b - a).as_secs_f64()
    }
}

fn config_yaml(url: &str, streams: usize, max_tokens: u32, connection: &str) -> String {
    let mut y = format!(
        "defaults:\n  interval: 1h\n  timeout: 60s\nscenarios:\n  - name: bench\n    messages: [{{role: user, content: \"Say something.\"}}]\n    max_tokens: {max_tokens}\ntargets:\n"
    );
    for i in 0..streams {
        y.push_str(&format!(
            "  - name: s{i}\n    protocol: openai-chat\n    base_url: {url}\n    model: sim\n    connection: {connection}\n    headers: {{x-bench-stream: \"{i}\"}}\n"
        ));
    }
    y
}

struct Run {
    /// (stream, outcome) in completion order per stream.
    outcomes: Vec<(usize, ProbeOutcome)>,
    wall: Duration,
    peak_open: usize,
}

/// Runs `streams` closed-loop streams of `probes` probes each against `url`.
fn drive(url: &str, streams: usize, probes: usize, script: &Script, connection: &str) -> Run {
    let cfg = config::parse(
        &config_yaml(url, streams, script.tokens, connection),
        "<bench>",
        &|_| None,
    )
    .expect("bench config");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(llm_probe::probe::coalesce::on_park)
        .build()
        .unwrap();
    let period = script.ttft + script.itl * script.tokens;
    let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let peak = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    // One shared HTTP client, built before any stream starts (building one loads the root
    // certificates, ~3 ms, which would stall the streams already running).
    let client = rt.block_on(async { build_client(&cfg.targets[0]).expect("client") });
    let outcomes = rt.block_on(async {
        let mut tasks = Vec::new();
        for (i, target) in cfg.targets.iter().enumerate() {
            let prober = Prober::with_client(target.clone(), client.clone());
            let scenario = target.scenarios[0].clone();
            let stagger = period.mul_f64(i as f64 / streams as f64);
            let (open, peak) = (open.clone(), peak.clone());
            tasks.push(tokio::spawn(async move {
                use llm_probe::probe::coalesce;
                let mut start = tokio::time::Instant::now() + stagger;
                let mut out = Vec::with_capacity(probes);
                for _ in 0..probes {
                    // On a timer, as the daemon's schedule starts a probe (`schedule::run_loop`,
                    // with wake-up coalescing's early guard): 5 ms after the previous ended.
                    let early = coalesce::sleep_until_start(start).await;
                    let now = open.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    peak.fetch_max(now, std::sync::atomic::Ordering::Relaxed);
                    let o = coalesce::starting(early, prober.probe(&scenario)).await;
                    open.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                    out.push((i, o));
                    start = tokio::time::Instant::now() + Duration::from_millis(5);
                }
                out
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        all
    });
    Run {
        outcomes,
        wall: started.elapsed(),
        peak_open: peak.load(std::sync::atomic::Ordering::Relaxed),
    }
}

fn failures(outcomes: &[(usize, ProbeOutcome)]) -> String {
    let mut by: HashMap<&str, usize> = HashMap::new();
    for (_, o) in outcomes {
        if let Err(f) = &o.result {
            *by.entry(f.reason.as_str()).or_default() += 1;
        }
    }
    if by.is_empty() {
        "none".into()
    } else {
        format!("{by:?}")
    }
}

pub fn main(opts: &Opts) {
    let script = Script {
        ttft: opts.dur("ttft", "100ms"),
        itl: opts.dur("itl", "20ms"),
        tokens: opts.num("tokens", 32),
        ..Script::default()
    };
    let probes = opts.num("probes", 0usize);
    let duration = opts.dur("duration", "20s");
    let streams_list = opts.list("streams", "1,100,1000");
    // `fresh` (the default of `llm-probe`: a new TCP connection per probe) or `reuse`.
    let connection = opts.str("connection", "fresh");
    // `llm-probe run --probe.coalesce-reads` (default 2ms; `0s`: off, as before §15), on the
    // prober's runtime only (the simulator's runtime has no park hook).
    llm_probe::probe::coalesce::set_wait(opts.dur("coalesce", "2ms"));
    if let Some(url) = opts.opt("url") {
        return external(&url, &streams_list, probes.max(1), &script, &connection);
    }
    let pin = !opts.0.contains_key("no-pin");
    for streams in streams_list {
        // Enough probes per stream for ~`duration` of run (at least 2), unless given.
        let per = if probes > 0 {
            probes
        } else {
            let one = script.ttft + script.itl * script.tokens;
            ((duration.as_secs_f64() / one.as_secs_f64()).ceil() as usize).max(2)
        };
        in_process(streams, per, &script, pin, &connection);
    }
}

/// The simulator on its own thread and runtime (pinned to CPU 1), listening on `addr`
/// (`127.0.0.1:0`: any free port); returns its base URL, a sender that stops it and hands back
/// what it received.
pub fn start_simulator(
    addr: std::net::SocketAddr,
    script: Script,
    pin: bool,
) -> (
    String,
    std::sync::mpsc::Sender<()>,
    std::sync::mpsc::Receiver<Vec<ReceivedRequest>>,
) {
    let (url_tx, url_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let (rec_tx, rec_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        if pin {
            pin_to_cpu(1);
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let sim = Simulator::start(addr, script).await.expect("simulator");
            url_tx.send(sim.base_url()).unwrap();
            // Wait for the stop signal without blocking the runtime.
            let stop = tokio::task::spawn_blocking(move || stop_rx.recv());
            let _ = stop.await;
            rec_tx.send(sim.received()).unwrap();
        });
    });
    (url_rx.recv().unwrap(), stop_tx, rec_rx)
}

fn in_process(streams: usize, per: usize, script: &Script, pin: bool, connection: &str) {
    let any_port = "127.0.0.1:0".parse().unwrap();
    let (url, stop, received) = start_simulator(any_port, script.clone(), pin);
    let pinned = pin && pin_to_cpu(0);
    let load_before = loadavg();
    let run = drive(&url, streams, per, script, connection);
    let load_after = loadavg();
    stop.send(()).unwrap();
    let received = received.recv().unwrap();

    // The simulator's requests of each stream, in arrival order.
    let mut by_stream: HashMap<usize, Vec<&ReceivedRequest>> = HashMap::new();
    for r in &received {
        let id = r
            .headers
            .iter()
            .find(|(k, _)| k == "x-bench-stream")
            .and_then(|(_, v)| v.parse().ok())
            .expect("x-bench-stream header");
        by_stream.entry(id).or_default().push(r);
    }
    for v in by_stream.values_mut() {
        v.sort_by_key(|r| r.arrived);
    }
    // The simulator keeps only its most recent requests (`RECEIVED_CAPACITY`, 10,000): a
    // stream whose oldest requests were dropped matches its outcomes from the end, and its
    // first outcomes count as unrecorded, not as mismatches.
    let mut outcomes_of: HashMap<usize, usize> = HashMap::new();
    for (stream, _) in &run.outcomes {
        *outcomes_of.entry(*stream).or_default() += 1;
    }
    let mut next: HashMap<usize, isize> = outcomes_of
        .iter()
        .map(|(s, n)| {
            let recorded = by_stream.get(s).map_or(0, Vec::len);
            (*s, -(n.saturating_sub(recorded) as isize))
        })
        .collect();
    let mut unrecorded = 0usize;

    let (ttft, itl) = (script.ttft.as_secs_f64(), script.itl.as_secs_f64());
    let mut d_ttft = Dist::new("TTFT − scripted (from arrival)");
    let mut d_ttft_sim = Dist::new("  of which sim late (1st event)");
    let mut d_ttft_client = Dist::new("  of which client (1st event)");
    let mut d_ttft_read = Dist::new("  of which client (1st event), read instant");
    let mut d_read_delay = Dist::new("read delay (kernel → read), every token read");
    let mut kernel_probes = 0usize;
    // First tokens marked at or after the simulator's send of the second token: the probe read
    // the first one only after the second had arrived, and the kernel merged the two segments
    // (the newest stamp wins). Their error is the probe's lateness, not the simulator's.
    let mut merged_first = 0usize;
    let mut d_ttft_sent = Dist::new("TTFT − scripted (from our `sent`, incl. connect)");
    let mut d_tpot = Dist::new("TPOT − scripted ITL");
    let mut d_tpot_client = Dist::new("TPOT − sim's actual mean gap");
    let mut d_itl = Dist::new("each ITL gap − scripted");
    let mut d_itl_client = Dist::new("each ITL gap − sim's actual gap");
    let mut d_sim_late = Dist::new("sim late, every event");
    let mut d_client = Dist::new("client delay, every event");
    let mut unmatched = 0usize;
    for (stream, o) in &run.outcomes {
        let k = next.entry(*stream).or_default();
        let index = *k;
        *k += 1;
        let Ok(index) = usize::try_from(index) else {
            // Before the stream's first recorded request.
            unrecorded += 1;
            continue;
        };
        let req = by_stream.get(stream).and_then(|v| v.get(index)).copied();
        let (Ok(m), Some(req)) = (&o.result, req) else {
            unmatched += 1;
            continue;
        };
        let events = &o.observations.timeline.token_events;
        let sent = req.events_sent.lock().unwrap().clone();
        if sent.len() != events.len() {
            unmatched += 1;
            continue;
        }
        let arrived = req.arrived;
        d_ttft.push(ms(sd(events[0].at, arrived) - ttft));
        d_ttft_sim.push(ms(sd(sent[0], arrived) - ttft));
        d_ttft_client.push(ms(sd(events[0].at, sent[0])));
        merged_first += usize::from(sent.len() > 1 && events[0].at >= sent[1]);
        // With kernel timestamps, the first token's read returned `read_delays[0]` after its
        // mark: the read instant the probe would have used without them.
        let obs = &o.observations;
        let kernel = obs.timeline.timestamp_source == llm_probe::measure::TimestampSource::Kernel;
        kernel_probes += usize::from(kernel);
        let first_read = match obs.read_delays.first() {
            Some(d) if kernel => events[0].at + *d,
            _ => events[0].at,
        };
        d_ttft_read.push(ms(sd(first_read, sent[0])));
        for d in &obs.read_delays {
            d_read_delay.push(ms(d.as_secs_f64()));
        }
        d_ttft_sent.push(ms(m.ttft.as_secs_f64() - ttft));
        if let Some(tpot) = m.tpot {
            d_tpot.push(ms(tpot.as_secs_f64() - itl));
            let sim_mean = sd(sent[sent.len() - 1], sent[0]) / (sent.len() - 1) as f64;
            d_tpot_client.push(ms(tpot.as_secs_f64() - sim_mean));
        }
        for j in 0..events.len() {
            let scripted = script.ttft + script.itl * j as u32;
            d_sim_late.push(ms(sd(sent[j], arrived) - scripted.as_secs_f64()));
            d_client.push(ms(sd(events[j].at, sent[j])));
            if j > 0 {
                let gap = sd(events[j].at, events[j - 1].at);
                d_itl.push(ms(gap - itl));
                d_itl_client.push(ms(gap - sd(sent[j], sent[j - 1])));
            }
        }
    }
    println!(
        "\n#### {streams} concurrent stream(s), connection: {connection}, read coalescing {:?} (held off at the end: {}) — in-process simulator{}\n",
        llm_probe::probe::coalesce::wait(),
        llm_probe::probe::coalesce::wait_now().is_none(),
        if pinned {
            " (sim pinned to CPU 1, prober to CPU 0)"
        } else {
            " (not pinned)"
        }
    );
    println!(
        "script: TTFT {:?}, ITL {:?}, {} tokens; {} probes per stream, {} probes in {:.1} s, peak {} open at once; failures: {}; unmatched: {unmatched}; not in the simulator's record (it keeps the last {RECEIVED_CAPACITY} requests): {unrecorded}; timestamp_source kernel: {kernel_probes}; first token marked at or after the 2nd token's send (merged): {merged_first}; loadavg {load_before} → {load_after}\n",
        script.ttft,
        script.itl,
        script.tokens,
        per,
        run.outcomes.len(),
        run.wall.as_secs_f64(),
        run.peak_open,
        failures(&run.outcomes),
    );
    println!("{HEADER}");
    for d in [
        &mut d_ttft,
        &mut d_ttft_sim,
        &mut d_ttft_client,
        &mut d_ttft_read,
        &mut d_ttft_sent,
        &mut d_tpot,
        &mut d_tpot_client,
        &mut d_itl,
        &mut d_itl_client,
        &mut d_sim_late,
        &mut d_client,
        &mut d_read_delay,
    ] {
        println!("{}", row(d));
    }
    let delay_metric = read_delay_metric(&run.outcomes);
    println!(
        "| `llm_probe_read_delay_seconds` (the daemon's histogram of these probes; `histogram_quantile`) | {} | | {:.3} | {:.3} | |",
        delay_metric.0, delay_metric.1, delay_metric.2
    );
    println!(
        "\nSUMMARY streams={streams} p99_ttft_err_ms={:.3} p99_ttft_client_ms={:.3} p99_ttft_client_read_ms={:.3} p99_sim_late_ms={:.3} p99_itl_err_ms={:.3} p99_read_delay_metric_ms={:.3} load={load_after}",
        d_ttft.p99(),
        d_ttft_client.p99(),
        d_ttft_read.p99(),
        d_sim_late.p99(),
        d_itl.p99(),
        delay_metric.2
    );
}

/// What `llm_probe_read_delay_seconds` reports for `outcomes`: every outcome observed by the
/// daemon's `Metrics`, rendered as `/metrics` is, and read back as Prometheus would
/// (`histogram_quantile` over the classic buckets). `(count, P50 ms, P99 ms)`.
fn read_delay_metric(outcomes: &[(usize, ProbeOutcome)]) -> (u64, f64, f64) {
    let metrics = Metrics::new(&[]);
    for (_, o) in outcomes {
        metrics.observe(o);
    }
    let (_, body) = metrics.render(None);
    let b = buckets(&body, "llm_probe_read_delay_seconds");
    let count = b.last().map_or(0, |&(_, c)| c as u64);
    (
        count,
        ms(histogram_quantile(0.5, &b)),
        ms(histogram_quantile(0.99, &b)),
    )
}

/// Probes an external simulator; only client-side numbers exist.
fn external(url: &str, streams_list: &[usize], probes: usize, script: &Script, connection: &str) {
    for &streams in streams_list {
        let load_before = loadavg();
        let run = drive(url, streams, probes, script, connection);
        let load_after = loadavg();
        let (ttft, itl) = (script.ttft.as_secs_f64(), script.itl.as_secs_f64());
        let mut d_ttft = Dist::new("TTFT − scripted");
        let mut d_tpot = Dist::new("TPOT − scripted ITL");
        let mut d_itl = Dist::new("each ITL gap − scripted");
        let mut d_e2e = Dist::new("E2E − scripted last token");
        for (_, o) in &run.outcomes {
            let Ok(m) = &o.result else { continue };
            d_ttft.push(ms(m.ttft.as_secs_f64() - ttft));
            if let Some(t) = m.tpot {
                d_tpot.push(ms(t.as_secs_f64() - itl));
            }
            for g in &m.inter_token_latencies {
                d_itl.push(ms(g.as_secs_f64() - itl));
            }
            let last = ttft + itl * (m.token_events.max(1) - 1) as f64;
            d_e2e.push(ms(m.e2e.as_secs_f64() - last));
        }
        println!("\n#### llm-probe (connection: {connection}) — {streams} concurrent stream(s) against {url}\n");
        println!(
            "{} probes in {:.1} s; failures: {}; loadavg {load_before} → {load_after}\n",
            run.outcomes.len(),
            run.wall.as_secs_f64(),
            failures(&run.outcomes)
        );
        println!("{HEADER}");
        for d in [&mut d_ttft, &mut d_tpot, &mut d_itl, &mut d_e2e] {
            println!("{}", row(d));
        }
        println!(
            "\nSUMMARY tool=llm-probe connection={connection} streams={streams} p99_ttft_err_ms={:.3} p99_itl_err_ms={:.3} load={load_after}",
            d_ttft.p99(),
            d_itl.p99()
        );
    }
}
