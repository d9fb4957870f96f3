// Generates the Prometheus rule files dashboards/prometheus/llm-probe-{recording,alerts}.rules.yml
// (run by build.mjs). The windows, guards and interval classes are computed here, so that every
// interval class gets the same shape of rule; the rules that need no generation live as YAML
// fragments in dashboards/rules/ and are copied in. Every alert gets `runbook_url` (an anchor of
// docs/alerting.md, one `### AlertName` heading per alert) and `dashboard_url` annotations, from
// the bases given to `rulesFiles` (build.mjs: --runbook-base, --dashboard-base).
//
// Design (docs/alerting.md, "How the alerts are built"):
//  - One notification per incident: the SLO alerts keep firing for a while after their condition
//    last held (keep_firing_for), so a breach hovering at a threshold, or a guard that misses a
//    probe, does not resolve and page again.
//  - No SLO value appears in a rule: the SLO alerts compare quantiles with the target's own
//    objective (llm_probe_slo_* gauges). That is exact: the exporter adds every configured SLO
//    value as a bucket boundary, so "quantile q > SLO" <=> "share of probes within the SLO < q".
//  - Failed probes are bad events: the TTFT SLI histogram takes the successful probes' buckets and
//    puts every probe (llm_probe_probes_total) in +Inf, so a failure counts as infinitely slow;
//    a pair without any bucket series (never succeeded since the exporter started) is judged by
//    its failure ratio alone. "Bad share > b" <=> "quantile (1 - b) of that histogram > SLO".
//  - Windows adapt to the configured interval (llm_probe_probe_interval_seconds): each interval
//    class has its own windows, and the probe-count guard asks for 75 % of the probes the
//    interval promises in the long window, so nothing fires on a cold start.
// Plain Node, no dependencies.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const L = 'target, model, scenario, location';
const INTERVAL = 'target_model_scenario:llm_probe_probe_interval_seconds:max';
const SLO_TTFT = 'max by (target, model) (llm_probe_slo_time_to_first_token_seconds)';
const SLO_TPS = 'max by (target, model) (llm_probe_slo_output_tokens_per_second)';

/** Seconds of a Prometheus duration (`45s`, `10m`, `6h`, `1d`). */
export function seconds(d) {
  const m = /^(\d+)(s|m|h|d)$/.exec(d);
  if (!m) throw new Error(`duration ${d}`);
  return Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400 }[m[2]];
}

/**
 * Interval classes of the SLO alerts: pairs probed every `(min, max]` seconds use these
 * windows. `page` = [long, short] of the fast burn (critical), `ticket` = [long, short] of the
 * slow burn (warning); the long page window is also the tokens/s and failure-ratio window.
 * The long page window holds at least 12 probes at the class's longest interval.
 */
export const SLO_CLASSES = [
  { min: 0, max: 20, page: ['10m', '2m'], ticket: ['1h', '10m'] },
  { min: 20, max: 120, page: ['30m', '5m'], ticket: ['3h', '30m'] },
  { min: 120, max: 300, page: ['1h', '10m'], ticket: ['6h', '1h'] },
  { min: 300, max: 1800, page: ['6h', '1h'], ticket: ['1d', '6h'] },
];

/**
 * Interval classes of LlmProbeEndpointDown: [max interval (s), window]. The window is at least
 * two intervals (three at 15 s and below), so that every probe in it failing means at least
 * three failed probes in a row; detection is at most one interval (until the first failed probe
 * ends) plus the window. The window must also see two different probes (the finish timestamp
 * changes within it): a scrape interval as long as the probe interval holds about two samples
 * of the window, and one failed probe whose successor ends a little later than it would have
 * (a slow success after a fast failure) is scraped twice, which alone is not "down".
 */
export const DOWN_CLASSES = [
  [15, '30s'], [25, '50s'], [60, '2m'], [150, '5m'], [300, '10m'], [900, '30m'], [1800, '1h'], [3600, '2h'],
];

/** LlmProbeNoRecentProbe: [max interval (s), window with no finished probe]. */
export const STUCK_CLASSES = [[150, '10m'], [900, '1h'], [3600, '4h']];

/** Fast burn: more than 30 % bad (burn rate 6 of the 5 % budget) = quantile 0.7 above the SLO. */
export const PAGE_Q = 0.7;
/** Slow burn: more than 5 % bad (burn rate 1: the SLO itself) = quantile 0.95 above the SLO. */
export const TICKET_Q = 0.95;
/** The guard: this share of the probes the interval promises must be in the long window. */
const GUARD = 0.75;

const uniq = (xs) => [...new Set(xs)];
const pageWindows = uniq(SLO_CLASSES.flatMap((c) => c.page));
const ticketWindows = uniq(SLO_CLASSES.flatMap((c) => c.ticket));
const longWindows = uniq(SLO_CLASSES.flatMap((c) => [c.page[0], c.ticket[0]]));
const pct = (q) => String(Math.round(q * 100)).padStart(2, '0');
const sli = (q, w) => `target_model_scenario:llm_probe_ttft_slo_sli:p${pct(q)}_${w}`;
const probes = (w) => `target_model_scenario:llm_probe_probes:increase${w}`;
const tpsP05 = (w) => `target_model_scenario:llm_probe_output_tokens_per_second:p05_${w}`;
const tpsCount = (w) => `target_model_scenario:llm_probe_output_tokens_per_second_count:increase${w}`;
const failRatio = (w) => `target_model_scenario:llm_probe_probe_failures:ratio${w}`;
const inClass = (c) => `(${INTERVAL} > ${c.min} <= ${c.max})`;
/** At least 75 % of the probes the interval promises over `w`. */
const guard = (count, w) => `(${count} >= on (${L}) (${GUARD * seconds(w)} / ${INTERVAL}))`;
const indent = (text, n) => text.split('\n').map((l) => (l ? ' '.repeat(n) + l : l)).join('\n');

function record(name, expr, comment) {
  const c = comment ? comment.split('\n').map((l) => `      # ${l}\n`).join('') : '';
  return `${c}      - record: ${name}\n        expr: |\n${indent(expr.trim(), 10)}\n`;
}

/** The TTFT SLI quantile `q` over `w`: failures count as infinitely slow. */
function sliExpr(q, w) {
  const fr = `sum by (${L}) (rate(llm_probe_probe_failures_total[${w}])) / sum by (${L}) (rate(llm_probe_probes_total[${w}]))`;
  return `(
  histogram_quantile(${q},
    sum by (${L}, le) (rate(llm_probe_time_to_first_token_seconds_bucket{le!="+Inf"}[${w}]))
    or
    label_replace(sum by (${L}) (rate(llm_probe_probes_total[${w}])), "le", "+Inf", "", "")
  ) >= 0
  unless on (${L})
  (${fr} > (1 - ${q}))
)
or on (${L})
(${fr} > (1 - ${q})) * 0 + Inf`;
}

// ---- TTFT split: which component of the TTFT grew ----------------------------------
const LC = `${L}, component`;
/** A component's P95 over `w` (seconds), per pair and component. */
export const compP95 = (w) => `target_model_scenario_component:llm_probe_ttft_component_seconds:p95_${w}`;
/** A component's share of the mean TTFT over `w` (0..1), per pair and component. */
export const compShare = (w) => `target_model_scenario_component:llm_probe_ttft_component_seconds:ttft_share_${w}`;
/** The same two, over the long page window of the pair's interval class (the TTFT page's window). */
export const COMP_P95 = compP95('page_window');
export const COMP_SHARE = compShare('page_window');

/**
 * The component recording rules: P95 and share of the mean TTFT over every long page window,
 * then the pair's own class window picked out (what the TTFT alerts' `cause` annotation reads).
 */
function componentRecords(put, short) {
  const windows = uniq(SLO_CLASSES.map((c) => c.page[0]));
  for (const w of windows) {
    put(w, record(compP95(w), `histogram_quantile(0.95,
  sum by (${LC}, le) (rate(llm_probe_ttft_component_seconds_bucket[${w}]))) >= 0`,
    w === windows[0] ? 'TTFT split (docs/measurement.md "TTFT split"): each component\'s P95 and its share of the mean\nTTFT (mean component / mean TTFT), over each long page window. Pairs whose server reveals\nno split have no series.' : ''));
    put(w, record(compShare(w), `(
  sum by (${LC}) (rate(llm_probe_ttft_component_seconds_sum[${w}]))
  /
  sum by (${LC}) (rate(llm_probe_ttft_component_seconds_count[${w}]))
)
/ on (${L}) group_left ()
(
  sum by (${L}) (rate(llm_probe_time_to_first_token_seconds_sum[${w}]))
  /
  sum by (${L}) (rate(llm_probe_time_to_first_token_seconds_count[${w}]))
) >= 0`));
  }
  const pick = (f) => anyClass(SLO_CLASSES.map((c) => `${f(c.page[0])}\nand on (${L})\n  ${inClass(c)}`));
  short.push(record(COMP_P95, pick(compP95),
    "Each component's P95 over the long page window of the pair's interval class: the window of\nthe TTFT page (LlmProbeTTFTP95AboveSLO), read by the TTFT alerts' cause annotation."));
  short.push(record(COMP_SHARE, pick(compShare)));
}

/**
 * The TTFT alerts' `cause` annotation (also the last paragraph of their description): the
 * component with the largest P95 over the page window, its P95 and its share of the mean TTFT;
 * or that the server reveals no split. One line; the component name is reduced to [a-z_] and
 * the label values are quoted with %q, so the text stays bounded and the queries well formed.
 */
export function causeTemplate(withLocation) {
  const sel = (extra) => `{target=%q,model=%q,scenario=%q${withLocation ? ',location=%q' : ''}${extra}}`;
  const args = `$labels.target $labels.model $labels.scenario${withLocation ? ' $labels.location' : ''}`;
  return `{{ with query (printf "topk(1, ${COMP_P95}${sel('')})" ${args}) }}`
    + '{{ with first . }}{{ $c := .Labels.component | reReplaceAll "[^a-z_]" "" }}'
    + 'TTFT split: the largest part is {{ $c }} (P95 {{ .Value | humanizeDuration }}'
    + `{{ with query (printf "${COMP_SHARE}${sel(',component=%q')}" ${args} $c) }}{{ with first . }}, {{ .Value | humanizePercentage }} of the mean TTFT{{ end }}{{ end }}`
    + ') over the page window.{{ end }}'
    + '{{ else }}TTFT split: the server reveals none (no llm_probe_ttft_component_seconds for this pair), so the probe cannot say which part grew.{{ end }}';
}

function sloRecordingGroups() {
  const short = [];
  const long = [];
  const put = (w, text) => (seconds(w) > 3600 ? long : short).push(text);
  short.push(record(INTERVAL, `max by (${L}) (llm_probe_probe_interval_seconds)`,
    'The configured probe interval (seconds): picks the windows and sizes the guards below.'));
  for (const w of longWindows) {
    if (w === '10m') continue; // in llm-probe.recording.10m
    put(w, record(probes(w), `sum by (${L}) (increase(llm_probe_probes_total[${w}]))`));
  }
  for (const w of uniq([...pageWindows].map((x) => x))) {
    put(w, record(sli(PAGE_Q, w), sliExpr(PAGE_Q, w),
      w === pageWindows[0] ? `TTFT SLI, failed probes counted as infinitely slow: its quantile ${PAGE_Q} is above the\nSLO exactly when more than ${Math.round((1 - PAGE_Q) * 100)} % of the probes were bad (slow or failed). +Inf when failures\nalone are that many (also for a pair that never succeeded: it has no bucket series).` : ''));
  }
  for (const w of ticketWindows) put(w, record(sli(TICKET_Q, w), sliExpr(TICKET_Q, w)));
  for (const c of SLO_CLASSES) {
    const w = c.page[0];
    // The 10m and 1h counts are in the static groups (recording.yml).
    if (!['10m', '1h'].includes(w)) {
      put(w, record(tpsCount(w), `sum by (${L}) (increase(llm_probe_output_tokens_per_second_count[${w}]))`));
    }
    if (w !== '10m') {
      put(w, record(tpsP05(w), `histogram_quantile(0.05,\n  sum by (${L}, le) (rate(llm_probe_output_tokens_per_second_bucket[${w}])))`));
    }
    put(w, record(failRatio(w), `sum by (${L}) (increase(llm_probe_probe_failures_total[${w}]))\n/\nsum by (${L}) (increase(llm_probe_probes_total[${w}]))`));
  }
  componentRecords(put, short);
  // ratio10m is already in the 10m group
  const dedup = (xs) => xs.filter((x) => !x.includes(`record: ${failRatio('10m')}\n`));
  return [
    '  # SLO inputs for the alerts, per interval class (dashboards/rules.mjs).',
    '  - name: llm-probe.recording.slo',
    '    rules:',
    ...dedup(short).map((s) => s.trimEnd()),
    // Windows over an hour feed the slow-burn tickets only (for: 15m): every 5 minutes is
    // enough, and a fifth of the cost.
    '  - name: llm-probe.recording.slo-long',
    '    interval: 5m',
    '    rules:',
    ...long.map((s) => s.trimEnd()),
  ].join('\n') + '\n';
}

// ---- replicas: one replica against its pool -------------------------------------------------
// A target with `replicas:` has one series per replica (the `replica` label); every rule above sums
// the replicas away, so it judges the pool as its users see it. The rules below judge each replica
// against the pool's median replica, over the long page window of the pair's interval class, so
// that the slow or failing replica is named. They read only series with a replica label: a target
// without `replicas:` costs them nothing.
const LR = `${L}, replica`;
const R = '{replica!=""}';
/** The factor and margin of "far from the pool's median" (docs/alerting.md, "Replicas"). */
// TTFT: the mean is exact (_sum / _count) and catches a replica slower on every request; the P95
// comes from buckets up to 1.5 × wide, so its factor must let a P95 that moves one bucket pass.
export const REPLICA_MEAN_FACTOR = 1.2;
export const REPLICA_MEAN_MARGIN_S = 0.01;
export const REPLICA_P95_FACTOR = 1.5;
export const REPLICA_P95_MARGIN_S = 0.025;
// Tokens/s alike: the mean is exact; buckets up to 2 × wide, so a P5 that moves one bucket passes.
export const REPLICA_TPS_MEAN_FACTOR = 0.8;
export const REPLICA_TPS_P05_FACTOR = 0.5;
export const REPLICA_FAILURE_MARGIN = 0.1;
/** Replicas judged (enough probes in the window) a pool needs before one is called an outlier. */
export const REPLICA_MIN_POOL = 3;
// Named as the pool's rules are (`increase10m`, `ratio10m`, `p95_10m`; `…_page_window` picked).
const rep = (m, w) => `target_model_scenario_replica:${m}${/(increase|ratio)$/.test(m) && /^\d/.test(w) ? '' : '_'}${w}`;
export const REP_PROBES = (w) => rep('llm_probe_probes:increase', w);
export const REP_FAIL = (w) => rep('llm_probe_probe_failures:ratio', w);
export const REP_TTFT_COUNT = (w) => rep('llm_probe_time_to_first_token_seconds_count:increase', w);
export const REP_TTFT_P95 = (w) => rep('llm_probe_time_to_first_token_seconds:p95', w);
export const REP_TTFT_MEAN = (w) => rep('llm_probe_time_to_first_token_seconds:mean', w);
export const REP_TPS_COUNT = (w) => rep('llm_probe_output_tokens_per_second_count:increase', w);
export const REP_TPS_P05 = (w) => rep('llm_probe_output_tokens_per_second:p05', w);
export const REP_TPS_MEAN = (w) => rep('llm_probe_output_tokens_per_second:mean', w);
const PW = 'page_window';
/** The pool's median over its judged replicas of a per-replica series (over the page window). */
export const poolMedian = (m) => `target_model_scenario:llm_probe_replica_${m}:median_${PW}`;
export const POOL_JUDGED = `target_model_scenario:llm_probe_replicas_judged:count_${PW}`;

/** A replica has at least 75 % of the probes its interval promises over the class's window. */
const repGuard = (count) => `(${count} >= on (${L}) group_left () (${GUARD} * ${PW_SECONDS} / ${INTERVAL}))`;
const PW_SECONDS = 'target_model_scenario:llm_probe_page_window_seconds:max';

function replicaRecordingGroups() {
  const short = [];
  const long = [];
  const windows = uniq(SLO_CLASSES.map((c) => c.page[0]));
  for (const w of windows) {
    const put = (text) => (seconds(w) > 3600 ? long : short).push(text);
    const first = w === windows[0];
    put(record(REP_PROBES(w), `sum by (${LR}) (increase(llm_probe_probes_total${R}[${w}]))`,
      first ? "Per replica (targets with `replicas:` only), over each long page window: the inputs of the\nreplica alerts, which compare each replica with its pool's median replica." : ''));
    put(record(REP_FAIL(w), `sum by (${LR}) (increase(llm_probe_probe_failures_total${R}[${w}]))\n/\nsum by (${LR}) (increase(llm_probe_probes_total${R}[${w}]))`));
    put(record(REP_TTFT_COUNT(w), `sum by (${LR}) (increase(llm_probe_time_to_first_token_seconds_count${R}[${w}]))`));
    put(record(REP_TTFT_P95(w), `histogram_quantile(0.95,\n  sum by (${LR}, le) (rate(llm_probe_time_to_first_token_seconds_bucket${R}[${w}])))`));
    put(record(REP_TTFT_MEAN(w), `sum by (${LR}) (rate(llm_probe_time_to_first_token_seconds_sum${R}[${w}]))\n/\nsum by (${LR}) (rate(llm_probe_time_to_first_token_seconds_count${R}[${w}]))`));
    put(record(REP_TPS_COUNT(w), `sum by (${LR}) (increase(llm_probe_output_tokens_per_second_count${R}[${w}]))`));
    put(record(REP_TPS_P05(w), `histogram_quantile(0.05,\n  sum by (${LR}, le) (rate(llm_probe_output_tokens_per_second_bucket${R}[${w}])))`));
    put(record(REP_TPS_MEAN(w), `sum by (${LR}) (rate(llm_probe_output_tokens_per_second_sum${R}[${w}]))\n/\nsum by (${LR}) (rate(llm_probe_output_tokens_per_second_count${R}[${w}]))`));
  }
  // The window of the pair's interval class, then each series picked from it.
  short.push(record(PW_SECONDS, anyClass(SLO_CLASSES.map((c) => `${INTERVAL} * 0 + ${seconds(c.page[0])}\nand on (${L})\n  ${inClass(c)}`)),
    "The long page window of the pair's interval class, in seconds (the replica alerts' window)."));
  for (const f of [REP_PROBES, REP_FAIL, REP_TTFT_COUNT, REP_TTFT_P95, REP_TTFT_MEAN, REP_TPS_COUNT, REP_TPS_P05, REP_TPS_MEAN]) {
    short.push(record(f(PW), anyClass(SLO_CLASSES.map((c) => `${f(c.page[0])}\nand on (${L})\n  ${inClass(c)}`))));
  }
  // The pool: its replicas with enough probes in the window, and their median.
  short.push(record(POOL_JUDGED, `count by (${L}) (${repGuard(REP_PROBES(PW))})`,
    'The replicas of a pool with enough probes in the window to be judged, and the pool\'s median\nreplica of each per-replica series (over those replicas; a replica that never succeeded has no\nTTFT and counts only in the failure ratio).'));
  short.push(record(poolMedian('probe_failures_ratio'), `quantile by (${L}) (0.5, ${REP_FAIL(PW)} and on (${LR}) ${repGuard(REP_PROBES(PW))})`));
  short.push(record(poolMedian('time_to_first_token_seconds_p95'), `quantile by (${L}) (0.5, ${REP_TTFT_P95(PW)} and on (${LR}) ${repGuard(REP_TTFT_COUNT(PW))})`));
  short.push(record(poolMedian('time_to_first_token_seconds_mean'), `quantile by (${L}) (0.5, ${REP_TTFT_MEAN(PW)} and on (${LR}) ${repGuard(REP_TTFT_COUNT(PW))})`));
  short.push(record(poolMedian('output_tokens_per_second_p05'), `quantile by (${L}) (0.5, ${REP_TPS_P05(PW)} and on (${LR}) ${repGuard(REP_TPS_COUNT(PW))})`));
  short.push(record(poolMedian('output_tokens_per_second_mean'), `quantile by (${L}) (0.5, ${REP_TPS_MEAN(PW)} and on (${LR}) ${repGuard(REP_TPS_COUNT(PW))})`));
  return [
    '  # One replica against its pool (dashboards/rules.mjs, "replicas").',
    '  - name: llm-probe.recording.replicas',
    '    rules:',
    ...short.map((x) => x.trimEnd()),
    '  - name: llm-probe.recording.replicas-long',
    '    interval: 5m',
    '    rules:',
    ...long.map((x) => x.trimEnd()),
  ].join('\n') + '\n';
}

/** The pool is judged: at least REPLICA_MIN_POOL replicas with enough probes. */
const POOL_OK = `on (${L}) (${POOL_JUDGED} >= ${REPLICA_MIN_POOL})`;

function replicaDown() {
  let min = 0;
  const parts = DOWN_CLASSES.map(([max, w]) => {
    const p = `max by (${LR}) (max_over_time(llm_probe_last_probe_success${R}[${w}])) == 0
and on (${LR})
  max by (${LR}) (changes(llm_probe_last_probe_timestamp_seconds${R}[${w}])) >= 1
and on (${LR})
  max by (${LR}) (changes(llm_probe_last_probe_timestamp_seconds${R}[${seconds(w) * 2}s])) >= 2
and on (${L})
  (${INTERVAL} > ${min} <= ${max})
unless on (${L})
  max by (${L}) (max_over_time(llm_probe_last_probe_success${R}[${w}])) == 0`;
    min = max;
    return p;
  });
  return anyClass(parts);
}

function replicaAlerts() {
  const pct = (x) => `${Math.round(x * 100)} %`;
  return [
    alert({
      name: 'LlmProbeReplicaDown',
      comment: 'LlmProbeEndpointDown for one replica of a pool: every probe of the replica failed over the same\nwindows, while another replica of the pool still succeeds (the whole pool down is\nLlmProbeEndpointDown, which this alert then leaves to).',
      expr: replicaDown(),
      keep: '2m',
      severity: 'warning',
      summary: 'Every probe of replica {{ $labels.replica }} of {{ $labels.target }}/{{ $labels.scenario }} fails',
      description: `Every probe of replica {{ $labels.replica }} of target {{ $labels.target }} (model {{ $labels.model }},
scenario {{ $labels.scenario }}) over at least the last two probe intervals failed, while other
replicas of the pool still answer. Users whose requests the balancer sends to this replica fail.
See the reason with
sum by (reason) (increase(llm_probe_probe_failures_total{target="{{ $labels.target }}",replica="{{ $labels.replica }}"}[15m]))
then the replica itself (its pod's events and logs), and drain it from the pool if it does not recover.`,
    }),
    alert({
      name: 'LlmProbeReplicaTTFTOutlier',
      comment: `One replica slower to the first token than the pool's median replica over the page window:
its mean TTFT above ${REPLICA_MEAN_FACTOR} × the median replica's + ${REPLICA_MEAN_MARGIN_S * 1000} ms (slower on every request), or its P95
above ${REPLICA_P95_FACTOR} × the median replica's + ${REPLICA_P95_MARGIN_S * 1000} ms (a slow tail); with enough probes of the replica
and at least ${REPLICA_MIN_POOL} replicas judged. Value: the replica's mean TTFT.`,
      expr: `(
  ${REP_TTFT_MEAN(PW)}
  > on (${L}) group_left ()
    (${REPLICA_MEAN_FACTOR} * ${poolMedian('time_to_first_token_seconds_mean')} + ${REPLICA_MEAN_MARGIN_S})
  or
  ${REP_TTFT_MEAN(PW)}
  and on (${LR})
    (
      ${REP_TTFT_P95(PW)}
      > on (${L}) group_left ()
        (${REPLICA_P95_FACTOR} * ${poolMedian('time_to_first_token_seconds_p95')} + ${REPLICA_P95_MARGIN_S})
    )
)
and on (${LR})
  ${repGuard(REP_TTFT_COUNT(PW))}
and ${POOL_OK}`,
      forD: '5m',
      keep: '10m',
      severity: 'warning',
      summary: 'Replica {{ $labels.replica }} of {{ $labels.target }}/{{ $labels.scenario }} is slow to the first token: mean TTFT {{ $value | humanizeDuration }}, far above its pool',
      description: `Replica {{ $labels.replica }} of target {{ $labels.target }} (model {{ $labels.model }}, scenario
{{ $labels.scenario }}) is slower to the first token than the pool's median replica over the alert
window: mean TTFT {{ $value | humanizeDuration }}{{ with query (printf "${poolMedian('time_to_first_token_seconds_mean')}{target=%q,scenario=%q}" $labels.target $labels.scenario) }}{{ with first . }} against the median replica's {{ .Value | humanizeDuration }}{{ end }}{{ end }}{{ with query (printf "${REP_TTFT_P95(PW)}{target=%q,scenario=%q,replica=%q}" $labels.target $labels.scenario $labels.replica) }}{{ with first . }}, P95 {{ .Value | humanizeDuration }}{{ end }}{{ end }}{{ with query (printf "${poolMedian('time_to_first_token_seconds_p95')}{target=%q,scenario=%q}" $labels.target $labels.scenario) }}{{ with first . }} against {{ .Value | humanizeDuration }}{{ end }}{{ end }}.
Through the balancer this replica hides in the pool's numbers; its users wait. Compare the
replica with the others on "Target detail" (by replica), its backend identity
(llm_probe_endpoint_info: an old or new version during a rolling upgrade?), and its engine's queue
and KV-cache load. Drain it if it is not a version difference.`,
    }),
    alert({
      name: 'LlmProbeReplicaSlowDecode',
      comment: `One replica decoding more slowly than the pool's median replica over the page window: its mean
output tokens/s below ${REPLICA_TPS_MEAN_FACTOR} × the median replica's, or its P5 below ${REPLICA_TPS_P05_FACTOR} × the median replica's (a
slow tail); with enough probes of the replica and at least ${REPLICA_MIN_POOL} replicas judged. Value: its mean.`,
      expr: `(
  ${REP_TPS_MEAN(PW)}
  < on (${L}) group_left ()
    (${REPLICA_TPS_MEAN_FACTOR} * ${poolMedian('output_tokens_per_second_mean')})
  or
  ${REP_TPS_MEAN(PW)}
  and on (${LR})
    (
      ${REP_TPS_P05(PW)}
      < on (${L}) group_left ()
        (${REPLICA_TPS_P05_FACTOR} * ${poolMedian('output_tokens_per_second_p05')})
    )
)
and on (${LR})
  ${repGuard(REP_TPS_COUNT(PW))}
and ${POOL_OK}`,
      forD: '5m',
      keep: '10m',
      severity: 'warning',
      summary: 'Replica {{ $labels.replica }} of {{ $labels.target }}/{{ $labels.scenario }} decodes slower than its pool ({{ $value | printf "%.1f" }} tokens/s on average)',
      description: `Replica {{ $labels.replica }} of target {{ $labels.target }} (model {{ $labels.model }}, scenario
{{ $labels.scenario }}) decodes more slowly than its pool's median replica over the alert window:
{{ $value | printf "%.1f" }} output tokens/s on average{{ with query (printf "${poolMedian('output_tokens_per_second_mean')}{target=%q,scenario=%q}" $labels.target $labels.scenario) }}{{ with first . }} against the median replica's {{ .Value | printf "%.1f" }}{{ end }}{{ end }}{{ with query (printf "${REP_TPS_P05(PW)}{target=%q,scenario=%q,replica=%q}" $labels.target $labels.scenario $labels.replica) }}{{ with first . }}, P5 {{ .Value | printf "%.1f" }}{{ end }}{{ end }}{{ with query (printf "${poolMedian('output_tokens_per_second_p05')}{target=%q,scenario=%q}" $labels.target $labels.scenario) }}{{ with first . }} against {{ .Value | printf "%.1f" }}{{ end }}{{ end }}.
Usually a slower or throttled GPU, a different batch size or parallelism, or another version
(llm_probe_endpoint_info). Compare the replica's TPOT and ITL with the others on "Target detail".`,
    }),
    alert({
      name: 'LlmProbeReplicaFailing',
      comment: `One replica's failure ratio over the page window more than ${REPLICA_FAILURE_MARGIN * 100} points above the pool's median replica,\nwith enough probes of the replica and at least ${REPLICA_MIN_POOL} replicas judged.`,
      expr: `${REP_FAIL(PW)}
> on (${L}) group_left ()
  (${poolMedian('probe_failures_ratio')} + ${REPLICA_FAILURE_MARGIN})
and on (${LR})
  ${repGuard(REP_PROBES(PW))}
and ${POOL_OK}`,
      forD: '5m',
      keep: '10m',
      severity: 'warning',
      summary: '{{ $value | humanizePercentage }} of probes of replica {{ $labels.replica }} of {{ $labels.target }}/{{ $labels.scenario }} fail',
      description: `{{ $value | humanizePercentage }} of the probes of replica {{ $labels.replica }} of target {{ $labels.target }}
(model {{ $labels.model }}, scenario {{ $labels.scenario }}) failed over the alert window, more than
the pool's median replica{{ with query (printf "${poolMedian('probe_failures_ratio')}{target=%q,scenario=%q}" $labels.target $labels.scenario) }}{{ with first . }} ({{ .Value | humanizePercentage }}){{ end }}{{ end }} + ${REPLICA_FAILURE_MARGIN * 100} points. See which reason with
sum by (reason) (increase(llm_probe_probe_failures_total{target="{{ $labels.target }}",replica="{{ $labels.replica }}"}[1h]))
then the replica's own logs: one bad replica (a crashed worker, a full disk, a wrong model) fails
a share of the pool's requests while the pool's ratio stays low.`,
    }),
  ].join('');
}

// ---- alerts -------------------------------------------------------------------------------------
function alert({ name, expr, forD, keep, severity, summary, description, comment, cause }) {
  const c = comment ? comment.split('\n').map((l) => `      # ${l}\n`).join('') : '';
  return `${c}      - alert: ${name}\n        expr: |\n${indent(expr.trim(), 10)}\n`
    + (forD ? `        for: ${forD}\n` : '')
    + (keep ? `        keep_firing_for: ${keep}\n` : '')
    + `        labels:\n          severity: ${severity}\n        annotations:\n`
    + `          summary: ${JSON.stringify(summary)}\n`
    + (cause ? `          cause: ${JSON.stringify(cause)}\n` : '')
    + `          description: |\n${indent(description.trim() + (cause ? `\n${cause}` : ''), 12)}\n`;
}

const anyClass = (parts) => parts.map((p) => `(\n${indent(p.trim(), 2)}\n)`).join('\nor\n');

function endpointDown() {
  let min = 0;
  const parts = DOWN_CLASSES.map(([max, w]) => {
    const p = `max by (${L}) (max_over_time(llm_probe_last_probe_success[${w}])) == 0
and on (${L})
  max by (${L}) (changes(llm_probe_last_probe_timestamp_seconds[${w}])) >= 1
and on (${L})
  max by (${L}) (changes(llm_probe_last_probe_timestamp_seconds[${seconds(w) * 2}s])) >= 2
and on (${L})
  (${INTERVAL} > ${min} <= ${max})`;
    min = max;
    return p;
  });
  return alert({
    name: 'LlmProbeEndpointDown',
    comment: 'Every probe of the pair failed over a window of at least two intervals (three at 15 s), with at\nleast three probes finished, two of them within the window (one failed probe scraped twice is\nnot down): pages within 2 min at a 15 s interval, 3 intervals + 1 min above.\nReads the last-probe gauges, not the histograms: works for a pair that never succeeded and\nacross exporter restarts (keep_firing_for bridges the restart\'s missing scrapes).',
    expr: anyClass(parts),
    keep: '2m',
    severity: 'critical',
    summary: 'Every probe of {{ $labels.target }}/{{ $labels.scenario }} fails',
    description: `Every probe of target {{ $labels.target }} (model {{ $labels.model }}, scenario {{ $labels.scenario }})
over at least the last two probe intervals failed (any reason: connection refused, HTTP errors,
stalled streams, timeouts, answers failing a check): the endpoint is down for its users too. For
a long-prompt scenario, HTTP 400 or wrong_answer (check context_truncated) means the prompt does
not fit the server's context (it refuses or cuts it) while short prompts may work. This alert
silences the target's latency and throughput alerts in Alertmanager. See the reason with
sum by (reason) (increase(llm_probe_probe_failures_total{target="{{ $labels.target }}"}[15m]))
("Failed probes by reason" on Target detail; llm-probe logs every failure at warn with reason and
HTTP status), then the endpoint itself: process, load balancer, credentials, rate limits.`,
  });
}

/** Long-prompt scenarios (`prompt_tokens:`, the pairs with a prefill histogram) are judged by
 * their prefill floor and baseline, not by the target's TTFT objective: their TTFT grows with the
 * prompt by design. */
const NOT_LONG_PROMPT = 'unless on (target, model, scenario) max by (target, model, scenario) (llm_probe_prefill_tokens_per_second_count)';

function classExpr(c, sliName, w) {
  return `${sliName} > on (target, model) group_left () ${SLO_TTFT}`;
}

function fastBurnRecord() {
  const parts = SLO_CLASSES.map((c) => {
    const [lw, sw] = c.page;
    return `${classExpr(c, sli(PAGE_Q, lw), lw)}
and on (${L})
  (${sli(PAGE_Q, sw)} > on (target, model) group_left () ${SLO_TTFT})
and on (${L})
  ${guard(probes(lw), lw)}
and on (${L})
  ${inClass(c)}
${NOT_LONG_PROMPT}`;
  });
  return record('target_model_scenario:llm_probe_ttft_slo:fast_burn', anyClass(parts),
    `The fast burn per (target, model, scenario, location): more than ${Math.round((1 - PAGE_Q) * 100)} % of the probes bad (TTFT above\nthe target's SLO, or failed) over both windows of the pair's interval class, with the guard.\nValue: the SLI quantile ${PAGE_Q} over the long window (+Inf when failures alone are that many).`);
}

function judgedRecord() {
  const parts = SLO_CLASSES.map((c) => `${guard(probes(c.page[0]), c.page[0])}\nand on (${L})\n  ${inClass(c)}`);
  return record('target_model_scenario:llm_probe_ttft_slo:judged', anyClass(parts),
    'The locations whose probes of a pair are enough to judge the fast burn: the quorum counts them.');
}

const QUORUM = `count by (target, model, scenario) (target_model_scenario:llm_probe_ttft_slo:fast_burn)
>= on (target, model, scenario)
clamp_max(count by (target, model, scenario) (target_model_scenario:llm_probe_ttft_slo:judged), 2)`;

function slowBurn() {
  const parts = SLO_CLASSES.map((c) => {
    const [lw, sw] = c.ticket;
    return `${sli(TICKET_Q, lw)} > on (target, model) group_left () ${SLO_TTFT}
and on (${L})
  (${sli(TICKET_Q, sw)} > on (target, model) group_left () ${SLO_TTFT})
and on (${L})
  ${guard(probes(lw), lw)}
and on (${L})
  ${inClass(c)}
${NOT_LONG_PROMPT}`;
  });
  return anyClass(parts);
}

function tpsFloor() {
  const parts = SLO_CLASSES.map((c) => {
    const w = c.page[0];
    return `${tpsP05(w)} <= on (target, model) group_left () ${SLO_TPS}
and on (${L})
  ${guard(tpsCount(w), w)}
and on (${L})
  ${inClass(c)}`;
  });
  return anyClass(parts);
}

function failureRatio() {
  const parts = SLO_CLASSES.map((c) => {
    const w = c.page[0];
    return `${failRatio(w)} > 0.1
and on (${L})
  ${guard(probes(w), w)}
and on (${L})
  ${inClass(c)}`;
  });
  return anyClass(parts);
}

function noRecentProbe() {
  let min = 0;
  const parts = STUCK_CLASSES.map(([max, w]) => {
    const p = `max by (${L}) (changes(llm_probe_last_probe_timestamp_seconds[${w}])) == 0
and on (${L})
  max by (${L}) (llm_probe_last_probe_timestamp_seconds offset ${w})
and on (${L})
  (${INTERVAL} > ${min} <= ${max})`;
    min = max;
    return p;
  });
  return anyClass(parts);
}

function mainAlerts() {
  const windows = SLO_CLASSES.map((c) => `${c.page.join('/')} at intervals up to ${c.max} s`).join(', ');
  return [
    endpointDown(),
    fastBurnRecord(),
    judgedRecord(),
    alert({
      name: 'LlmProbeTTFTP95AboveSLO',
      cause: causeTemplate(false),
      comment: 'The page of the TTFT SLO (fast burn), from at least min(2, locations judged) locations.',
      expr: `max by (target, model, scenario) (target_model_scenario:llm_probe_ttft_slo:fast_burn)\nand on (target, model, scenario)\n(\n${indent(QUORUM, 2)}\n)`,
      forD: '2m',
      keep: '5m',
      severity: 'critical',
      summary: 'TTFT of {{ $labels.target }}/{{ $labels.scenario }} burns its SLO budget fast: over 30 % of probes slower than the SLO or failed',
      description: `More than 30 % of the probes of target {{ $labels.target }} (model {{ $labels.model }}, scenario
{{ $labels.scenario }}) waited longer than the target's TTFT SLO (slo.ttft_p95) for the first token or
failed, over both windows of its interval class (${windows}):
the P95 objective's budget (5 % bad) burns at 6× or more. 70 % of the probes took at least
{{ $value | humanizeDuration }} (+Inf: mostly failures). Users see the same prefill/queueing delay.
Check the "Target detail" dashboard (TTFT heatmap, failures by reason, E2E), the "Regression"
dashboard (did the backend identity change?), the serving engine's queue depth / running requests
and GPU utilisation, and whether prefill of long prompts got slower.`,
    }),
    alert({
      name: 'LlmProbeTTFTP95AboveSLOFromOneLocation',
      cause: causeTemplate(true),
      comment: 'The same fast burn seen from fewer locations than the quorum: one alert per breaching location.',
      expr: `target_model_scenario:llm_probe_ttft_slo:fast_burn\nunless on (target, model, scenario)\n(\n${indent(QUORUM, 2)}\n)`,
      forD: '2m',
      keep: '5m',
      severity: 'warning',
      summary: 'TTFT of {{ $labels.target }}/{{ $labels.scenario }} burns its SLO budget from location {{ $labels.location }} only',
      description: `Probes of target {{ $labels.target }} (model {{ $labels.model }}, scenario {{ $labels.scenario }})
from location "{{ $labels.location }}" are more than 30 % slower than the TTFT SLO or failed, but
fewer than 2 locations see it, so the endpoint is likely fine: the network path from this location
(DNS, a proxy, a peering link, the region's load balancer) adds the delay. Compare the per-location
TTFT panels of "Target detail" and this location's llm_probe_connection_setup_seconds and
llm_probe_ttft_overhead_seconds.`,
    }),
    alert({
      name: 'LlmProbeTTFTErrorBudgetBurnSlow',
      cause: causeTemplate(true),
      comment: 'The ticket of the TTFT SLO (slow burn): more than 5 % bad over both ticket windows.',
      expr: slowBurn(),
      forD: '15m',
      keep: '15m',
      severity: 'warning',
      summary: 'P95 TTFT of {{ $labels.target }}/{{ $labels.scenario }} is above its SLO over hours (failed probes counted)',
      description: `More than 5 % of the probes of target {{ $labels.target }} (model {{ $labels.model }}, scenario
{{ $labels.scenario }}) were slower than its TTFT SLO or failed, over both of its class's ticket windows
(${SLO_CLASSES.map((c) => c.ticket.join('/')).join(', ')}): the P95 objective is missed, not by much, for hours.
95 % of probes took up to {{ $value | humanizeDuration }}. Not urgent: open a ticket; look at
"Regression" for a backend change or a load trend, and at the TTFT heatmap for a second band.`,
    }),
    alert({
      name: 'LlmProbeOutputTokensPerSecondBelowFloor',
      comment: "More than 5 % of the successful probes decode at or below the target's tokens/s floor\n(P5 <= floor, exact: the floor is a bucket boundary), over the long page window, with the guard.",
      expr: tpsFloor(),
      forD: '10m',
      keep: '10m',
      severity: 'warning',
      summary: '{{ $labels.target }}/{{ $labels.scenario }} decodes below its tokens/s floor (P5 {{ $value | printf "%.1f" }} tokens/s)',
      description: `More than 5 % of the probes of target {{ $labels.target }} (model {{ $labels.model }},
scenario {{ $labels.scenario }}) generated at or below the target's output tokens/s floor
(slo.output_tokens_per_second_min); the 5th percentile is {{ $value | printf "%.1f" }} tokens/s.
Decode is slow: usually too many concurrent sequences (batch size), KV-cache pressure /
preemption, a smaller GPU or a changed speculative-decoding setup. Compare TPOT and
inter-token latency on "Target detail" and the backend identity on "Regression".`,
    }),
    alert({
      name: 'LlmProbeFailureRatioHigh',
      comment: 'More than 10 % of probes failed over the long page window (a failing minority that the TTFT\npage, at 30 %, does not reach), with the guard.',
      expr: failureRatio(),
      forD: '10m',
      keep: '10m',
      severity: 'warning',
      summary: '{{ $value | humanizePercentage }} of probes of {{ $labels.target }}/{{ $labels.scenario }} fail',
      description: `{{ $value | humanizePercentage }} of the probes of target {{ $labels.target }} (model
{{ $labels.model }}, scenario {{ $labels.scenario }}) failed over the alert window. See which reason with
sum by (reason) (increase(llm_probe_probe_failures_total{target="{{ $labels.target }}"}[1h]))
("Failed probes by reason" on Target detail); llm-probe logs every failure at warn with reason and
HTTP status. connect/dns/tls: endpoint or network; http_status: 429 = rate limited, 5xx = server
error; overloaded: the provider is out of capacity (HTTP 529, overloaded_error); timeout: the
stream outlived the probe timeout; stream_error/truncated/empty_stream: the server broke the
stream.`,
    }),
    alert({
      name: 'LlmProbeNoRecentProbe',
      comment: 'No probe of the pair finished over max(10 min, 4 intervals) while the exporter is scraped.',
      expr: noRecentProbe(),
      forD: '5m',
      severity: 'warning',
      summary: 'No probe of {{ $labels.target }}/{{ $labels.scenario }} finished for a long time',
      description: `The exporter is up but no probe of target {{ $labels.target }}, scenario {{ $labels.scenario }}
has finished (not even as a failure) for at least 10 minutes and four probe intervals, so its
numbers are stale. A probe always ends within its timeout, so the probe task is stuck or was never
scheduled. Check the llm-probe logs and its landing page (/), then restart it.`,
    }),
    alert({
      name: 'LlmProbeExporterDown',
      comment: 'A scrape target that served llm-probe metrics within a day no longer answers. The job\nlabel is not written here: the llm-probe targets are the ones that exported llm_probe_build_info.',
      expr: 'up == 0\nand on (job, instance)\n  present_over_time(llm_probe_build_info[1d])',
      forD: '2m',
      severity: 'critical',
      summary: 'llm-probe exporter {{ $labels.instance }} is down',
      description: `Prometheus cannot scrape llm-probe at {{ $labels.instance }} (job {{ $labels.job }}), so
nothing it probes is measured and every latency alert for it is blind (Alertmanager silences them
while this fires). Check the process / pod (crash loop? \`llm-probe check-config\` on its config),
the listen address (--web.listen-address) and the network path from Prometheus.`,
    }),
    alert({
      name: 'LlmProbeExporterAbsent',
      expr: 'absent(llm_probe_build_info)',
      forD: '10m',
      severity: 'warning',
      summary: 'Prometheus scrapes no llm-probe exporter',
      description: `No llm-probe series (llm_probe_build_info) exists in this Prometheus: service discovery lost the
exporter, the scrape config changed, or it has been down for more than a day. No LLM endpoint
is measured. Check the scrape config / ServiceMonitor and the exporter's pods.`,
    }),
  ].join('');
}

// ---- long prompts: prefill speed and truncation -----------------------------------------------
/** The window of the prefill median (recording.yml, group llm-probe.recording.prefill). */
const PREFILL_WINDOW = '30m';
const PREFILL_WINDOW_WORDS = '30 minutes';
/** The fewest probes a prefill median may rest on, whatever the interval. */
const PREFILL_MIN_PROBES = 3;
const PREFILL_P50 = `target_model_scenario:llm_probe_prefill_tokens_per_second:p50_${PREFILL_WINDOW}`;
const PREFILL_COUNT = `target_model_scenario:llm_probe_prefill_tokens_per_second_count:increase${PREFILL_WINDOW}`;
const SLO_PREFILL = 'max by (target, model) (llm_probe_slo_prefill_tokens_per_second)';
const TRUNCATED = 'llm_probe_stream_anomalies_total{kind="prompt_truncated"}';

function longPromptAlerts() {
  const w = PREFILL_WINDOW;
  const ww = PREFILL_WINDOW_WORDS;
  return [
    '  # Long prompts (scenarios with prompt_tokens; docs/configuration.md "Long prompts"): prefill\n',
    "  # speed against the target's floor, and a server that cuts the prompt (dashboards/rules.mjs).\n",
    '  - name: llm-probe.long-prompts\n',
    '    rules:\n',
    alert({
      name: 'LlmProbePrefillBelowFloor',
      comment: `The median prefill speed over ${ww} below the target's floor
(slo.prefill_tokens_per_second_min): more than half of the successful long-prompt probes
prefilled at or below it (exact: the floor is a bucket boundary). Guard: ${GUARD * 100} % of the probes
the interval promises in ${ww}, and at least ${PREFILL_MIN_PROBES}: 90 at 15 s, 23 at 1 min, 5 at 5 min;
at 10 min all 3 (judged unevenly), less often never. Value: the median, prompt tokens/s.`,
      expr: `${PREFILL_P50}
  < on (target, model) group_left ()
    ${SLO_PREFILL}
and on (${L})
  (
    ${PREFILL_COUNT}
    >= on (${L})
      clamp_min(${GUARD * seconds(w)} / ${INTERVAL}, ${PREFILL_MIN_PROBES})
  )`,
      forD: '15m',
      keep: '10m',
      severity: 'warning',
      summary: '{{ $labels.target }}/{{ $labels.scenario }} prefills long prompts below its floor (median {{ $value | printf "%.0f" }} prompt tokens/s)',
      description: `Over the last ${ww}, more than half of the probes of target {{ $labels.target }} (model
{{ $labels.model }}, scenario {{ $labels.scenario }}, a generated long prompt) prefilled at or below
the target's floor (slo.prefill_tokens_per_second_min): the median is {{ $value | printf "%.0f" }} prompt
tokens per second of TTFT{{ with query (printf "max(llm_probe_slo_prefill_tokens_per_second{target=%q,model=%q})" $labels.target $labels.model) }}{{ with first . }}, the floor {{ .Value | printf "%.0f" }}{{ end }}{{ end }}.
Long prompts reach their first token slowly: chunked prefill or the prefix cache turned off,
another attention backend, a slower or shared GPU pool, or a queue in front of the engine (TTFT
holds it too). Compare "TTFT against prompt length" and the server's own prefill speed on Target
detail ("Long prompts"), the TTFT split (engine_queue or engine_prefill?) and the backend identity
on Regression.`,
    }),
    alert({
      name: 'LlmProbePromptTruncated',
      comment: `The server counted fewer than three quarters of a generated long prompt's tokens (anomaly
prompt_truncated) at least once in the last ${ww}: it cut the prompt, most likely to its context.
increase() misses the first anomaly of a series (the counter is created at 1); the second branch
catches it: a series that exists now but did not ${ww} ago, on a pair Prometheus saw then. The
needle's check (context_truncated, a wrong answer) is LlmProbeWrongAnswer's. Value: truncated
probes in the window (about: increase() extrapolates).`,
      expr: `sum by (${L}) (increase(${TRUNCATED}[${w}])) > 0
or
(
  sum by (${L}) (
    ${TRUNCATED}
    unless
    ${TRUNCATED} offset ${w}
  )
  and on (${L})
    sum by (${L}) (llm_probe_probes_total offset ${w})
)`,
      forD: '1m',
      keep: '10m',
      severity: 'warning',
      summary: '{{ $labels.target }}/{{ $labels.scenario }}: the server cuts the long prompt (it counts far fewer prompt tokens than were sent)',
      description: `The server of target {{ $labels.target }} (model {{ $labels.model }}, scenario {{ $labels.scenario }})
counted fewer than three quarters of the generated long prompt's tokens (prompt_tokens) on
about {{ $value | printf "%.0f" }} probe(s) in the last ${ww} (anomaly prompt_truncated): it cut the prompt, most
likely to its context window, without an error. Its users' long prompts lose their start the
same way (the system prompt, the document, the first turns) and their answers get worse, not
slower. With the needle (the default) those probes also fail their check context_truncated
(LlmProbeWrongAnswer; LlmProbeEndpointDown when every probe of the scenario fails). Usually the
context is smaller than the model's: Ollama's num_ctx, TGI's --max-input-tokens or truncate, a
vLLM --max-model-len, a gateway that trims. probe-once on the scenario prints both counts.`,
    }),
  ].join('');
}

// ---- multi-turn conversations: does the prefix cache serve the earlier turns? ------------------
/** The window of the per-turn records (recording.yml, group llm-probe.recording.turns). */
const TURN_WINDOW = '30m';
const TURN_WINDOW_WORDS = '30 minutes';
const turnRec = (m) => `target_model_scenario_turn:${m}`;
const TURN_P50 = turnRec(`llm_probe_turn_time_to_first_token_seconds:p50_${TURN_WINDOW}`);
const TURN_MEAN = turnRec(`llm_probe_turn_time_to_first_token_seconds:mean_${TURN_WINDOW}`);
const TURN_COUNT = turnRec(`llm_probe_turn_time_to_first_token_seconds_count:increase${TURN_WINDOW}`);
const TURN_CACHED = turnRec(`llm_probe_turn_prompt_cached_tokens:ratio${TURN_WINDOW}`);
/** Turn 2 is "not faster" when its TTFT is at least this share of turn 1's (median and mean). */
export const TURN_NOT_FASTER = 0.9;
/** A server that counts at least this share of turn 2's prompt as cached is serving the cache. */
export const TURN_CACHED_MIN = 0.1;
/**
 * The guard's share of the probes the interval promises in the window: half, not the usual
 * 75 %, because a conversation that outlasts its interval runs every other slot (a slot
 * missed while a probe runs is skipped) and should still be judged.
 */
const TURN_GUARD = 0.5;
const TURN_MIN_PROBES = 3;

function conversationAlerts() {
  const w = TURN_WINDOW;
  const ww = TURN_WINDOW_WORDS;
  const t = (rec, k) => `${rec}{turn="${k}"}`;
  const percent = (x) => `${Math.round(x * 100)} %`;
  const sel = (k) => `{target=%q,model=%q,scenario=%q,turn='${k}'}`;
  const args = '$labels.target $labels.model $labels.scenario';
  return [
    '  # Multi-turn conversations (scenarios with turns; docs/configuration.md "Multi-turn\n',
    '  # conversations"): turn 2 re-sends turn 1, which a working prefix cache serves (dashboards/rules.mjs).\n',
    '  - name: llm-probe.conversations\n',
    '    rules:\n',
    alert({
      name: 'LlmProbeConversationCacheNotServing',
      comment: `Turn 2 of a conversation starts no faster than turn 1 over ${ww}: its median and its mean
TTFT both at least ${TURN_NOT_FASTER} × turn 1's (the median is interpolated in buckets 1.25 to 2 × wide,
the mean is exact), unless the server counted at least ${percent(TURN_CACHED_MIN)} of turn 2's prompt as
cached: it serves the cache, and a short conversation's prefill is too small to show in TTFT.
A server that counts nothing (no series) or always 0 is judged on TTFT alone. Guard: ${TURN_GUARD * 100} % of
the probes the interval promises in ${ww}, and at least ${TURN_MIN_PROBES} successful turn 2s: 60 at 15 s,
15 at 1 min, 3 at 5 min; at 10 min all 3 (judged unevenly), less often never. Value: turn 2's
median TTFT / turn 1's.`,
      expr: `(
  ${t(TURN_P50, 2)}
  / on (${L})
  ${t(TURN_P50, 1)}
) >= ${TURN_NOT_FASTER}
and on (${L})
  (
    ${t(TURN_MEAN, 2)}
    / on (${L})
    ${t(TURN_MEAN, 1)}
  ) >= ${TURN_NOT_FASTER}
unless on (${L})
  ${t(TURN_CACHED, 2)} >= ${TURN_CACHED_MIN}
and on (${L})
  (
    ${t(TURN_COUNT, 2)}
    >= on (${L})
      clamp_min(${TURN_GUARD * seconds(w)} / ${INTERVAL}, ${TURN_MIN_PROBES})
  )`,
      forD: '10m',
      keep: '10m',
      severity: 'warning',
      summary: '{{ $labels.target }}/{{ $labels.scenario }}: turn 2 of the conversation starts no faster than turn 1 (median TTFT {{ $value | humanizePercentage }} of turn 1\'s): the prefix cache does not serve it',
      description: `Over the last ${ww}, turn 2 of the conversation scenario {{ $labels.scenario }} of target
{{ $labels.target }} (model {{ $labels.model }}) started no faster than turn 1: its median TTFT is
{{ $value | humanizePercentage }} of turn 1's{{ with query (printf "${TURN_P50}${sel(1)}" ${args}) }}{{ with first . }} ({{ .Value | humanizeDuration }}){{ end }}{{ end }}{{ with query (printf "${TURN_CACHED}${sel(2)}" ${args}) }}{{ with first . }}, and the server counted
{{ .Value | humanizePercentage }} of turn 2's prompt tokens as served from its cache{{ end }}{{ else }}; the server reports
no cached prompt tokens, so this rests on TTFT alone{{ end }}. Turn 2 re-sends turn 1 and its answer,
which a working prefix cache serves, so it should start faster. The cache does not serve the
conversation: prefix caching off after an upgrade or a flag change (vLLM --enable-prefix-caching,
SGLang's radix cache, llama.cpp --cache-reuse and its slots), a KV cache too small to keep a
conversation between turns, or a balancer that sends each turn to another replica. Compare TTFT
by turn and the cached share on Target detail ("Conversations") and the backend identity
(LlmProbeBackendChanged). A hosted API caches only long prefixes (OpenAI from 1,024 tokens) or
marked ones (Anthropic): a short conversation there is never cached.`,
    }),
  ].join('');
}

/** Adds runbook_url and dashboard_url after each alert's `annotations:` line. */
function withUrls(text, runbookBase, dashboardBase) {
  const lines = text.split('\n');
  const out = [];
  let alertName = null;
  for (const l of lines) {
    const a = /^\s*- alert: (\w+)/.exec(l);
    if (a) alertName = a[1];
    out.push(l);
    const m = /^(\s*)annotations:\s*$/.exec(l);
    if (m && alertName) {
      const ind = `${m[1]}  `;
      const perTarget = !/Exporter|ConfigReload|ReadDelay/.test(alertName);
      const dash = perTarget
        ? `${dashboardBase}/d/llm-probe-target?var-target={{ $labels.target }}`
        : `${dashboardBase}/d/llm-probe-fleet`;
      out.push(`${ind}runbook_url: "${runbookBase}#${alertName.toLowerCase()}"`);
      out.push(`${ind}dashboard_url: "${dash}"`);
      alertName = null;
    }
  }
  return out.join('\n');
}

export const DEFAULT_RUNBOOK_BASE = 'https://github.com/llm-probe/llm-probe/blob/main/docs/alerting.md';
export const DEFAULT_DASHBOARD_BASE = 'http://localhost:3000';

/** The text of both rule files: { 'llm-probe-recording.rules.yml': …, 'llm-probe-alerts.rules.yml': … }. */
export function rulesFiles(here, { runbookBase = DEFAULT_RUNBOOK_BASE, dashboardBase = DEFAULT_DASHBOARD_BASE } = {}) {
  const frag = (n) => readFileSync(join(here, 'rules', n), 'utf8');
  const gen = '# GENERATED by dashboards/build.mjs (dashboards/rules.mjs + dashboards/rules/*.yml): do not edit;\n# edit those and run `node dashboards/build.mjs`.\n';
  const recording = gen + frag('recording.yml').trimEnd() + '\n\n' + sloRecordingGroups().trimEnd() + '\n\n'
    + replicaRecordingGroups().trimEnd() + '\n\n' + frag('engine-recording.yml');
  const alerts = gen + [
    '# llm-probe alerts. Needs llm-probe-recording.rules.yml loaded in the same Prometheus, and',
    '# llm-probe >= the version exporting llm_probe_probe_interval_seconds (the windows adapt to it).',
    '# Runbook and detection times per alert: docs/alerting.md; Alertmanager routing and inhibition:',
    '# dashboards/alertmanager/alertmanager.example.yml.',
    '#',
    '# Several instances: shards of one location are summed away with instance, so no alert fires once',
    '# per replica. A probe location is a target label set in the scrape config (`location: eu-west`);',
    '# every rule keeps it where it exists. The TTFT page needs the fast burn from at least',
    '# M = 2 locations (or from every judged location when fewer report the pair); to change M, edit',
    '# the 2 in clamp_max(…, 2) in dashboards/rules.mjs.',
    'groups:',
    '  - name: llm-probe.alerts',
    '    rules:',
    mainAlerts().trimEnd(),
    replicaAlerts().trimEnd(),
    frag('reload.yml').trimEnd(),
    frag('baseline.yml').trimEnd(),
    '',
    frag('regressions.yml').trimEnd(),
    '',
    frag('self.yml').trimEnd(),
    '',
    frag('answers.yml').trimEnd(),
    '',
    frag('engine.yml').trimEnd(),
    '',
    frag('quota.yml').trimEnd(),
    '',
    longPromptAlerts().trimEnd(),
    '',
    conversationAlerts().trimEnd(),
    '',
  ].join('\n');
  return {
    'llm-probe-recording.rules.yml': recording,
    'llm-probe-alerts.rules.yml': withUrls(alerts, runbookBase, dashboardBase),
  };
}
