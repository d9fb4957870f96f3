#!/usr/bin/env node
// Generates the Grafana dashboards in grafana/*.json and the Prometheus rule files in
// prometheus/*.rules.yml (rules.mjs; all committed). Edit this file (or rules.mjs,
// rules/*.yml), then run `node dashboards/build.mjs`; `node dashboards/build.mjs --check` fails
// when a committed file differs from what this script generates (run by tests/e2e/dashboards/schema.rs).
// Options: --runbook-base URL (default: docs/alerting.md on GitHub; each alert links
// URL#alertname), --dashboard-base URL (Grafana root, default http://localhost:3000),
// --out DIR (write only the rule files, into DIR: how to ship rules with your own URLs).
// Plain Node, no dependencies.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { nativeDashboard, nativeRules } from './native.mjs';
import { rulesFiles } from './rules.mjs';

const DS = { type: 'prometheus', uid: '${datasource}' };
// `location` is a target label from the scrape config (several probe locations under one
// Prometheus); where it is not set, `location=~".*"` matches the series without it.
const SEL = 'target=~"$target",model=~"$model",scenario=~"$scenario",location=~"$location"';
const TPS = 'suffix: tok/s';

// ---- template variables -------------------------------------------------------------------
const dsVar = {
  type: 'datasource', name: 'datasource', label: 'Prometheus', query: 'prometheus',
  hide: 0, refresh: 1, regex: '', options: [], skipUrlSync: false,
};
function queryVar(name, label, query, multi) {
  return {
    type: 'query', name, label, datasource: DS, query,
    refresh: 2, sort: 1, multi, includeAll: multi, allValue: multi ? '.*' : undefined,
    options: [], hide: 0, regex: '', skipUrlSync: false,
  };
}
function vars(targetMulti) {
  return [
    dsVar,
    queryVar('target', 'Target', 'label_values(llm_probe_probes_total, target)', targetMulti),
    queryVar('model', 'Model', 'label_values(llm_probe_probes_total{target=~"$target"}, model)', true),
    queryVar('scenario', 'Scenario', 'label_values(llm_probe_probes_total{target=~"$target",model=~"$model"}, scenario)', true),
    queryVar('location', 'Location', 'label_values(llm_probe_probes_total{target=~"$target"}, location)', true),
  ];
}

// ---- the backend-change annotation ------------------------------------------------------------
const backendAnnotation = {
  name: 'Backend identity change',
  datasource: DS,
  enable: true,
  iconColor: 'purple',
  target: {
    refId: 'Anno',
    datasource: DS,
    // A label set of llm_probe_endpoint_info that did not exist 2 minutes earlier on a target that
    // already had one: the model, fingerprint or serving framework changed.
    expr: '(max by (target, model, response_model, system_fingerprint, server, server_version) (llm_probe_endpoint_info{target=~"$target"}) unless on (target, model, response_model, system_fingerprint, server, server_version) (llm_probe_endpoint_info offset 2m)) and on (target, model) (llm_probe_endpoint_info offset 2m)',
    legendFormat: 'Backend changed: {{target}} now {{response_model}} {{server}} {{server_version}} {{system_fingerprint}}',
    interval: '1m',
  },
};

// ---- panels ----------------------------------------------------------------------------------
let nextId = 1;
// Exemplars: Grafana fetches them for a target with `exemplar: true` from the
// series it reads (never from a recorded series), so they go on one raw-bucket TTFT target
// per panel; each carries trace_id and request_id, linked to the exporter's
// /probes/{trace_id} by the datasource's exemplarTraceIdDestinations (docs/dashboards.md).
const EXEMPLARS = { exemplar: true };
function q(expr, legendFormat, extra = {}) {
  return { datasource: DS, editorMode: 'code', expr, legendFormat, range: true, instant: false, ...extra };
}
function withRefIds(targets) {
  return targets.map((t, i) => ({ refId: String.fromCharCode(65 + i), ...t }));
}
function gp(x, y, w, h) { return { x, y, w, h }; }
const dashedRed = (name) => ({
  matcher: { id: 'byName', options: name },
  properties: [
    { id: 'custom.lineStyle', value: { fill: 'dash', dash: [10, 10] } },
    { id: 'color', value: { mode: 'fixed', fixedColor: 'red' } },
    { id: 'custom.fillOpacity', value: 0 },
  ],
});
const dashedByRegexp = (re) => ({
  matcher: { id: 'byRegexp', options: re },
  properties: [
    { id: 'custom.lineStyle', value: { fill: 'dash', dash: [10, 10] } },
    { id: 'custom.fillOpacity', value: 0 },
  ],
});
function timeseries(title, description, unit, targets, gridPos, { overrides = [], min, stack = false, bars = false, lines } = {}) {
  return {
    type: 'timeseries', id: nextId++, title, description, datasource: DS, gridPos,
    fieldConfig: {
      defaults: {
        unit, min,
        custom: {
          drawStyle: bars ? 'bars' : 'line', lineWidth: 1, fillOpacity: bars ? 80 : 10,
          showPoints: 'never', spanNulls: false,
          stacking: { mode: stack ? 'normal' : 'none', group: 'A' },
          ...(lines ? { thresholdsStyle: { mode: 'line' } } : {}),
        },
        // Threshold lines at the alert factors (`lines`: [[value, color], …], ascending).
        ...(lines ? { thresholds: { mode: 'absolute', steps: [{ color: 'transparent', value: null }, ...lines.map(([value, color]) => ({ color, value }))] } } : {}),
      },
      overrides,
    },
    options: {
      legend: { displayMode: 'table', placement: 'bottom', showLegend: true, calcs: ['mean', 'max', 'lastNotNull'] },
      tooltip: { mode: 'multi', sort: 'desc' },
    },
    targets: withRefIds(targets),
  };
}
function stat(title, description, unit, expr, gridPos, steps, { decimals, legend = '' } = {}) {
  return {
    type: 'stat', id: nextId++, title, description, datasource: DS, gridPos,
    fieldConfig: {
      defaults: { unit, decimals, thresholds: { mode: 'absolute', steps }, color: { mode: 'thresholds' } },
      overrides: [],
    },
    options: {
      reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
      colorMode: 'background', graphMode: 'none', justifyMode: 'auto', orientation: 'auto',
      textMode: 'auto', wideLayout: true, showPercentChange: false, percentChangeColorMode: 'standard',
    },
    targets: withRefIds([q(expr, legend, { range: false, instant: true })]),
  };
}
function heatmap(title, description, unit, metric, gridPos, extra = {}) {
  return {
    type: 'heatmap', id: nextId++, title, description, datasource: DS, gridPos,
    fieldConfig: { defaults: { unit }, overrides: [] },
    options: {
      calculate: false,
      cellGap: 1,
      color: { mode: 'scheme', scheme: 'Oranges', steps: 64, exponent: 0.5, fill: 'dark-orange', reverse: false, scale: 'exponential' },
      yAxis: { axisPlacement: 'left', unit, reverse: false },
      rowsFrame: { layout: 'le' },
      cellValues: { unit: 'short' },
      legend: { show: true },
      tooltip: { mode: 'single', yHistogram: true, showColorScale: false },
      filterValues: { le: 1e-9 },
      showValue: 'never',
      exemplars: { color: 'rgba(255,0,255,0.7)' },
      selectionMode: 'x',
    },
    targets: withRefIds([q(`sum by (le) (increase(${metric}_bucket{${SEL}}[$__rate_interval]))`, '{{le}}', { format: 'heatmap', ...extra })]),
  };
}
function row(title, y, extra = {}) {
  return { type: 'row', id: nextId++, title, collapsed: false, gridPos: gp(0, y, 24, 1), panels: [], ...extra };
}
const quantiles = (metric, sel, by = '', exemplarAt) => [0.5, 0.95, 0.99].map((p) =>
  q(`histogram_quantile(${p}, sum by (${by}le) (rate(${metric}_bucket{${sel}}[$__rate_interval])))`,
    `P${Math.round(p * 100)}${by ? ' {{' + by.replace(', ', '') + '}}' : ''}`,
    p === exemplarAt ? EXEMPLARS : {}));
// P95 TTFT per probe location (one line per `location` target label; one unlabelled line
// where the scrape config sets none), summed across the shards of each location.
const ttftByLocation = (sel) => q(
  `histogram_quantile(0.95, sum by (location, le) (rate(llm_probe_time_to_first_token_seconds_bucket{${sel}}[$__rate_interval])))`,
  'P95 {{location}}', EXEMPLARS);
const ttftSlo = q('max(llm_probe_slo_time_to_first_token_seconds{target=~"$target",model=~"$model"})', 'SLO');
const tpsFloor = q('min(llm_probe_slo_output_tokens_per_second{target=~"$target",model=~"$model"})', 'floor');
// The pinned baselines (`baseline_file:` in the probes file, `llm-probe baseline save`): one line
// per scenario that has one, drawn dotted blue beside the SLO line; none where no baseline is pinned.
const ttftBaseline = q(`max by (scenario) (llm_probe_baseline_time_to_first_token_seconds{${SEL},quantile="0.95"})`, 'baseline P95 {{scenario}}');
const tpotBaseline = q(`max by (scenario) (llm_probe_baseline_time_per_output_token_seconds{${SEL},quantile="0.95"})`, 'baseline P95 {{scenario}}');
const tpsBaseline = q(`min by (scenario) (llm_probe_baseline_output_tokens_per_second{${SEL},quantile="0.5"})`, 'baseline P50 {{scenario}}');
const dottedBaseline = {
  matcher: { id: 'byRegexp', options: '^baseline .*' },
  properties: [
    { id: 'custom.lineStyle', value: { fill: 'dot', dash: [0, 10] } },
    { id: 'color', value: { mode: 'fixed', fixedColor: 'blue' } },
    { id: 'custom.fillOpacity', value: 0 },
  ],
};

function dashboard({ uid, title, description, panels, targetMulti, tags }) {
  return {
    uid, title, description, tags: ['llm-probe', ...tags],
    id: null, editable: true, graphTooltip: 1, schemaVersion: 39, version: 1,
    time: { from: 'now-6h', to: 'now' }, refresh: '1m', timezone: 'browser', fiscalYearStartMonth: 0,
    liveNow: false, weekStart: '',
    timepicker: {},
    links: [{
      title: 'llm-probe', type: 'dashboards', tags: ['llm-probe'], asDropdown: true,
      includeVars: true, keepTime: true, icon: 'external link', targetBlank: false, tooltip: '', url: '',
    }],
    annotations: { list: [backendAnnotation] },
    templating: { list: vars(targetMulti) },
    panels,
  };
}

// ---- fleet overview -------------------------------------------------------------------------------
// The fleet panels agree with the alerts: percentiles per scenario (never mixed across scenarios),
// over the alert window (the recorded 10-minute series, or a fixed [10m]), never $__rate_interval,
// whose few probes swing far more than what the alerts judge.
const REC = (name) => `target_model_scenario:${name}{${SEL}}`;
const perScenario = (p, metric, extra = {}) => q(
  `histogram_quantile(${p}, sum by (scenario, location, le) (rate(${metric}_bucket{${SEL}}[10m])))`,
  `P${Math.round(p * 100)} {{scenario}} {{location}}`, extra);
function fleet() {
  nextId = 1;
  const s = SEL;
  const slo = 'max by (target, model) (llm_probe_slo_time_to_first_token_seconds{target=~"$target",model=~"$model"})';
  const floor = 'max by (target, model) (llm_probe_slo_output_tokens_per_second{target=~"$target",model=~"$model"})';
  const grid = (title, description, unit, expr, y, steps, legend, opts = {}) =>
    stat(title, description, unit, expr, gp(0, y, 24, 4), steps, { legend, ...opts });
  const panels = [
    row('Fleet state: every target against its SLO (alert windows)', 0),
    grid('TTFT P95 as a share of the SLO', 'P95 TTFT of each target and scenario over the alert window (10 minutes, the recorded series) divided by the target\'s own TTFT SLO: above 100 % the P95 objective is missed. The page (LlmProbeTTFTP95AboveSLO) needs 30 % of probes over the SLO or failed.', 'percentunit',
      `${REC('llm_probe_time_to_first_token_seconds:p95_10m')} / on (target, model) group_left () ${slo}`, 1,
      [{ color: 'green', value: null }, { color: 'orange', value: 0.8 }, { color: 'red', value: 1 }], '{{target}} {{scenario}} {{location}}'),
    grid('Success ratio (alert window)', 'Share of probes that succeeded over the last 10 minutes (the recorded failure ratio the alerts read), per target and scenario. A live outage shows as 0 %, not diluted by the dashboard\'s time range.', 'percentunit',
      `1 - ${REC('llm_probe_probe_failures:ratio10m')}`, 5,
      [{ color: 'red', value: null }, { color: 'orange', value: 0.9 }, { color: 'green', value: 0.99 }], '{{target}} {{scenario}} {{location}}', { decimals: 1 }),
    grid('Oldest last-probe age', 'Seconds since the last probe of each target finished, the oldest of its scenarios (min of the finish times), so one stuck scenario shows. Alert LlmProbeNoRecentProbe fires after max(10 min, 4 intervals).', 's',
      `time() - min by (target) (llm_probe_last_probe_timestamp_seconds{${s}})`, 9,
      [{ color: 'green', value: null }, { color: 'orange', value: 120 }, { color: 'red', value: 600 }], '{{target}}'),
    {
      type: 'table', id: nextId++, title: 'Firing llm-probe alerts', datasource: DS, gridPos: gp(0, 13, 24, 6),
      description: 'The llm-probe alerts Prometheus fires now (its ALERTS series), one row per alert and target: the same the pager sees before Alertmanager\'s grouping and inhibition.',
      fieldConfig: { defaults: { unit: 'none', custom: { align: 'auto', cellOptions: { type: 'auto' }, inspect: false } }, overrides: [] },
      options: { showHeader: true, cellHeight: 'sm', frameIndex: 0 },
      transformations: [{ id: 'organize', options: { excludeByName: { Time: true, Value: true, __name__: true, alertstate: true }, indexByName: {}, renameByName: {} } }],
      targets: withRefIds([q('ALERTS{alertname=~"LlmProbe.*",alertstate="firing"}', '', { range: false, instant: true, format: 'table' })]),
    },
    row('$target', 19, { repeat: 'target' }),
    timeseries('TTFT P50 / P95 / P99 by scenario vs SLO and baseline', 'Time to first token per scenario over the alert window (10 minutes; P95 is the recorded series the alerts read), against the target\'s TTFT SLO (dashed) and the pinned baseline\'s P95 (dotted, where a baseline_file is set). Exact at the SLO: the SLO is a histogram bucket boundary.', 's',
      [perScenario(0.5, 'llm_probe_time_to_first_token_seconds'),
        q(REC('llm_probe_time_to_first_token_seconds:p95_10m'), 'P95 {{scenario}} {{location}}'),
        perScenario(0.99, 'llm_probe_time_to_first_token_seconds', EXEMPLARS), ttftSlo, ttftBaseline], gp(0, 20, 9, 8), { overrides: [dashedRed('SLO'), dottedBaseline], min: 0 }),
    timeseries('Output tokens/s P5 / P50 by scenario vs floor and baseline', 'Decode speed per probe, (N-1)/(last token - first token), per scenario over the alert window (the recorded 10-minute series), against the target\'s floor (dashed) and the pinned baseline\'s median (dotted, where a baseline_file is set).', TPS,
      [
        q(REC('llm_probe_output_tokens_per_second:p05_10m'), 'P5 {{scenario}} {{location}}'),
        q(REC('llm_probe_output_tokens_per_second:p50_10m'), 'P50 {{scenario}} {{location}}'),
        tpsFloor, tpsBaseline,
      ], gp(9, 20, 9, 8), { overrides: [dashedRed('floor'), dottedBaseline], min: 0 }),
    stat('Success ratio (alert window)', 'Share of probes that succeeded over the last 10 minutes, the worst scenario of the target.', 'percentunit',
      `1 - max(${REC('llm_probe_probe_failures:ratio10m')})`,
      gp(18, 20, 3, 4), [{ color: 'red', value: null }, { color: 'orange', value: 0.9 }, { color: 'green', value: 0.99 }], { decimals: 1 }),
    stat('Oldest last-probe age', 'Seconds since the last probe finished, the oldest of the target\'s scenarios (one stuck scenario shows). Alert LlmProbeNoRecentProbe fires after max(10 min, 4 intervals).', 's',
      `time() - min(llm_probe_last_probe_timestamp_seconds{${s}})`,
      gp(21, 20, 3, 4), [{ color: 'green', value: null }, { color: 'orange', value: 120 }, { color: 'red', value: 600 }]),
    {
      type: 'table', id: nextId++, title: 'Current backend identity', datasource: DS, gridPos: gp(18, 24, 6, 4),
      description: 'What the backend reports about itself (llm_probe_endpoint_info). A change marks a model or framework upgrade.',
      fieldConfig: { defaults: { unit: 'none', custom: { align: 'auto', cellOptions: { type: 'auto' }, inspect: false } }, overrides: [] },
      options: { showHeader: true, cellHeight: 'sm', frameIndex: 0 },
      transformations: [{ id: 'organize', options: { excludeByName: { Time: true, Value: true }, indexByName: {}, renameByName: {} } }],
      targets: withRefIds([q('max by (response_model, system_fingerprint, server, server_version) (llm_probe_endpoint_info{target=~"$target",model=~"$model"})', '', { range: false, instant: true, format: 'table' })]),
    },
    timeseries('TTFT P95 by location and scenario vs SLO', 'P95 TTFT from each probe location (the `location` target label of the scrape config), per scenario, over the alert window (the recorded series), against the SLO (dashed). Slow from one location only: the network path from there (alert LlmProbeTTFTP95AboveSLOFromOneLocation); from most: the endpoint (LlmProbeTTFTP95AboveSLO).', 's',
      [q(REC('llm_probe_time_to_first_token_seconds:p95_10m'), 'P95 {{location}} {{scenario}}'), ttftSlo], gp(0, 28, 18, 6), { overrides: [dashedRed('SLO')], min: 0 }),
  ];
  return dashboard({
    uid: 'llm-probe-fleet', title: 'llm-probe / Fleet overview', tags: ['overview'], targetMulti: true, panels,
    description: 'Every target against its SLO on one screen (over the alert windows), the firing alerts, then one row per probed LLM endpoint: TTFT and decode speed per scenario, success ratio, oldest probe age and backend identity. Needs llm-probe-recording.rules.yml.',
  });
}

// ---- target detail ------------------------------------------------------------------------------
function detail() {
  nextId = 1;
  const s = SEL;
  const perProbe = (counter) => `sum by (scenario) (rate(${counter}{${s}}[$__rate_interval])) / sum by (scenario) (rate(llm_probe_probes_total{${s}}[$__rate_interval]))`;
  // The scenarios with a generated long prompt: those with prefill observations in the range.
  const longScenarios = `sum by (scenario) (increase(llm_probe_prefill_tokens_per_second_count{${s}}[$__range])) > 0`;
  const panels = [
    row('Latency', 0),
    timeseries('TTFT P50 / P95 / P99 by scenario', 'Time to first token (reasoning included) per scenario (never mixed across scenarios), against the SLO (dashed) and the pinned baseline\'s P95 per scenario (dotted, where a baseline_file is set).', 's',
      [...quantiles('llm_probe_time_to_first_token_seconds', s, 'scenario, ', 0.95), ttftSlo, ttftBaseline], gp(0, 1, 8, 8), { overrides: [dashedRed('SLO'), dottedBaseline], min: 0 }),
    timeseries('Time to first output token P50 / P95 / P99 by scenario', 'First non-reasoning token, per scenario. Equals TTFT for non-reasoning models; the gap is the thinking time.', 's',
      quantiles('llm_probe_time_to_first_output_token_seconds', s, 'scenario, '), gp(8, 1, 8, 8), { min: 0 }),
    timeseries('E2E request duration P50 / P95 / P99 by scenario', 'Request sent to stream end, per scenario.', 's',
      quantiles('llm_probe_request_duration_seconds', s, 'scenario, '), gp(16, 1, 8, 8), { min: 0 }),
    heatmap('TTFT heatmap', 'Probes per TTFT bucket per interval. A second band appearing means a bimodal TTFT (queueing, cold cache, a slow replica).', 's',
      'llm_probe_time_to_first_token_seconds', gp(0, 9, 12, 8), EXEMPLARS),
    heatmap('Inter-token latency heatmap', 'Every gap between consecutive token events. Stalls show as a band far above the rest.', 's',
      'llm_probe_inter_token_latency_seconds', gp(12, 9, 12, 8)),
    row('Decode', 17),
    timeseries('Time per output token P50 / P95 by scenario', 'TPOT = (last token - first token) / (N - 1), against the pinned baseline\'s P95 (dotted, where a baseline_file is set).', 's',
      [...[0.5, 0.95].map((p) => q(`histogram_quantile(${p}, sum by (scenario, le) (rate(llm_probe_time_per_output_token_seconds_bucket{${s}}[$__rate_interval])))`, `P${p * 100} {{scenario}}`)), tpotBaseline],
      gp(0, 18, 12, 8), { overrides: [dottedBaseline], min: 0 }),
    timeseries('Output tokens/s P5 / P50 by scenario vs floor', 'Decode speed per probe against the floor (dashed) and the pinned baseline\'s median (dotted, where a baseline_file is set; alert LlmProbeTokensPerSecondWorseThanBaseline).', TPS,
      [
        ...[0.05, 0.5].map((p) => q(`histogram_quantile(${p}, sum by (scenario, le) (rate(llm_probe_output_tokens_per_second_bucket{${s}}[$__rate_interval])))`, `P${Math.round(p * 100)} {{scenario}}`)),
        tpsFloor, tpsBaseline,
      ], gp(12, 18, 12, 8), { overrides: [dashedRed('floor'), dottedBaseline], min: 0 }),
    row('Failures and anomalies', 26),
    timeseries('Failed probes by reason', 'Failed probes per interval, by reason (fixed set: dns, connect, tls, timeout, http_status, http_protocol, stream_error, decode, truncated, empty_stream, too_large, credentials, wrong_answer, overloaded).', 'short',
      [q(`sum by (reason) (increase(llm_probe_probe_failures_total{${s}}[$__rate_interval])) > 0`, '{{reason}}')], gp(0, 27, 6, 8), { stack: true, bars: true, min: 0 }),
    timeseries('Stream anomalies by kind', 'Streams whose numbers are less trustworthy (collapsed_stream = a buffering proxy, missing_usage = N counted from events, …).', 'short',
      [q(`sum by (kind) (increase(llm_probe_stream_anomalies_total{${s}}[$__rate_interval])) > 0`, '{{kind}}')], gp(6, 27, 6, 8), { stack: true, bars: true, min: 0 }),
    timeseries('Wrong answers by check', 'Probes whose complete answer failed an answer check (reason wrong_answer), by check (fixed set: contains, regex, json, json_schema, min_output_tokens, max_output_tokens, repetition_loop, punctuation_only, special_tokens, empty_after_reasoning, tool_call_missing, tool_arguments; alert LlmProbeWrongAnswer).', 'short',
      [q(`sum by (scenario, check) (increase(llm_probe_answer_check_failures_total{${s}}[$__rate_interval])) > 0`, '{{scenario}} {{check}}')], gp(12, 27, 6, 8), { stack: true, bars: true, min: 0 }),
    timeseries('Success ratio by scenario', 'Share of probes that succeeded.', 'percentunit',
      [q(`1 - sum by (scenario) (rate(llm_probe_probe_failures_total{${s}}[$__rate_interval])) / sum by (scenario) (rate(llm_probe_probes_total{${s}}[$__rate_interval]))`, '{{scenario}}')],
      gp(18, 27, 6, 8), { min: 0 }),
    row('Tokens', 35),
    timeseries('Prompt tokens per probe by scenario', 'Prompt tokens as the server counted them. A step here without a config change means the chat template or tokenizer changed.', 'short',
      [q(perProbe('llm_probe_prompt_tokens_total'), '{{scenario}}')], gp(0, 36, 8, 8)),
    timeseries('Prefix-cache share of prompt tokens', 'Cached prompt tokens / prompt tokens, where the server reports them. Near 100 % means TTFT measures the cached path.', 'percentunit',
      [q(`sum by (scenario) (rate(llm_probe_prompt_cached_tokens_total{${s}}[$__rate_interval])) / sum by (scenario) (rate(llm_probe_prompt_tokens_total{${s}}[$__rate_interval]))`, '{{scenario}}')],
      gp(8, 36, 8, 8), { min: 0 }),
    timeseries('Output tokens per probe by scenario', 'Output tokens generated per probe (the probe\'s own spend).', 'short',
      [q(perProbe('llm_probe_output_tokens_total'), '{{scenario}}')], gp(16, 36, 8, 8), { min: 0 }),
    row('Server-side vs client timing', 44),
    timeseries('TTFT split: server prefill vs everything in front of it', 'Where the protocol reports the server\'s own prefill time (llama.cpp timings, Ollama prompt_eval_duration): the server\'s prefill and the overhead = TTFT - prefill (network, proxies, gateway queues). Empty for servers that report no timing.', 's',
      [0.5, 0.95].flatMap((p) => [
        q(`histogram_quantile(${p}, sum by (scenario, le) (rate(llm_probe_server_prefill_seconds_bucket{${s}}[$__rate_interval])))`, `server prefill P${p * 100} {{scenario}}`),
        q(`histogram_quantile(${p}, sum by (scenario, le) (rate(llm_probe_ttft_overhead_seconds_bucket{${s}}[$__rate_interval])))`, `overhead P${p * 100} {{scenario}}`),
      ]), gp(0, 45, 12, 8), { min: 0 }),
    timeseries('Connection setup (DNS, TCP, proxy, TLS)', 'Time to open the connection a probe used, part of its TTFT: every probe with connection: fresh (the default), only the ones that found no idle connection with connection: reuse. TTFT up with this up: a slow handshake, resolver or proxy, not the model.', 's',
      [0.5, 0.95].map((p) => q(`histogram_quantile(${p}, sum by (scenario, le) (rate(llm_probe_connection_setup_seconds_bucket{${s}}[$__rate_interval])))`, `setup P${p * 100} {{scenario}}`)),
      gp(12, 45, 12, 8), { min: 0 }),
    timeseries('TTFT split by component (mean, stacked)', 'Where the TTFT goes, from the server\'s own numbers (docs/measurement.md "TTFT split"): the mean of each component per probe, stacked: engine_queue (the engine\'s queue wait), model_load, engine_prefill, and the rest, outside_engine (network, proxies, the server\'s HTTP frontend) or unattributed (where the server does not report its queue). A probe\'s components sum to its TTFT, so the stack meets the mean TTFT (dashed) when every probe carries the split. The component that grows is the cause the TTFT alerts name (their cause annotation). Empty for servers that reveal no split (vLLM without --enable-per-request-metrics, OpenAI-compatible APIs).', 's',
      [
        q(`sum by (component) (rate(llm_probe_ttft_component_seconds_sum{${s}}[$__rate_interval])) / sum by (component) (rate(llm_probe_ttft_component_seconds_count{${s}}[$__rate_interval]))`, '{{component}}'),
        q(`sum(rate(llm_probe_time_to_first_token_seconds_sum{${s}}[$__rate_interval])) / sum(rate(llm_probe_time_to_first_token_seconds_count{${s}}[$__rate_interval]))`, 'mean TTFT'),
      ], gp(0, 53, 24, 8), {
        stack: true, min: 0,
        overrides: [{
          matcher: { id: 'byName', options: 'mean TTFT' },
          properties: [
            { id: 'custom.stacking', value: { mode: 'none', group: 'A' } },
            { id: 'custom.lineStyle', value: { fill: 'dash', dash: [10, 10] } },
            { id: 'custom.fillOpacity', value: 0 },
            { id: 'color', value: { mode: 'fixed', fixedColor: 'text' } },
          ],
        }],
      }),
    row('Probe locations', 61),
    timeseries('TTFT P95 by location vs SLO', 'P95 TTFT from each probe location (the `location` target label of the scrape config), summed over its shards, against the SLO (dashed). One location slow: its network path; all: the endpoint.', 's',
      [ttftByLocation(s), ttftSlo], gp(0, 62, 12, 8), { overrides: [dashedRed('SLO')], min: 0 }),
    timeseries('Connection setup P95 by location', 'Connection setup (DNS, TCP, proxy, TLS) from each probe location: the first thing to compare when one location sees a slower TTFT.', 's',
      [q(`histogram_quantile(0.95, sum by (location, le) (rate(llm_probe_connection_setup_seconds_bucket{${s}}[$__rate_interval])))`, 'setup P95 {{location}}')],
      gp(12, 62, 12, 8), { min: 0 }),
    row('Replicas (targets with replicas:)', 70),
    timeseries('TTFT P95 by replica', 'Each replica of the pool on its own (replicas:), the tooltip worst first. One line far above the others is the replica LlmProbeReplicaTTFTOutlier names; all lines up together is the pool (or the model), not a replica. Empty for a target without replicas:.', 's',
      [q(`histogram_quantile(0.95, sum by (replica, le) (rate(llm_probe_time_to_first_token_seconds_bucket{${s},replica!=""}[$__rate_interval])))`, '{{replica}}', EXEMPLARS)],
      gp(0, 71, 8, 8), { min: 0 }),
    timeseries('Failure ratio by replica', 'Share of each replica\'s probes that failed (alerts LlmProbeReplicaFailing, LlmProbeReplicaDown). Through the balancer a failing replica is a fraction of this.', 'percentunit',
      [q(`sum by (replica) (rate(llm_probe_probe_failures_total{${s},replica!=""}[$__rate_interval])) / sum by (replica) (rate(llm_probe_probes_total{${s},replica!=""}[$__rate_interval]))`, '{{replica}}')],
      gp(8, 71, 8, 8), { min: 0 }),
    {
      type: 'table', id: nextId++, title: 'Replicas, slowest first', datasource: DS, gridPos: gp(16, 71, 8, 8),
      description: 'Each replica\'s mean TTFT over its alert window (the recording rule the replica alerts read), slowest first, with what it runs (llm_probe_endpoint_info): during a rolling upgrade, old and new side by side (compare --by-identity judges them).',
      fieldConfig: { defaults: { unit: 's', custom: { align: 'auto', cellOptions: { type: 'auto' }, inspect: false } }, overrides: [] },
      options: { showHeader: true, cellHeight: 'sm', frameIndex: 0, sortBy: [{ displayName: 'mean TTFT', desc: true }] },
      transformations: [{ id: 'organize', options: { excludeByName: { Time: true }, indexByName: {}, renameByName: { Value: 'mean TTFT' } } }],
      targets: withRefIds([q(`sort_desc(max by (target, scenario, replica) (target_model_scenario_replica:llm_probe_time_to_first_token_seconds:mean_page_window{target=~"$target",scenario=~"$scenario"}) * on (target, replica) group_left (response_model, server_version) max by (target, replica, response_model, server_version) (llm_probe_endpoint_info{target=~"$target"}))`, '', { range: false, instant: true, format: 'table' })]),
    },
    row('Hosted API quota (rate-limit headers)', 79),
    timeseries('Rate-limit headroom by kind vs floor', 'The share of the key\'s rate-limit window left (remaining / limit), by kind, as the probes\' responses said (OpenAI\'s and Azure\'s x-ratelimit-*, Anthropic\'s anthropic-ratelimit-*): all traffic with the same key, not only the probes. Below the floor (dashed, slo.rate_limit_headroom_min) for 5 minutes, LlmProbeRateLimitHeadroomLow fires. Empty for servers that send no rate-limit headers.', 'percentunit',
      [q(`min by (kind) (llm_probe_rate_limit_remaining{target=~"$target"} / llm_probe_rate_limit_limit{target=~"$target"})`, '{{kind}}'),
        q(`max(llm_probe_slo_rate_limit_headroom_ratio{target=~"$target"})`, 'floor')],
      gp(0, 80, 12, 8), { overrides: [dashedRed('floor')], min: 0 }),
    timeseries('Overloaded and rate-limited probes', 'Probes the provider refused for capacity: reason overloaded (HTTP 529, overloaded_error) and HTTP 429 among http_status (llm_probe_retry_after_seconds > 0 marks the pair waiting out a Retry-After).', 'short',
      [q(`sum (increase(llm_probe_probe_failures_total{target=~"$target",reason="overloaded"}[$__rate_interval]))`, 'overloaded'),
        q(`max (llm_probe_retry_after_seconds{target=~"$target"})`, 'Retry-After (s)')],
      gp(12, 80, 12, 8), { min: 0 }),
    row('Long prompts (scenarios with prompt_tokens)', 88),
    {
      type: 'table', id: nextId++, title: 'TTFT against prompt length', datasource: DS, gridPos: gp(0, 89, 10, 8),
      description: 'Each scenario with a generated long prompt (prompt_tokens; those with prefill observations in the time range), shortest prompt first: the prompt tokens per probe as the server counted them, the TTFT P50 and P95 and the prefill speed P50 (prompt tokens per second of TTFT), over the dashboard\'s time range. Prefill is linear in the prompt, so a prefill regression shows as the longest prompts\' TTFT growing most; a prompt count far below the configured prompt_tokens is a server that cuts the prompt.',
      fieldConfig: {
        defaults: { unit: 'short', decimals: 0, custom: { align: 'auto', cellOptions: { type: 'auto' }, inspect: false } },
        overrides: [
          ...['TTFT P50', 'TTFT P95'].map((name) => ({ matcher: { id: 'byName', options: name }, properties: [{ id: 'unit', value: 's' }, { id: 'decimals', value: 3 }] })),
          { matcher: { id: 'byName', options: 'prefill P50' }, properties: [{ id: 'unit', value: TPS }] },
        ],
      },
      options: { showHeader: true, cellHeight: 'sm', frameIndex: 0, sortBy: [{ displayName: 'prompt tokens / probe', desc: false }] },
      transformations: [
        { id: 'merge', options: {} },
        {
          id: 'organize',
          options: {
            excludeByName: { Time: true },
            indexByName: { scenario: 0, 'Value #A': 1, 'Value #B': 2, 'Value #C': 3, 'Value #D': 4 },
            renameByName: { 'Value #A': 'prompt tokens / probe', 'Value #B': 'TTFT P50', 'Value #C': 'TTFT P95', 'Value #D': 'prefill P50' },
          },
        },
      ],
      targets: withRefIds([
        `sum by (scenario) (increase(llm_probe_prompt_tokens_total{${s}}[$__range])) / sum by (scenario) (increase(llm_probe_probes_total{${s}}[$__range])) and on (scenario) ${longScenarios}`,
        `histogram_quantile(0.5, sum by (scenario, le) (rate(llm_probe_time_to_first_token_seconds_bucket{${s}}[$__range]))) and on (scenario) ${longScenarios}`,
        `histogram_quantile(0.95, sum by (scenario, le) (rate(llm_probe_time_to_first_token_seconds_bucket{${s}}[$__range]))) and on (scenario) ${longScenarios}`,
        `histogram_quantile(0.5, sum by (scenario, le) (rate(llm_probe_prefill_tokens_per_second_bucket{${s}}[$__range])))`,
      ].map((expr) => q(expr, '', { range: false, instant: true, format: 'table' }))),
    },
    timeseries('Prefill speed P50 by scenario vs floor', 'Prompt tokens prefilled per second of TTFT (docs/measurement.md "Prefill speed"), median per long-prompt scenario: as the probe sees it (TTFT, so queueing and the network count), the median over 30 minutes that LlmProbePrefillBelowFloor compares with the floor (dashed, slo.prefill_tokens_per_second_min, where set), and by the server\'s own prefill time where it reports one (llama.cpp, Ollama, vLLM with per-request metrics). The server\'s line steady while the probe\'s falls: the time goes to the queue or in front of the engine, not to prefill.', TPS,
      [
        q(`histogram_quantile(0.5, sum by (scenario, le) (rate(llm_probe_prefill_tokens_per_second_bucket{${s}}[$__rate_interval])))`, 'P50 {{scenario}}'),
        q(`target_model_scenario:llm_probe_prefill_tokens_per_second:p50_30m{${s}}`, 'P50 30 min (the alert\'s) {{scenario}} {{location}}'),
        q(`histogram_quantile(0.5, sum by (scenario, le) (rate(llm_probe_server_prefill_tokens_per_second_bucket{${s}}[$__rate_interval])))`, 'server P50 {{scenario}}'),
        q('min(llm_probe_slo_prefill_tokens_per_second{target=~"$target",model=~"$model"})', 'floor'),
      ], gp(10, 89, 8, 8), { overrides: [dashedRed('floor')], min: 0 }),
    timeseries('Truncated long prompts', 'Probes of long-prompt scenarios whose prompt the server cut: prompt_truncated (the server counted fewer than three quarters of prompt_tokens; alert LlmProbePromptTruncated) and context_truncated (the answer lacks the code word from the prompt\'s start, a wrong answer; alert LlmProbeWrongAnswer). A prompt the server refuses instead fails with http_status (Failed probes by reason).', 'short',
      [
        q(`sum by (scenario) (increase(llm_probe_stream_anomalies_total{${s},kind="prompt_truncated"}[$__rate_interval])) > 0`, 'prompt_truncated {{scenario}}'),
        q(`sum by (scenario) (increase(llm_probe_answer_check_failures_total{${s},check="context_truncated"}[$__rate_interval])) > 0`, 'context_truncated {{scenario}}'),
      ], gp(18, 89, 6, 8), { bars: true, min: 0 }),
    row('Conversations (scenarios with turns)', 97),
    timeseries('TTFT P50 by turn', 'Median time to first token of each turn of a multi-turn probe (scenarios with turns; docs/configuration.md "Multi-turn conversations"), per scenario: turn 2 re-sends turn 1 and its answer, which a working prefix cache serves, so turn 2 should start faster than turn 1. Dashed: the 30-minute medians LlmProbeConversationCacheNotServing compares (turn 2 at or above 0.9 × turn 1, the mean too, and the server counting under 10 % of turn 2 as cached, or nothing). Turn 2 on top of turn 1: the cache does not serve the conversation.', 's',
      [
        q(`histogram_quantile(0.5, sum by (scenario, turn, le) (rate(llm_probe_turn_time_to_first_token_seconds_bucket{${s}}[$__rate_interval])))`, '{{scenario}} turn {{turn}}'),
        q(`target_model_scenario_turn:llm_probe_turn_time_to_first_token_seconds:p50_30m{${s}}`, 'P50 30 min (the alert\'s) {{scenario}} turn {{turn}} {{location}}'),
      ], gp(0, 98, 8, 8), { overrides: [dashedByRegexp('^P50 30 min .*')], min: 0 }),
    timeseries('Cached share of the prompt by turn', 'The share of each turn\'s prompt tokens that the server counted as served from its prefix cache (increase of llm_probe_turn_prompt_cached_tokens_total / increase of llm_probe_turn_prompt_tokens_total), per scenario. A working cache serves the earlier turns: turn 2 and later well above 0, turn 1 near 0 (a cold probe\'s nonce starts it). Under the line (10 %) on turn 2 with turn 2 no faster: LlmProbeConversationCacheNotServing. No line for a server that reports no cached count (TGI, Ollama, vLLM without --enable-prompt-tokens-details): read TTFT by turn.', 'percentunit',
      [
        q(`sum by (scenario, turn) (increase(llm_probe_turn_prompt_cached_tokens_total{${s}}[$__rate_interval])) / sum by (scenario, turn) (increase(llm_probe_turn_prompt_tokens_total{${s}}[$__rate_interval]))`, '{{scenario}} turn {{turn}}'),
      ], gp(8, 98, 6, 8), { min: 0, max: 1, lines: [[0.1, 'orange']] }),
    {
      type: 'table', id: nextId++, title: 'Conversations by turn', datasource: DS, gridPos: gp(14, 98, 10, 8),
      description: 'One row per scenario with turns and turn, over the dashboard\'s time range: the prompt tokens per probe that reached the turn (as the server counted them: the conversation so far, divided by the turn\'s successful requests), the share of them the server served from its prefix cache (empty where it reports none), the TTFT P50 and P95 and the output tokens/s P50 of the turn. A working cache: later turns\' prompts grow, their cached share with them, and their TTFT stays at or below turn 1\'s.',
      fieldConfig: {
        defaults: { unit: 'short', decimals: 0, custom: { align: 'auto', cellOptions: { type: 'auto' }, inspect: false } },
        overrides: [
          { matcher: { id: 'byName', options: 'cached share' }, properties: [{ id: 'unit', value: 'percentunit' }, { id: 'decimals', value: 1 }] },
          ...['TTFT P50', 'TTFT P95'].map((name) => ({ matcher: { id: 'byName', options: name }, properties: [{ id: 'unit', value: 's' }, { id: 'decimals', value: 3 }] })),
          { matcher: { id: 'byName', options: 'tokens/s P50' }, properties: [{ id: 'unit', value: TPS }, { id: 'decimals', value: 1 }] },
        ],
      },
      options: { showHeader: true, cellHeight: 'sm', frameIndex: 0, sortBy: [{ displayName: 'scenario', desc: false }] },
      transformations: [
        { id: 'merge', options: {} },
        {
          id: 'organize',
          options: {
            excludeByName: { Time: true },
            indexByName: { scenario: 0, turn: 1, 'Value #A': 2, 'Value #B': 3, 'Value #C': 4, 'Value #D': 5, 'Value #E': 6 },
            renameByName: { 'Value #A': 'prompt tokens / probe', 'Value #B': 'cached share', 'Value #C': 'TTFT P50', 'Value #D': 'TTFT P95', 'Value #E': 'tokens/s P50' },
          },
        },
      ],
      targets: withRefIds([
        `sum by (scenario, turn) (increase(llm_probe_turn_prompt_tokens_total{${s}}[$__range])) / sum by (scenario, turn) (increase(llm_probe_turn_time_to_first_token_seconds_count{${s}}[$__range]))`,
        `sum by (scenario, turn) (increase(llm_probe_turn_prompt_cached_tokens_total{${s}}[$__range])) / sum by (scenario, turn) (increase(llm_probe_turn_prompt_tokens_total{${s}}[$__range]))`,
        `histogram_quantile(0.5, sum by (scenario, turn, le) (rate(llm_probe_turn_time_to_first_token_seconds_bucket{${s}}[$__range])))`,
        `histogram_quantile(0.95, sum by (scenario, turn, le) (rate(llm_probe_turn_time_to_first_token_seconds_bucket{${s}}[$__range])))`,
        `histogram_quantile(0.5, sum by (scenario, turn, le) (rate(llm_probe_turn_output_tokens_per_second_bucket{${s}}[$__range])))`,
      ].map((expr) => q(expr, '', { range: false, instant: true, format: 'table' }))),
    },
  ];
  return dashboard({
    uid: 'llm-probe-target', title: 'llm-probe / Target detail', tags: ['detail'], targetMulti: false, panels,
    description: 'Everything llm-probe measures about one target: latency percentiles and heatmaps, decode speed, failures, anomalies and token counts.',
  });
}

// ---- regression ----------------------------------------------------------------------------------
function regression() {
  nextId = 1;
  const s = SEL;
  const p95 = `target_model_scenario:llm_probe_time_to_first_token_seconds:p95_1h{${s}}`;
  const tps = `target_model_scenario:llm_probe_output_tokens_per_second:p50_1h{${s}}`;
  const panels = [
    row('This week vs last week (needs llm-probe-recording.rules.yml)', 0),
    timeseries('TTFT P95 (1h): this week vs last week', 'Hourly P95 TTFT now (solid) and the same time a week earlier (dashed).', 's',
      [q(p95, '{{target}} {{scenario}} {{location}}'), q(`${p95} offset 1w`, '{{target}} {{scenario}} {{location}} last week')], gp(0, 1, 12, 9),
      { min: 0, overrides: [{ matcher: { id: 'byRegexp', options: '.* last week' }, properties: [{ id: 'custom.lineStyle', value: { fill: 'dash', dash: [10, 10] } }] }] }),
    timeseries('Output tokens/s median (1h): this week vs last week', 'Hourly median decode speed now (solid) and a week earlier (dashed).', TPS,
      [q(tps, '{{target}} {{scenario}} {{location}}'), q(`${tps} offset 1w`, '{{target}} {{scenario}} {{location}} last week')], gp(12, 1, 12, 9),
      { min: 0, overrides: [{ matcher: { id: 'byRegexp', options: '.* last week' }, properties: [{ id: 'custom.lineStyle', value: { fill: 'dash', dash: [10, 10] } }] }] }),
    timeseries('TTFT P95 (1h) change vs last week', 'This week\'s hourly P95 TTFT against last week\'s, as a change: +25 % (the red line) is where LlmProbeTTFTRegressionWeekOverWeek fires (with +50 ms).', 'percentunit',
      [q(`${p95} / (${p95} offset 1w) - 1`, '{{target}} {{scenario}} {{location}}')], gp(0, 10, 12, 8), { lines: [[0.25, 'red']] }),
    timeseries('Output tokens/s median (1h) change vs last week', 'This week\'s median decode speed against last week\'s, as a change: -20 % (the red line) is where LlmProbeTokensPerSecondRegressionWeekOverWeek fires.', 'percentunit',
      [q(`${tps} / (${tps} offset 1w) - 1`, '{{target}} {{scenario}} {{location}}')], gp(12, 10, 12, 8), { lines: [[-0.2, 'red']] }),
    row('By backend identity (annotations mark each change)', 18),
    timeseries('TTFT P95 (1h) by backend identity', 'One series per (response_model, system_fingerprint, server, server_version): before and after a model or framework upgrade side by side. The first hour after a change still mixes in probes of the old backend.', 's',
      [q(`target_model_scenario_backend:llm_probe_time_to_first_token_seconds:p95_1h{${s}}`, '{{target}} {{scenario}} {{location}} {{response_model}} {{server}} {{server_version}} {{system_fingerprint}}')],
      gp(0, 19, 24, 10), { min: 0 }),
  ];
  return dashboard({
    uid: 'llm-probe-regression', title: 'llm-probe / Regression', tags: ['regression'], targetMulti: true, panels,
    description: 'Regressions after model or framework upgrades: this week vs last week, and P95 TTFT per backend identity with an annotation at each change.',
  });
}

// ---- write / check ---------------------------------------------------------------------------------
const here = dirname(fileURLToPath(import.meta.url));
const out = {
  'llm-probe-fleet.json': fleet(),
  'llm-probe-target.json': detail(),
  'llm-probe-regression.json': regression(),
};
// The rule files (rules.mjs): the alerts' runbook_url / dashboard_url bases are options.
const arg = (name) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const rules = rulesFiles(here, { runbookBase: arg('--runbook-base'), dashboardBase: arg('--dashboard-base') });
for (const [name, text] of Object.entries(rules)) out[`../prometheus/${name}`] = text;
// Native-histogram variants (native.mjs): the dashboards that read classic buckets, and the
// recording rules, rewritten; the regression dashboard reads recorded series only, the alerts
// read recorded series only.
out['llm-probe-fleet-native.json'] = nativeDashboard(out['llm-probe-fleet.json']);
out['llm-probe-target-native.json'] = nativeDashboard(out['llm-probe-target.json']);
out['../prometheus/llm-probe-recording-native.rules.yml'] =
  nativeRules(rules['llm-probe-recording.rules.yml'], 'llm-probe-recording.rules.yml');
// --out DIR: write only the rule files there (e.g. with your own --runbook-base), not the repo's.
const outDir = arg('--out');
if (outDir) {
  for (const [name, text] of Object.entries(out)) {
    if (name.startsWith('../prometheus/')) writeFileSync(join(outDir, name.slice('../prometheus/'.length)), text);
  }
  process.exit(0);
}
const check = process.argv.includes('--check');
let stale = [];
for (const [name, dash] of Object.entries(out)) {
  const path = join(here, 'grafana', name);
  const text = typeof dash === 'string' ? dash : JSON.stringify(dash, null, 2) + '\n';
  if (check) {
    let old = '';
    try { old = readFileSync(path, 'utf8'); } catch { /* missing */ }
    if (old !== text) stale.push(path);
  } else {
    writeFileSync(path, text);
  }
}
if (stale.length) {
  console.error(`out of date (run \`node dashboards/build.mjs\`): ${stale.join(', ')}`);
  process.exit(1);
}
