//! The timings of each probe: the latency and rate histograms of a success (TTFT, TPOT, ITL,
//! tokens per second, E2E, the server's prefill and the TTFT split, the tool calls), the
//! connection setup of any probe, and the probe host's own read delay. The answer-check failure
//! counter is here too: the exposition lists it among these histograms.

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Unit;

use super::buckets::{
    with_thresholds, HistogramKinds, HistogramOptions, CONNECTION_SETUP_BUCKETS, E2E_BUCKETS,
    PREFILL_TOKENS_PER_SECOND_BUCKETS, READ_DELAY_BUCKETS, TOKENS_PER_SECOND_BUCKETS,
    TOKEN_TIME_BUCKETS, TTFT_BUCKETS,
};
use super::exemplars::Exemplar;
use super::fast::Catalog;
use super::histogram::SharedHistogram;
use super::labels::{ProbeLabels, WithLabel};
use super::series::SeriesFamily;
use crate::config::Slo;
use crate::measure::ProbeOutcome;

type Hist = SeriesFamily<ProbeLabels, SharedHistogram>;

/// The timing families and their bucket layout.
pub(super) struct Timings {
    /// TTFT, TPOT and E2E carry exemplars ([`Timings::traced`]).
    ttft: Hist,
    ttfo: Hist,
    tpot: Hist,
    itl: Hist,
    tokens_per_second: Hist,
    e2e: Hist,
    server_prefill: Hist,
    prefill_speed: Hist,
    server_prefill_speed: Hist,
    ttft_overhead: Hist,
    /// The TTFT split, one series per component.
    ttft_component: SeriesFamily<WithLabel<ProbeLabels>, SharedHistogram>,
    first_tool_call: Hist,
    tool_arguments: Hist,
    answer_checks: SeriesFamily<WithLabel<ProbeLabels>, Counter>,
    connection_setup: Hist,
    /// The probe host's own delay, no per-pair labels.
    read_delay: Histogram,
    /// Whether the histograms carry classic buckets.
    classic: bool,
    ttft_boundaries: Arc<[f64]>,
    tps_boundaries: Arc<[f64]>,
    prefill_boundaries: Arc<[f64]>,
}

impl Timings {
    /// Registers the timing families in `r`, their classic buckets with each SLO threshold in
    /// `slos` added, laid out as `histograms` says.
    pub(super) fn register(r: &mut Catalog, slos: &[Slo], histograms: HistogramOptions) -> Self {
        let ttft_b = with_thresholds(TTFT_BUCKETS, slos.iter().map(|s| s.ttft_p95.as_secs_f64()));
        let tps_b = with_thresholds(
            TOKENS_PER_SECOND_BUCKETS,
            slos.iter().map(|s| s.output_tokens_per_second_min),
        );
        let token_b = with_thresholds(TOKEN_TIME_BUCKETS, []);
        let prefill_b = with_thresholds(
            PREFILL_TOKENS_PER_SECOND_BUCKETS,
            slos.iter().filter_map(|s| s.prefill_tokens_per_second_min),
        );
        let e2e_b = with_thresholds(E2E_BUCKETS, []);
        let layout = |bounds: &Arc<[f64]>| histograms.buckets(bounds).family();
        let ttft = r.register_with_unit("time_to_first_token", "Time to first token (TTFT): first token-bearing event (reasoning included) minus request sent", Unit::Seconds, layout(&ttft_b));
        let ttfo = r.register_with_unit(
            "time_to_first_output_token",
            "Time to first output token: first non-reasoning token event minus request sent",
            Unit::Seconds,
            layout(&ttft_b),
        );
        let tpot = r.register_with_unit(
            "time_per_output_token",
            "Time per output token (TPOT): (last token - first token) / (output tokens - 1)",
            Unit::Seconds,
            layout(&token_b),
        );
        let itl = r.register_with_unit(
            "inter_token_latency",
            "Inter-token latency: every gap between consecutive token-bearing events",
            Unit::Seconds,
            layout(&token_b),
        );
        let tokens_per_second = r.register(
            "output_tokens_per_second",
            "Output tokens per second: (output tokens - 1) / (last token - first token) = 1 / TPOT",
            layout(&tps_b),
        );
        let e2e = r.register_with_unit(
            "request_duration",
            "End-to-end request duration (E2E): stream end minus request sent",
            Unit::Seconds,
            layout(&e2e_b),
        );
        let server_prefill = r.register_with_unit(
            "server_prefill",
            "Prompt processing (prefill) time as reported by the server itself (llama.cpp timings.prompt_ms, Ollama prompt_eval_duration); successful probes whose server reports it",
            Unit::Seconds,
            layout(&ttft_b),
        );
        let prefill_speed = r.register(
            "prefill_tokens_per_second",
            "Prefill speed of a generated long prompt (scenarios with prompt_tokens): prompt tokens the server had to prefill (its count, less cached tokens) per second of TTFT",
            layout(&prefill_b),
        );
        let server_prefill_speed = r.register(
            "server_prefill_tokens_per_second",
            "Prefill speed of a generated long prompt by the server's own clock: prompt tokens it evaluated per second of its reported prefill time (llama.cpp timings, Ollama); scenarios with prompt_tokens whose server reports it",
            layout(&prefill_b),
        );
        let ttft_overhead = r.register_with_unit(
            "ttft_overhead",
            "Client TTFT minus the server-reported model load and prefill time: network, TLS, gateways and queueing in front of the server",
            Unit::Seconds,
            layout(&ttft_b),
        );
        let ttft_component = r.register_with_unit(
            "ttft_component",
            "A probe's TTFT split by component: the server's own engine_queue, model_load and engine_prefill, and the rest, outside_engine when the server reported its queue and prefill, else unattributed; per probe the components sum to TTFT. Successful probes whose server reports any part (vLLM --enable-per-request-metrics, llama.cpp timings, Ollama, TGI x-queue-time)",
            Unit::Seconds,
            histograms.buckets(&ttft_b).family(),
        );
        let first_tool_call = r.register_with_unit(
            "time_to_first_tool_call",
            "From request sent to the first stream event carrying a tool call (its name or arguments), successful probes that made a call",
            Unit::Seconds,
            layout(&ttft_b),
        );
        let tool_arguments = r.register_with_unit(
            "tool_call_arguments",
            "From the first tool-call event to the last one carrying arguments (the arguments are complete), successful probes that made a call",
            Unit::Seconds,
            layout(&e2e_b),
        );
        let answer_checks = r.register(
            "answer_check_failures",
            "Probes whose answer failed a check (reason wrong_answer), by check: context_truncated, contains, regex, json, json_schema, min_output_tokens, max_output_tokens, repetition_loop, punctuation_only, special_tokens, empty_after_reasoning, tool_call_missing, tool_arguments",
            SeriesFamily::default(),
        );
        let connection_setup = r.register_with_unit(
            "connection_setup",
            "Time to open the connection a probe used (DNS, TCP, proxy CONNECT, TLS), part of its TTFT; every probe that opened a new connection, whatever its outcome (with connection: fresh, every probe that connected)",
            Unit::Seconds,
            layout(&with_thresholds(CONNECTION_SETUP_BUCKETS, [])),
        );
        let read_delay = r.register_with_unit(
            "read_delay",
            "How long after the kernel received a token event's bytes the probe read them (kernel receive timestamp to read); one sample per read that carried token events, for probes with timestamp_source kernel. High values mean the probe host is overloaded and read-instant timings would be inflated",
            Unit::Seconds,
            Histogram::new(READ_DELAY_BUCKETS.iter().copied()),
        );
        Timings {
            ttft,
            ttfo,
            tpot,
            itl,
            tokens_per_second,
            e2e,
            server_prefill,
            prefill_speed,
            server_prefill_speed,
            ttft_overhead,
            ttft_component,
            first_tool_call,
            tool_arguments,
            answer_checks,
            connection_setup,
            read_delay,
            classic: histograms.kinds != HistogramKinds::Native,
            ttft_boundaries: ttft_b,
            tps_boundaries: tps_b,
            prefill_boundaries: prefill_b,
        }
    }

    /// Whether the histograms carry classic buckets (not with [`HistogramKinds::Native`]).
    pub(super) fn has_classic_buckets(&self) -> bool {
        self.classic
    }

    /// Classic bucket boundaries of the TTFT histograms, seconds.
    pub(super) fn ttft_boundaries(&self) -> &[f64] {
        &self.ttft_boundaries
    }

    /// Classic bucket boundaries of the output-tokens-per-second histogram, tokens/s.
    pub(super) fn tokens_per_second_boundaries(&self) -> &[f64] {
        &self.tps_boundaries
    }

    /// Classic bucket boundaries of the prefill speed histograms, prompt tokens/s.
    pub(super) fn prefill_boundaries(&self) -> &[f64] {
        &self.prefill_boundaries
    }

    /// Records one finished probe: the read delays, and connection setup whenever the probe
    /// opened a connection (it is complete even when the stream later fails); the latency and
    /// rate histograms only for a success (a failed stream's partial timings are never
    /// observed), the failed check for a wrong answer.
    pub(super) fn observe(&self, labels: &ProbeLabels, outcome: &ProbeOutcome) {
        let obs = &outcome.observations;
        for delay in &obs.read_delays {
            self.read_delay.observe(delay.as_secs_f64());
        }
        if let Some(setup) = obs.timeline.connection_setup() {
            self.connection_setup
                .get_or_create(labels)
                .observe(setup.as_secs_f64(), None);
        }
        let m = match &outcome.result {
            Ok(m) => m,
            Err(_) => {
                if let Some(check) = obs.answer.failed_check {
                    self.answer_checks
                        .get_or_create(&labels.with("check", check))
                        .inc();
                }
                return;
            }
        };
        // The probe's exemplar of an observation `v` (none without a W3C trace id).
        let trace_id = obs.trace_id();
        let exemplar = |v: f64| {
            let id = trace_id?;
            Some(Exemplar::new(
                id,
                obs.request_id.as_deref(),
                v,
                outcome.started_at,
            ))
        };
        let ttft = m.ttft.as_secs_f64();
        self.ttft
            .get_or_create(labels)
            .observe(ttft, exemplar(ttft));
        if let Some(t) = m.time_to_first_output_token {
            self.ttfo
                .get_or_create(labels)
                .observe(t.as_secs_f64(), None);
        }
        if let Some(t) = m.tpot.map(|t| t.as_secs_f64()) {
            self.tpot.get_or_create(labels).observe(t, exemplar(t));
        }
        if let Some(r) = m.output_tokens_per_second {
            self.tokens_per_second
                .get_or_create(labels)
                .observe(r, None);
        }
        let itl = self.itl.get_or_create(labels);
        for gap in &m.inter_token_latencies {
            itl.observe(gap.as_secs_f64(), None);
        }
        drop(itl);
        let e2e = m.e2e.as_secs_f64();
        self.e2e.get_or_create(labels).observe(e2e, exemplar(e2e));
        if let Some(p) = m.server_prefill {
            self.server_prefill
                .get_or_create(labels)
                .observe(p.as_secs_f64(), None);
        }
        if let Some(v) = m.prefill_tokens_per_second {
            self.prefill_speed.get_or_create(labels).observe(v, None);
        }
        if let Some(v) = m.server_prefill_tokens_per_second {
            self.server_prefill_speed
                .get_or_create(labels)
                .observe(v, None);
        }
        if let Some(o) = m.ttft_overhead {
            self.ttft_overhead
                .get_or_create(labels)
                .observe(o.as_secs_f64(), None);
        }
        for (c, d) in m.ttft_split.components() {
            self.ttft_component
                .get_or_create(&labels.with("component", c.as_str()))
                .observe(d.as_secs_f64(), None);
        }
        let answer = &obs.answer;
        if let Some(first) = answer.first_tool_call {
            let sent = obs.timeline.sent;
            self.first_tool_call
                .get_or_create(labels)
                .observe(first.saturating_duration_since(sent).as_secs_f64(), None);
            if let Some(last) = answer.last_tool_arguments {
                self.tool_arguments
                    .get_or_create(labels)
                    .observe(last.saturating_duration_since(first).as_secs_f64(), None);
            }
        }
    }

    /// Removes the prefill speeds of one pair (its scenario has no generated prompt any more).
    pub(super) fn forget_prefill(&self, labels: &ProbeLabels) {
        self.prefill_speed.remove(labels);
        self.server_prefill_speed.remove(labels);
    }

    /// Removes every series of one pair.
    pub(super) fn forget(&self, labels: &ProbeLabels) {
        for h in self.pair_histograms() {
            h.remove(labels);
        }
        self.ttft_component.remove_all_of(labels);
        self.answer_checks.remove_all_of(labels);
    }

    /// The histogram families keyed by the pair's labels alone: every per-pair histogram but
    /// `ttft_component`, which adds a component label.
    fn pair_histograms(&self) -> [&Hist; 13] {
        [
            &self.ttft,
            &self.ttfo,
            &self.tpot,
            &self.itl,
            &self.tokens_per_second,
            &self.e2e,
            &self.server_prefill,
            &self.prefill_speed,
            &self.server_prefill_speed,
            &self.ttft_overhead,
            &self.connection_setup,
            &self.first_tool_call,
            &self.tool_arguments,
        ]
    }

    /// Heap bytes of the per-pair histograms beyond their structs, summed over every series:
    /// `(native buckets, classic buckets and exemplars)`.
    pub(super) fn heap_bytes(&self) -> (usize, usize) {
        fn add<L>(total: &mut (usize, usize), family: &SeriesFamily<L, SharedHistogram>) {
            for s in family.read().values() {
                let (native, other) = s.heap_bytes();
                total.0 += native;
                total.1 += other;
            }
        }
        let mut total = (0, 0);
        for family in self.pair_histograms() {
            add(&mut total, family);
        }
        add(&mut total, &self.ttft_component);
        total
    }

    /// The families with exemplars, by full metric name.
    pub(super) fn traced(&self) -> [(&'static str, &Hist); 3] {
        [
            ("llm_probe_time_to_first_token_seconds", &self.ttft),
            ("llm_probe_time_per_output_token_seconds", &self.tpot),
            ("llm_probe_request_duration_seconds", &self.e2e),
        ]
    }
}
