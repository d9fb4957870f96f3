//! The last probe outcomes kept in memory, per (target, scenario) pair, in a compact form: for
//! the status pages (`/`, `/targets/{target}`, `/api/v1/*`, badges) and the demo's live summary.
//!
//! Each probe is stored as a fixed-size record ([`RECORD_BYTES`] bytes; no heap allocation of
//! its own): durations as whole microseconds, tokens per second as `f32`, the target and
//! scenario once per pair, and the failure detail and identity line shared with the pair's
//! earlier probes that carried the same text. Readers get [`RecentProbe`]s built from the
//! records.
//!
//! Bounded per pair by count and age ([`HistoryLimits`], `--web.history.max-probes` and
//! `--web.history.max-age`); failures are also kept in a ring of their own that holds
//! [`FAILURE_RETENTION`] times as many for [`FAILURE_RETENTION`] times as long, so a failure
//! stays visible long after a run of successes. Configuration reloads are recorded too (the
//! charts mark them). Prometheus remains the long-term store.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::measure::{FailureReason, Identity, ProbeOutcome, TraceId};
use crate::stats::quantiles_type7;

/// Failures are kept this many times longer (count and age) than probes.
pub const FAILURE_RETENTION: u32 = 4;

/// The window the status pages judge a pair's state over (10 minutes, as the SLO alerts;
/// `status::state::WINDOW` is this). A pair's probes within it are never dropped for the count
/// limit (only for `max_age`): at an interval below 5 s the 120 probes of the default would
/// cover only part of it, and the pages would judge "the last 10 minutes" over the last 2.
pub const STATE_WINDOW: Duration = Duration::from_secs(10 * 60);

/// Reload instants kept.
const RELOADS_KEPT: usize = 100;

/// How much history is kept per (target, scenario) pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryLimits {
    /// Probes kept per pair (≥ 1).
    pub max_probes: usize,
    /// Probes older than this are dropped.
    pub max_age: Duration,
}

impl Default for HistoryLimits {
    /// 120 probes and 6 hours per pair: 30 minutes at the default 15 s interval (three times
    /// the status pages' 10-minute state window); 7.5 KiB per pair, 7.3 MiB at 1,000 pairs
    /// (a ring of 120 records of [`RECORD_BYTES`] = 64 bytes, 16 of them the trace id;
    /// BENCHMARKS.md §17), plus the failures ring when probes fail.
    fn default() -> Self {
        HistoryLimits {
            max_probes: 120,
            max_age: Duration::from_secs(6 * 3600),
        }
    }
}

/// One probe, summarised: what the status pages chart.
#[derive(Debug, Clone, PartialEq)]
pub struct RecentProbe {
    /// Target name (shared with the probe's outcome and the pair's other probes).
    pub target: Arc<str>,
    /// Scenario name (shared likewise).
    pub scenario: Arc<str>,
    /// The replica probed (its `replica` label value) for a target with `replicas:`; empty
    /// otherwise (shared with the pair's other probes of the same replica).
    pub replica: Arc<str>,
    /// Wall-clock start of the probe.
    pub started_at: SystemTime,
    /// TTFT, when the probe succeeded.
    pub ttft: Option<Duration>,
    /// Output tokens per second, when known.
    pub output_tokens_per_second: Option<f64>,
    /// TPOT, when known (N ≥ 2 over a non-zero span).
    pub tpot: Option<Duration>,
    /// Median and 95th percentile (type 7, [`crate::stats::quantile_type7`]) of the probe's
    /// inter-token latencies, when it had at least one gap.
    pub itl: Option<ItlSummary>,
    /// E2E, when the probe succeeded.
    pub e2e: Option<Duration>,
    /// Output tokens, when the probe succeeded.
    pub output_tokens: Option<u64>,
    /// The failure reason and detail, when it failed.
    pub failure: Option<(FailureReason, String)>,
    /// The backend's identity as the probe saw it (`None`: it revealed nothing).
    pub identity: Option<Arc<str>>,
    /// The W3C trace id the probe sent (`None`: none, or a target's own non-W3C
    /// `traceparent`): the key of its record URL (`/probes/{trace_id}`) and of its exemplars.
    pub trace_id: Option<TraceId>,
}

/// A probe's inter-token latencies in two numbers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ItlSummary {
    /// Median ITL.
    pub p50: Duration,
    /// 95th percentile ITL.
    pub p95: Duration,
}

/// Bytes of one kept probe (a failure kept in the failures ring too takes as many again).
pub const RECORD_BYTES: usize = std::mem::size_of::<Record>();

/// A stored duration that is absent.
const ABSENT: u32 = u32::MAX;

/// `flags`: the probe had an output-tokens-per-second value.
const HAS_TPS: u8 = 1;
/// `flags`: the probe had an output token count.
const HAS_TOKENS: u8 = 2;
/// Nanoseconds in a microsecond and in a millisecond: the units of stored durations.
const US: u32 = 1_000;
const MS: u32 = 1_000_000;

/// `flags`: the durations are whole milliseconds, not microseconds (a probe with a duration of
/// 71 minutes or more: up to the configuration's longest timeout of a day, and beyond).
const IN_MS: u8 = 4;

/// One probe as stored: fixed size (64 bytes), no heap allocation of its own (the texts are
/// shared). Durations are kept to the microsecond (the pages show milliseconds) while they all
/// fit in a `u32` (up to 71 minutes); a probe with a longer one keeps all five to the
/// millisecond ([`IN_MS`]; up to 49 days, beyond the configuration's longest timeout of a day).
/// Output tokens per second are kept as `f32` and read back to 7 significant digits.
#[derive(Debug, Clone)]
struct Record {
    /// Start, nanoseconds since the Unix epoch (0 for an instant before it).
    started_ns: u64,
    /// The trace id's bytes; all zero for none (W3C: the all-zero id is invalid).
    trace_id: [u8; 16],
    /// The failure detail and the identity line, shared with the pair's earlier records of
    /// the same two texts; `None` when the probe had neither.
    texts: Option<Arc<Texts>>,
    /// TTFT, TPOT, E2E, ITL median and P95 in microseconds, or milliseconds with [`IN_MS`]
    /// (rounded); [`ABSENT`] when unknown.
    ttft: u32,
    tpot: u32,
    e2e: u32,
    itl_p50: u32,
    itl_p95: u32,
    /// Output tokens per second (to `f32`'s 7 significant digits).
    output_tokens_per_second: f32,
    /// Output tokens (saturating at `u32::MAX`: no stream is that long).
    output_tokens: u32,
    /// 1 + the failure reason's index in [`FailureReason::ALL`]; 0 for a success.
    failure: u8,
    /// [`HAS_TPS`], [`HAS_TOKENS`], [`IN_MS`].
    flags: u8,
    /// The replica: its index in the pair's [`Replicas`] (0: none; in the padding the other
    /// fields leave, so a record stays 64 bytes).
    replica: u16,
}

/// The texts of a kept probe: a failure's detail, the backend's identity line.
#[derive(Debug, PartialEq, Eq)]
struct Texts {
    detail: Option<Box<str>>,
    identity: Option<Arc<str>>,
}

/// `d` in whole units of `unit_ns` nanoseconds (1,000: microseconds; 1,000,000:
/// milliseconds), rounded to the nearest; [`ABSENT`] for `None`, `ABSENT - 1` for anything
/// that does not fit below it (71 minutes in microseconds, 49 days in milliseconds).
fn to_units(d: Option<Duration>, unit_ns: u32) -> u32 {
    d.map_or(ABSENT, |d| {
        let units = d.as_nanos().saturating_add(u128::from(unit_ns / 2)) / u128::from(unit_ns);
        u32::try_from(units).map_or(ABSENT - 1, |u| u.min(ABSENT - 1))
    })
}

/// A duration stored by [`to_units`] with `unit_ns`.
fn from_units(units: u32, unit_ns: u32) -> Option<Duration> {
    (units != ABSENT).then(|| Duration::from_nanos(u64::from(units) * u64::from(unit_ns)))
}

/// A stored `f32` as the `f64` of its 7 significant digits: for a token rate from 0.001 to a
/// million, the value it was stored from when that had 7 significant digits or fewer (an SLO
/// floor such as `0.7` compares equal again, and the API shows `84.46509`, not
/// `84.465087890625`); any other value within 5.1e-7 of itself, relatively (`f32` does not
/// tell every pair of 7-digit decimals apart at all magnitudes). Values from a million up and
/// below 1e-16 are read back as stored, as are 0, infinities and NaN.
fn seven_digits(x: f32) -> f64 {
    let x = f64::from(x);
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    // The power of ten of the leading digit (`log10` is exact at powers of ten).
    let exponent = x.abs().log10().floor() as i32;
    match 6 - exponent {
        shift @ 1..=22 => {
            // Exact powers of ten: the quotient is the decimal's nearest `f64`.
            let scale = 10f64.powi(shift);
            (x * scale).round() / scale
        }
        _ => x,
    }
}

fn epoch_ns(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

impl Record {
    /// `p` stored, sharing texts equal to those of `rings`' newest records; its replica is
    /// `replica`, an index into `rings.replicas`.
    fn new(p: RecentProbe, rings: &Rings, replica: u16) -> Self {
        let (failure, detail) = match &p.failure {
            Some((reason, detail)) => {
                let index = FailureReason::ALL
                    .iter()
                    .position(|r| r == reason)
                    .unwrap_or(0);
                (u8::try_from(index + 1).unwrap_or(u8::MAX), Some(&**detail))
            }
            None => (0, None),
        };
        let texts = share(detail, p.identity.clone(), rings);
        let durations = [
            p.ttft,
            p.tpot,
            p.e2e,
            p.itl.map(|i| i.p50),
            p.itl.map(|i| i.p95),
        ];
        let coarse = durations
            .iter()
            .any(|d| d.is_some() && to_units(*d, US) == ABSENT - 1);
        let unit = if coarse { MS } else { US };
        let [ttft, tpot, e2e, itl_p50, itl_p95] = durations.map(|d| to_units(d, unit));
        let mut flags = if coarse { IN_MS } else { 0 };
        if p.output_tokens_per_second.is_some() {
            flags |= HAS_TPS;
        }
        if p.output_tokens.is_some() {
            flags |= HAS_TOKENS;
        }
        Record {
            started_ns: epoch_ns(p.started_at),
            ttft,
            tpot,
            e2e,
            itl_p50,
            itl_p95,
            // Rounded to `f32` (7 significant digits).
            output_tokens_per_second: p.output_tokens_per_second.unwrap_or(0.0) as f32,
            output_tokens: p
                .output_tokens
                .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX)),
            trace_id: p.trace_id.map_or([0; 16], TraceId::to_bytes),
            texts,
            failure,
            flags,
            replica,
        }
    }

    fn started_at(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_nanos(self.started_ns)
    }

    /// The probe of `rings` this record stores.
    fn probe(&self, rings: &Rings) -> RecentProbe {
        let unit = if self.flags & IN_MS != 0 { MS } else { US };
        let stored = |units| from_units(units, unit);
        let itl = match (stored(self.itl_p50), stored(self.itl_p95)) {
            (Some(p50), Some(p95)) => Some(ItlSummary { p50, p95 }),
            _ => None,
        };
        let failure = (self.failure > 0).then(|| {
            let reason = FailureReason::ALL
                .get(usize::from(self.failure - 1))
                .copied()
                .unwrap_or(FailureReason::ALL[0]);
            (
                reason,
                self.texts
                    .as_ref()
                    .and_then(|t| t.detail.as_deref())
                    .unwrap_or_default()
                    .to_string(),
            )
        });
        RecentProbe {
            target: rings.target.clone(),
            scenario: rings.scenario.clone(),
            replica: rings.replicas.name(self.replica),
            started_at: self.started_at(),
            ttft: stored(self.ttft),
            output_tokens_per_second: (self.flags & HAS_TPS != 0)
                .then(|| seven_digits(self.output_tokens_per_second)),
            tpot: stored(self.tpot),
            itl,
            e2e: stored(self.e2e),
            output_tokens: (self.flags & HAS_TOKENS != 0).then_some(u64::from(self.output_tokens)),
            failure,
            identity: self.texts.as_ref().and_then(|t| t.identity.clone()),
            trace_id: TraceId::from_bytes(self.trace_id),
        }
    }
}

/// The texts `detail` and `identity` as shared [`Texts`]: those of one of `rings`' newest
/// records (recent or failures) if equal, else new ones; `None` when both are absent.
fn share(detail: Option<&str>, identity: Option<Arc<str>>, rings: &Rings) -> Option<Arc<Texts>> {
    if detail.is_none() && identity.is_none() {
        return None;
    }
    let found = (rings.recent.iter().rev().take(SHARED_LOOKBACK))
        .chain(rings.failures.iter().rev().take(SHARED_LOOKBACK))
        .filter_map(|r| r.texts.as_ref())
        .find(|t| t.detail.as_deref() == detail && t.identity.as_deref() == identity.as_deref())
        .cloned();
    Some(found.unwrap_or_else(|| {
        // A new pair of texts; the identity is still one of the newest records' if equal
        // (a failure and the successes around it usually share it).
        let identity = identity.map(|i| {
            (rings.recent.iter().rev().take(SHARED_LOOKBACK))
                .filter_map(|r| r.texts.as_ref()?.identity.as_ref())
                .find(|e| e[..] == i[..])
                .cloned()
                .unwrap_or(i)
        });
        Arc::new(Texts {
            detail: detail.map(Box::from),
            identity,
        })
    }))
}

/// How many of a pair's newest records a new one looks through for a text to share.
const SHARED_LOOKBACK: usize = 16;

/// The identity in one line: `model=… fingerprint=… server=… version=…`, the parts present.
pub fn identity_line(id: &Identity) -> Option<String> {
    let parts: Vec<String> = [
        ("model", &id.response_model),
        ("fingerprint", &id.system_fingerprint),
        ("server", &id.server_header),
        ("version", &id.server_version),
    ]
    .iter()
    .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}")))
    .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

impl From<&ProbeOutcome> for RecentProbe {
    fn from(o: &ProbeOutcome) -> Self {
        let m = o.result.as_ref().ok();
        let itl = m.and_then(|m| {
            let mut gaps: Vec<f64> = m
                .inter_token_latencies
                .iter()
                .map(Duration::as_secs_f64)
                .collect();
            let [p50, p95] = quantiles_type7(&mut gaps, [0.5, 0.95]);
            Some(ItlSummary {
                p50: Duration::from_secs_f64(p50?),
                p95: Duration::from_secs_f64(p95?),
            })
        });
        RecentProbe {
            target: o.target.clone(),
            scenario: o.scenario.clone(),
            replica: o.replica.clone(),
            started_at: o.started_at,
            ttft: m.map(|m| m.ttft),
            output_tokens_per_second: m.and_then(|m| m.output_tokens_per_second),
            tpot: m.and_then(|m| m.tpot),
            itl,
            e2e: m.map(|m| m.e2e),
            output_tokens: m.map(|m| m.output_tokens),
            failure: o
                .result
                .as_ref()
                .err()
                .map(|f| (f.reason, f.detail.clone())),
            identity: identity_line(&o.observations.identity).map(Arc::from),
            trace_id: o.observations.trace_id(),
        }
    }
}

/// One pair's rings, newest last.
#[derive(Debug)]
struct Rings {
    target: Arc<str>,
    scenario: Arc<str>,
    recent: VecDeque<Record>,
    failures: VecDeque<Record>,
    replicas: Replicas,
}

/// The replica names a pair's records refer to by index ([`Record::replica`]); index 0 is
/// "none" (a target without `replicas:`).
///
/// Bounded by the records: once it holds [`REPLICAS_SLACK`] more names than there are
/// records, the names no record refers to any more are dropped and the records renumbered,
/// so a pool whose replicas come and go (or a discovery that names new ones at every
/// refresh) does not grow it for ever.
#[derive(Debug, Default)]
struct Replicas {
    names: Vec<Arc<str>>,
    /// Each name's index in `names`: a new probe finds its replica without a scan.
    index: std::collections::HashMap<Arc<str>, usize>,
}

/// How many more replica names than records a pair keeps before it drops the unused ones.
const REPLICAS_SLACK: usize = 16;

impl Replicas {
    /// The name at `index`; empty for 0 or an index it does not have (one shared empty
    /// name: reading a pair's records allocates none).
    fn name(&self, index: u16) -> Arc<str> {
        static NONE: std::sync::LazyLock<Arc<str>> = std::sync::LazyLock::new(|| Arc::from(""));
        (usize::from(index).checked_sub(1))
            .and_then(|i| self.names.get(i).cloned())
            .unwrap_or_else(|| NONE.clone())
    }

    /// The index of `name`, added if new; 0 for the empty name, or when the table is full
    /// (65,535 names in use at once: a pool that probed that many different replicas within the
    /// state window, which a discovery naming new replicas many times a second could do; such a
    /// probe is then kept without its replica, and the status pages leave it out of the
    /// replicas' table).
    fn index(&mut self, name: &Arc<str>) -> u16 {
        if name.is_empty() {
            return 0;
        }
        let i = match self.index.get(name) {
            Some(i) => *i,
            None => {
                self.names.push(name.clone());
                self.index.insert(name.clone(), self.names.len() - 1);
                self.names.len() - 1
            }
        };
        u16::try_from(i + 1).unwrap_or(0)
    }
}

impl Rings {
    /// The index of `name` in the replica table, dropping names no record refers to first
    /// when the table has outgrown the records.
    fn replica_index(&mut self, name: &Arc<str>) -> u16 {
        if name.is_empty() {
            return 0;
        }
        let records = self.recent.len() + self.failures.len();
        let known = self.replicas.index.contains_key(name);
        if !known && self.replicas.names.len() >= records + REPLICAS_SLACK {
            self.compact_replicas();
        }
        self.replicas.index(name)
    }

    /// Keeps only the replica names some record refers to, renumbering the records.
    fn compact_replicas(&mut self) {
        let old = std::mem::take(&mut self.replicas);
        let mut new = Replicas::default();
        for r in self.recent.iter_mut().chain(self.failures.iter_mut()) {
            r.replica = new.index(&old.name(r.replica));
        }
        self.replicas = new;
    }

    fn probes<'a>(&'a self, ring: &'a VecDeque<Record>, oldest: u64) -> Vec<RecentProbe> {
        ring.iter()
            .filter(|r| r.started_ns >= oldest)
            .map(|r| r.probe(self))
            .collect()
    }
}

#[derive(Debug, Default)]
struct Store {
    pairs: BTreeMap<(String, String), Rings>,
    reloads: VecDeque<SystemTime>,
}

/// Bounded rings of recent probes and recent failures per (target, scenario), and the recent
/// configuration reloads.
#[derive(Debug)]
pub struct History {
    limits: HistoryLimits,
    store: Mutex<Store>,
}

/// Drops the front of `ring` beyond `count` entries (unless it started within `keep`: the state
/// window, from its start to now) or older than `oldest`. A record stamped after now (the wall
/// clock stepped back since) is not kept for the window, so it cannot hold the ring open.
fn prune(
    ring: &mut VecDeque<Record>,
    count: usize,
    oldest: Option<SystemTime>,
    keep: Option<(SystemTime, SystemTime)>,
) {
    let oldest = oldest.map(epoch_ns);
    let keep = keep.map(|(from, to)| epoch_ns(from)..=epoch_ns(to));
    while let Some(p) = ring.front() {
        let old = oldest.is_some_and(|t| p.started_ns < t);
        let kept = keep.as_ref().is_some_and(|w| w.contains(&p.started_ns));
        if old || (ring.len() > count && !kept) {
            ring.pop_front();
        } else {
            break;
        }
    }
}

/// The state window ending at `now`, as [`prune`] keeps it: none for a clock before 1970
/// (every start is then stored as the epoch, and a window of the epoch alone would keep them
/// all).
fn state_window(now: SystemTime) -> Option<(SystemTime, SystemTime)> {
    let from = now.checked_sub(STATE_WINDOW)?;
    (from >= SystemTime::UNIX_EPOCH).then_some((from, now))
}

/// Appends `record` to `ring`, growing a full ring by doubling but never past `limit` records
/// (a plain `VecDeque` would hold 128 records for the 120 kept). Past `limit` (probes kept for
/// the state window) it grows by an eighth at a time, so such a ring takes at most an eighth
/// more than the most it has held (rings do not shrink): at a 1 s interval, room for 607
/// records for the window's 601 (39 KiB), where `VecDeque`'s own doubling took room for 1,024
/// (66 KiB).
///
/// (Taking the whole limit at the first probe instead was measured and not kept: the same RSS
/// once the rings are full, 8 MiB more until then at 1,000 pairs; BENCHMARKS.md §16.)
fn push_bounded(ring: &mut VecDeque<Record>, record: Record, limit: usize) {
    let len = ring.len();
    if len == ring.capacity() {
        let capacity = if len < limit {
            len.saturating_mul(2).max(4).min(limit)
        } else {
            len.saturating_add((len / 8).max(4))
        };
        ring.reserve_exact(capacity - len);
    }
    ring.push_back(record);
}

impl History {
    /// An empty history keeping `limits` per pair.
    pub fn new(limits: HistoryLimits) -> Self {
        History {
            limits: HistoryLimits {
                max_probes: limits.max_probes.max(1),
                ..limits
            },
            store: Mutex::new(Store::default()),
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> HistoryLimits {
        self.limits
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a probe, dropping the pair's oldest beyond the limits.
    pub fn push(&self, outcome: &ProbeOutcome) {
        self.push_probe(RecentProbe::from(outcome));
    }

    /// Adds a summarised probe (as [`History::push`]).
    pub fn push_probe(&self, p: RecentProbe) {
        let now = SystemTime::now();
        let age = |a: Duration| now.checked_sub(a);
        let (count, max_age) = (self.limits.max_probes, self.limits.max_age);
        let mut store = self.lock();
        let rings = store
            .pairs
            .entry((p.target.to_string(), p.scenario.to_string()))
            .or_insert_with(|| Rings {
                target: p.target.clone(),
                scenario: p.scenario.clone(),
                recent: VecDeque::new(),
                failures: VecDeque::new(),
                replicas: Replicas::default(),
            });
        let replica = rings.replica_index(&p.replica);
        // One allocation per distinct text, not per probe: shared with earlier probes.
        let record = Record::new(p, rings, replica);
        let failures = count.saturating_mul(FAILURE_RETENTION as usize);
        let (oldest, keep) = (age(max_age), state_window(now));
        let oldest_failure = age(max_age.saturating_mul(FAILURE_RETENTION));
        // Room is made before the push (so a full ring does not grow), and the limits are
        // applied again after it (so the new record obeys them too).
        if record.failure > 0 {
            prune(&mut rings.failures, failures - 1, oldest_failure, None);
            push_bounded(&mut rings.failures, record.clone(), failures);
        }
        prune(&mut rings.recent, count - 1, oldest, keep);
        push_bounded(&mut rings.recent, record, count);
        prune(&mut rings.recent, count, oldest, keep);
        prune(&mut rings.failures, failures, oldest_failure, None);
    }

    /// Forgets every pair for which `keep(target, scenario)` is false: a reload calls it with
    /// the new configuration's pairs, so that removed or renamed pairs free their rings and are
    /// no longer served.
    pub fn retain_pairs(&self, keep: impl Fn(&str, &str) -> bool) {
        self.lock().pairs.retain(|(t, s), _| keep(t, s));
    }

    /// Records a configuration reload at `at`.
    pub fn note_reload(&self, at: SystemTime) {
        let mut store = self.lock();
        if store.reloads.len() == RELOADS_KEPT {
            store.reloads.pop_front();
        }
        store.reloads.push_back(at);
    }

    /// The recent configuration reloads, oldest first.
    pub fn reloads(&self) -> Vec<SystemTime> {
        self.lock().reloads.iter().copied().collect()
    }

    /// The pairs with any history, sorted.
    pub fn pairs(&self) -> Vec<(String, String)> {
        self.lock().pairs.keys().cloned().collect()
    }

    /// One pair's recent probes within the limits, oldest first.
    pub fn probes(&self, target: &str, scenario: &str) -> Vec<RecentProbe> {
        self.kept(target, scenario).0
    }

    /// One pair's recent failures (kept longer than its probes), oldest first.
    pub fn pair_failures(&self, target: &str, scenario: &str) -> Vec<RecentProbe> {
        self.kept(target, scenario).1
    }

    /// Calls `f` with one pair's kept probes and kept failures (oldest first, within the
    /// limits).
    pub fn with_pair<R>(
        &self,
        target: &str,
        scenario: &str,
        f: impl FnOnce(&[&RecentProbe], &[&RecentProbe]) -> R,
    ) -> R {
        let (probes, failures) = self.kept(target, scenario);
        let probes: Vec<&RecentProbe> = probes.iter().collect();
        let failures: Vec<&RecentProbe> = failures.iter().collect();
        f(&probes, &failures)
    }

    /// One pair's kept probes and kept failures, oldest first, within the limits.
    fn kept(&self, target: &str, scenario: &str) -> (Vec<RecentProbe>, Vec<RecentProbe>) {
        let now = SystemTime::now();
        let oldest = |retention: u32| {
            now.checked_sub(self.limits.max_age.saturating_mul(retention))
                .map_or(0, epoch_ns)
        };
        let store = self.lock();
        let key = (target.to_string(), scenario.to_string());
        match store.pairs.get(&key) {
            None => (Vec::new(), Vec::new()),
            Some(r) => (
                r.probes(&r.recent, oldest(1)),
                r.probes(&r.failures, oldest(FAILURE_RETENTION)),
            ),
        }
    }

    /// The kept probe whose trace id is `id` (in the recent probes or the failures kept
    /// longer), if it has not rolled out of the history: what `/probes/{trace_id}` serves. A
    /// scan of every kept record (16-byte compares; 3.3 ms over 120,000 records, 1,000 pairs × 120, in a
    /// debug build).
    pub fn find(&self, id: TraceId) -> Option<RecentProbe> {
        let bytes = id.to_bytes();
        let now = SystemTime::now();
        let oldest = |retention: u32| {
            now.checked_sub(self.limits.max_age.saturating_mul(retention))
                .map_or(0, epoch_ns)
        };
        let store = self.lock();
        store.pairs.values().find_map(|r| {
            let hit = |ring: &VecDeque<Record>, oldest: u64| {
                ring.iter()
                    .rev()
                    .find(|p| p.trace_id == bytes && p.started_ns >= oldest)
                    .map(|p| p.probe(r))
            };
            hit(&r.recent, oldest(1)).or_else(|| hit(&r.failures, oldest(FAILURE_RETENTION)))
        })
    }

    /// Every pair's recent probes, oldest first.
    pub fn snapshot(&self) -> Vec<RecentProbe> {
        self.merged(|r| &r.recent)
    }

    /// Every pair's recent failures, oldest first (kept apart, so they outlive the recent
    /// probes).
    pub fn failures(&self) -> Vec<RecentProbe> {
        self.merged(|r| &r.failures)
    }

    fn merged(&self, pick: fn(&Rings) -> &VecDeque<Record>) -> Vec<RecentProbe> {
        let store = self.lock();
        let mut all: Vec<RecentProbe> = store
            .pairs
            .values()
            .flat_map(|r| pick(r).iter().map(|p| p.probe(r)))
            .collect();
        all.sort_by_key(|p| p.started_at);
        all
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::measure::{Failure, Observations, TokenKind};

    fn outcome(ok: bool) -> ProbeOutcome {
        let t0 = Instant::now();
        let mut obs = Observations::new(t0);
        obs.token(t0, TokenKind::Output);
        obs.timeline.ended = Some(t0);
        let failure = (!ok).then(|| Failure::new(FailureReason::Timeout, "slow"));
        ProbeOutcome::conclude(
            "t".into(),
            "s".into(),
            "m".into(),
            SystemTime::now(),
            obs,
            failure,
        )
    }

    fn limits(max_probes: usize, max_age: Duration) -> HistoryLimits {
        HistoryLimits {
            max_probes,
            max_age,
        }
    }

    /// `outcome(ok)` started `ago`.
    fn aged(ok: bool, ago: Duration) -> RecentProbe {
        let mut p = RecentProbe::from(&outcome(ok));
        p.started_at = SystemTime::now() - ago;
        p
    }

    #[test]
    fn bounded_and_failures_outlive_successes() {
        let h = History::new(limits(3, Duration::from_secs(3600)));
        let old = |k: u64| STATE_WINDOW + Duration::from_secs(60 - k);
        h.push_probe(aged(false, old(0)));
        for k in 1..=10 {
            h.push_probe(aged(true, old(k)));
        }
        assert_eq!(h.snapshot().len(), 3);
        assert!(h.snapshot().iter().all(|p| p.failure.is_none()));
        assert_eq!(
            h.failures().len(),
            1,
            "the failure is still there after 10 successes"
        );
        for k in 11..31 {
            h.push_probe(aged(false, old(k)));
        }
        assert_eq!(
            h.pair_failures("t", "s").len(),
            3 * FAILURE_RETENTION as usize
        );
        assert_eq!(h.probes("t", "s").len(), 3);
        assert!(h.probes("t", "other").is_empty());
    }

    /// Break-it pass: at a 1 s interval the default 120 probes held the last 2 minutes, and
    /// the status pages judged "the last 10 minutes" over those (a pair failing for 8 minutes
    /// and fine for 2 showed ok while its alert fired). Probes within the state window stay;
    /// older ones obey the count.
    #[test]
    fn the_state_window_is_kept_whole_beyond_the_count() {
        let h = History::new(limits(120, Duration::from_secs(3600)));
        for k in (0..900u64).rev() {
            h.push_probe(aged(k >= 120, Duration::from_secs(k)));
        }
        let kept = h.probes("t", "s");
        assert_eq!(kept.len(), 600, "every probe of the last 10 minutes");
        assert_eq!(kept.iter().filter(|p| p.failure.is_none()).count(), 480);
        // Once they age out of the window, the count bounds them again.
        let later = History::new(limits(120, Duration::from_secs(3600)));
        for k in (0..900u64).rev() {
            later.push_probe(aged(true, STATE_WINDOW + Duration::from_secs(k + 1)));
        }
        assert_eq!(later.probes("t", "s").len(), 120);
    }

    #[test]
    fn bounded_by_age_per_pair_and_failures_kept_longer() {
        let h = History::new(limits(100, Duration::from_secs(60)));
        let mut old = RecentProbe::from(&outcome(false));
        old.started_at = SystemTime::now() - Duration::from_secs(120);
        h.push_probe(old.clone());
        let mut other = RecentProbe::from(&outcome(true));
        other.target = "u".into();
        h.push_probe(other);
        h.push(&outcome(true));
        assert_eq!(
            h.probes("t", "s").len(),
            1,
            "the 2-minute-old probe is past max_age"
        );
        assert_eq!(
            h.pair_failures("t", "s"),
            vec![old],
            "failures are kept 4× as long"
        );
        assert_eq!(h.probes("u", "s").len(), 1, "pairs are bounded apart");
        assert_eq!(h.pairs().len(), 2);
    }

    /// Each probe of a pool keeps its replica; a pool whose every probe meets a new replica
    /// (a churning discovery) keeps its table of names bounded by its records, and the
    /// records renumbered by a compaction still name their own replica.
    #[test]
    fn probes_keep_their_replica_and_the_names_stay_bounded_over_churn() {
        const KEPT: usize = 8;
        let h = History::new(limits(KEPT, Duration::from_secs(3600)));
        // Older than the state window, so the count limit applies.
        let at = SystemTime::now() - STATE_WINDOW - Duration::from_secs(60);
        let probe = |replica: &str, ok: bool| {
            let mut p = RecentProbe::from(&outcome(ok));
            p.replica = replica.into();
            p.started_at = at;
            p
        };
        h.push_probe(probe("", true));
        assert_eq!(&*h.probes("t", "s")[0].replica, "");
        for i in 0..1_000 {
            // Every tenth fails: kept in the failures ring too, far longer.
            h.push_probe(probe(
                &format!("10.0.{}.{}:8000", i / 250, i % 250),
                i % 10 != 0,
            ));
        }
        let names: Vec<String> = h
            .probes("t", "s")
            .iter()
            .map(|p| p.replica.to_string())
            .collect();
        let want: Vec<String> = (1_000 - KEPT..1_000)
            .map(|i| format!("10.0.{}.{}:8000", i / 250, i % 250))
            .collect();
        assert_eq!(names, want);
        let failed: Vec<String> = h
            .pair_failures("t", "s")
            .iter()
            .map(|p| p.replica.to_string())
            .collect();
        assert_eq!(failed.len(), KEPT * FAILURE_RETENTION as usize);
        assert_eq!(failed.last().unwrap(), "10.0.3.240:8000");
        let store = h.lock();
        let rings = store.pairs.values().next().unwrap();
        let records = rings.recent.len() + rings.failures.len();
        assert!(
            rings.replicas.names.len() <= records + REPLICAS_SLACK,
            "{} names for {records} records",
            rings.replicas.names.len()
        );
    }

    /// A probe is stored in a fixed-size record and read back unchanged; repeated
    /// failure details and identities are stored once per pair, not once per probe.
    #[test]
    fn compact_records_round_trip_and_share_repeated_texts() {
        const { assert!(RECORD_BYTES <= 64, "a record grew") };
        let h = History::new(limits(10, Duration::from_secs(3600)));
        let mut ok = RecentProbe::from(&outcome(true));
        ok.ttft = Some(Duration::new(1, 234_567_000));
        ok.tpot = None;
        ok.output_tokens_per_second = Some(f64::NAN);
        ok.itl = Some(ItlSummary {
            p50: Duration::from_micros(7),
            p95: Duration::from_millis(21),
        });
        ok.identity = Some("model=m server=s".into());
        let mut failed = RecentProbe::from(&outcome(false));
        failed.identity = Some("model=m server=s".into());
        h.push_probe(ok.clone());
        h.push_probe(failed.clone());
        h.push_probe(failed.clone());
        let mut again = ok.clone();
        again.identity = Some("model=m server=s".into());
        h.push_probe(again);
        let kept = h.probes("t", "s");
        assert_eq!(kept.len(), 4);
        assert!(kept[0].output_tokens_per_second.unwrap().is_nan());
        let mut expect_ok = ok.clone();
        expect_ok.output_tokens_per_second = kept[0].output_tokens_per_second;
        let mut got_ok = kept[0].clone();
        got_ok.output_tokens_per_second = expect_ok.output_tokens_per_second;
        assert_eq!(format!("{got_ok:?}"), format!("{expect_ok:?}"));
        assert_eq!(kept[1], failed);
        assert_eq!(kept[2], failed);
        let store = h.lock();
        let rings = store.pairs.values().next().unwrap();
        let texts = |r: &Record| r.texts.clone().unwrap();
        // The two failures: one detail and identity, in both rings.
        assert!(Arc::ptr_eq(
            &texts(&rings.failures[0]),
            &texts(&rings.failures[1])
        ));
        assert!(Arc::ptr_eq(
            &texts(&rings.recent[1]),
            &texts(&rings.recent[2])
        ));
        // The two successes: one identity (read from separate allocations).
        assert!(Arc::ptr_eq(
            &texts(&rings.recent[0]),
            &texts(&rings.recent[3])
        ));
        // A success and a failure: their own texts, one identity.
        assert!(!Arc::ptr_eq(
            &texts(&rings.recent[0]),
            &texts(&rings.recent[1])
        ));
        assert!(Arc::ptr_eq(
            texts(&rings.recent[0]).identity.as_ref().unwrap(),
            texts(&rings.recent[1]).identity.as_ref().unwrap()
        ));
    }

    /// Durations are kept to the nearest microsecond; a probe with a duration beyond the 71
    /// minutes that fit in microseconds keeps all five to the nearest millisecond (up to the
    /// configuration's longest timeout of a day and far beyond), and one beyond 49 days is kept
    /// as the longest, never as absent or wrapped around.
    #[test]
    fn durations_are_kept_to_the_microsecond_or_past_71_minutes_to_the_millisecond() {
        let us = |d: Duration| from_units(to_units(Some(d), US), US);
        assert_eq!(
            us(Duration::from_nanos(1_499)),
            Some(Duration::from_micros(1))
        );
        assert_eq!(
            us(Duration::from_nanos(1_500)),
            Some(Duration::from_micros(2))
        );
        assert_eq!(us(Duration::ZERO), Some(Duration::ZERO));
        assert_eq!(from_units(to_units(None, US), US), None);
        let longest_ms = Duration::from_millis(u64::from(ABSENT - 1));
        assert!(longest_ms > Duration::from_secs(49 * 24 * 3600));
        for long in [
            longest_ms,
            Duration::from_secs(50 * 24 * 3600),
            Duration::MAX,
        ] {
            let kept = from_units(to_units(Some(long), MS), MS);
            assert_eq!(kept, Some(longest_ms), "{long:?}");
        }

        let h = History::new(limits(10, Duration::from_secs(3600)));
        let mut short = RecentProbe::from(&outcome(true));
        short.ttft = Some(Duration::new(0, 200_123_456));
        short.e2e = Some(Duration::from_secs(71 * 60));
        h.push_probe(short);
        // TTFT 80 minutes, E2E the configuration's longest timeout (a day), TPOT 1.2345 ms.
        let mut long = RecentProbe::from(&outcome(true));
        long.ttft = Some(Duration::from_secs(80 * 60) + Duration::from_micros(400));
        long.e2e = Some(Duration::from_secs(24 * 3600));
        long.tpot = Some(Duration::from_micros(1_234_500));
        long.itl = None;
        h.push_probe(long);
        let kept = h.probes("t", "s");
        assert_eq!(kept[0].ttft, Some(Duration::from_micros(200_123)));
        assert_eq!(kept[0].e2e, Some(Duration::from_secs(71 * 60)));
        assert_eq!(kept[1].ttft, Some(Duration::from_secs(80 * 60)));
        assert_eq!(kept[1].e2e, Some(Duration::from_secs(24 * 3600)));
        assert_eq!(kept[1].tpot, Some(Duration::from_millis(1_235)));
        assert_eq!(kept[1].itl, None, "absent stays absent in milliseconds too");
    }

    /// Output tokens per second are stored as `f32` and read back to 7 significant digits: a
    /// rate of 7 digits or fewer (an SLO floor, say) comes back exactly, so it compares equal
    /// to the floor again; others come back within 5e-7 of themselves, relatively.
    #[test]
    fn tokens_per_second_come_back_to_seven_significant_digits() {
        let h = History::new(limits(100, Duration::from_secs(3600)));
        let values = [
            0.7,
            30.0,
            12.5,
            84.46509,
            0.001_234_567,
            9_999_999.0,
            1_234_567.0,
            123_456_789.0,
            48.123_456_789,
            8_765.432_1,
        ];
        for v in values {
            let mut p = RecentProbe::from(&outcome(true));
            p.output_tokens_per_second = Some(v);
            h.push_probe(p);
        }
        let kept: Vec<f64> = (h.probes("t", "s").iter())
            .map(|p| p.output_tokens_per_second.unwrap())
            .collect();
        // Exactly the decimals of 7 digits or fewer.
        assert_eq!(&kept[..7], &values[..7]);
        // From 10^7 up, the f32 itself (a whole number).
        assert_eq!(kept[7], f64::from(123_456_789.0_f32));
        // More digits: the nearest 7-digit decimal.
        assert_eq!(kept[8], 48.123_46);
        assert_eq!(kept[9], 8_765.432);
        for (k, v) in kept.iter().zip(values) {
            assert!(((k - v) / v).abs() <= 5e-7, "{k} against {v}");
        }
        assert_eq!(seven_digits(0.0), 0.0);
        assert!(seven_digits(f32::NAN).is_nan());
        assert_eq!(seven_digits(f32::INFINITY), f64::INFINITY);
        assert_eq!(seven_digits(-2.5), -2.5);
    }

    /// With the wall clock before 1970 (every start stored as the epoch), the count limit still
    /// bounds a pair.
    #[test]
    fn a_clock_before_1970_does_not_stop_the_pruning() {
        let mut ring = VecDeque::new();
        let before_1970 = SystemTime::UNIX_EPOCH - Duration::from_secs(24 * 3600);
        let rings = Rings {
            target: "t".into(),
            scenario: "s".into(),
            recent: VecDeque::new(),
            failures: VecDeque::new(),
            replicas: Replicas::default(),
        };
        let mut p = RecentProbe::from(&outcome(true));
        p.started_at = before_1970 - Duration::from_secs(3 * 3600);
        let window = state_window(before_1970);
        assert_eq!(window, None);
        let now = SystemTime::now();
        assert_eq!(state_window(now), Some((now - STATE_WINDOW, now)));
        for _ in 0..100 {
            push_bounded(&mut ring, Record::new(p.clone(), &rings, 0), 1);
            prune(
                &mut ring,
                1,
                before_1970.checked_sub(Duration::from_secs(3600)),
                window,
            );
        }
        assert_eq!(ring.len(), 1);
    }

    /// A ring kept past its limit for the state window (121 probes in 10 minutes at a 5 s
    /// interval, against the default 120) takes at most an eighth more room than it holds, not
    /// twice as much.
    #[test]
    fn a_ring_past_its_limit_grows_by_an_eighth() {
        let h = History::new(limits(120, Duration::from_secs(3600)));
        for n in 0..121 {
            h.push_probe(aged(true, Duration::from_secs(590 - 4 * n)));
        }
        let store = h.lock();
        let rings = store.pairs.values().next().unwrap();
        assert_eq!(rings.recent.len(), 121, "all within the state window");
        assert!(
            rings.recent.capacity() <= 121 + 121 / 8,
            "{}",
            rings.recent.capacity()
        );
    }

    /// A probe stamped in the future (the wall clock stepped back since it ran) does not hold
    /// the ring open: it is not kept for the state window, so the count limit still applies.
    #[test]
    fn a_probe_stamped_in_the_future_does_not_stop_the_pruning() {
        let h = History::new(limits(3, Duration::from_secs(3600)));
        let mut ahead = RecentProbe::from(&outcome(true));
        ahead.started_at = SystemTime::now() + Duration::from_secs(24 * 3600);
        h.push_probe(ahead);
        for n in 0..50 {
            h.push_probe(aged(true, STATE_WINDOW + Duration::from_secs(100 - n)));
        }
        assert_eq!(h.probes("t", "s").len(), 3);
        // Probes within the window are still all kept.
        for _ in 0..10 {
            h.push_probe(aged(true, Duration::from_secs(1)));
        }
        assert_eq!(h.probes("t", "s").len(), 10);
    }

    /// A pair's ring holds the 120 probes of the default limit in room for 120, not
    /// the 128 a doubling `VecDeque` would take.
    #[test]
    fn a_full_ring_takes_no_more_room_than_its_limit() {
        let h = History::new(limits(120, Duration::from_secs(3600)));
        // Older than the state window, which would keep them all.
        for n in 0..300 {
            h.push_probe(aged(true, STATE_WINDOW + Duration::from_secs(1000 - n)));
        }
        let store = h.lock();
        let rings = store.pairs.values().next().unwrap();
        assert_eq!(rings.recent.len(), 120);
        assert_eq!(rings.recent.capacity(), 120);
        assert_eq!(rings.failures.capacity(), 0, "no failure, no failures ring");
    }

    /// A kept probe is found by its trace id (in the recent ring or, once it left
    /// that, in the failures ring), and not once it rolled out of both.
    #[test]
    fn a_probe_is_found_by_its_trace_id_while_it_is_kept() {
        let h = History::new(limits(2, Duration::from_secs(3600)));
        let id = |n: u8| TraceId::from_bytes([n; 16]).unwrap();
        let old = STATE_WINDOW + Duration::from_secs(100);
        let mut failed = aged(false, old);
        failed.trace_id = Some(id(1));
        h.push_probe(failed.clone());
        for n in 2..=4 {
            let mut p = aged(true, old - Duration::from_secs(u64::from(n)));
            p.trace_id = Some(id(n));
            h.push_probe(p);
        }
        assert_eq!(h.find(id(4)).unwrap().trace_id, Some(id(4)));
        assert_eq!(h.find(id(2)), None, "rolled out of the 2-probe ring");
        assert_eq!(
            h.find(id(1)),
            Some(failed),
            "the failures ring keeps it longer"
        );
        assert_eq!(h.find(id(9)), None);
        let from_outcome = RecentProbe::from(&outcome(true));
        assert_eq!(from_outcome.trace_id, None, "no traceparent was sent");
    }

    #[test]
    fn reloads_are_recorded() {
        let h = History::new(HistoryLimits::default());
        let at = SystemTime::now();
        h.note_reload(at);
        assert_eq!(h.reloads(), vec![at]);
    }
}
