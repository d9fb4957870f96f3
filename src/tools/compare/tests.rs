use super::input::{parse_run, Identity, RunKind};
use super::*;

fn run(scenario: &str, ttfts: &[f64], fingerprint: &str) -> Run {
    let requests: Vec<String> = ttfts
        .iter()
        .map(|t| format!(r#"{{"level":0,"ok":true,"ttft_seconds":{t},"tpot_seconds":0.02}}"#))
        .collect();
    parse_run(
        std::path::Path::new("x.json"),
        &format!(
            r#"{{"schema":"llm-probe.bench/v1","metadata":{{"target":"t","model":"m",
               "scenario":"{scenario}","max_tokens":64,
               "endpoint":{{"system_fingerprint":"{fingerprint}"}}}},
               "levels":[{{"concurrency":1}},{{"concurrency":8}}],"requests":[{}]}}"#,
            requests.join(",")
        ),
    )
    .unwrap()
}

fn spread(n: usize, scale: f64) -> Vec<f64> {
    (0..n)
        .map(|i| scale * (0.15 + 0.1 * (i as f64 / n as f64)))
        .collect()
}

#[test]
fn regression_row_and_failure_row() {
    let b = run("s", &spread(100, 1.0), "a");
    let a = run("s", &spread(100, 1.3), "b");
    let c = compare(&b, &a, &Options::default()).unwrap();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(c.levels.len(), 2);
    let ttft = &c.levels[0].rows[0];
    assert_eq!(ttft.metric, Metric::Ttft);
    assert_eq!(ttft.verdict, Some(Verdict::Regression));
    let e = ttft.evidence.unwrap();
    assert!((e.change - 0.3).abs() < 0.03, "{}", e.change);
    // TPOT identical: no change; the level without requests has no rows, failure test n/a.
    assert_eq!(c.levels[0].rows[1].verdict, Some(Verdict::NoChange));
    assert!(c.levels[1].rows.is_empty());
    assert!(c.levels[1].failures.test.is_none());
    assert!(c.has_regression());
}

#[test]
fn refusal_names_every_difference_and_force_warns() {
    let b = run("short", &spread(10, 1.0), "a");
    let mut a = run("long", &spread(10, 1.0), "b");
    a.max_tokens = Some(serde_json::json!(256));
    let e = compare(&b, &a, &Options::default()).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("scenario short vs long"), "{text}");
    assert!(text.contains("max_tokens 64 vs 256"), "{text}");
    assert!(text.contains("--force"), "{text}");
    let forced = compare(
        &b,
        &a,
        &Options {
            force: true,
            ..Options::default()
        },
    )
    .unwrap();
    assert!(forced.warnings[0].contains("--force"));
}

#[test]
fn unchanged_identity_is_warned_and_levels_matched_by_key() {
    let b = run("s", &spread(10, 1.0), "same");
    let mut a = run("s", &spread(10, 1.0), "same");
    a.levels.remove(1);
    let c = compare(&b, &a, &Options::default()).unwrap();
    assert!(c.warnings.iter().any(|w| w.contains("did not change")));
    assert_eq!(c.unmatched, vec!["concurrency 8 (BEFORE only)".to_string()]);
    // An unknown identity is not "unchanged".
    let (mut b2, mut a2) = (b.clone(), a.clone());
    b2.identity = Identity::default();
    a2.identity = Identity::default();
    assert!(compare(&b2, &a2, &Options::default())
        .unwrap()
        .warnings
        .is_empty());
    assert_eq!(b.kind, RunKind::Bench);
}

#[test]
fn selection_only_for_different_endpoints() {
    let b = run("s", &spread(50, 1.0), "a");
    let mut a = run("s", &spread(50, 1.0), "b");
    assert!(compare(&b, &a, &Options::default())
        .unwrap()
        .selection
        .is_none());
    a.model = Some("other".into());
    let s = compare(&b, &a, &Options::default())
        .unwrap()
        .selection
        .unwrap();
    assert_eq!(s.lengths.len(), selection::TYPICAL_LENGTHS.len());
    // Same TPOT: no crossover.
    assert!(s.crossover.is_none());
}

#[test]
fn prompt_sizes_within_five_percent_are_the_same() {
    let (mut b, mut a) = (run("s", &[0.2], "x"), run("s", &[0.2], "y"));
    b.prompt_tokens = Some(serde_json::json!(100));
    a.prompt_tokens = Some(serde_json::json!(104));
    assert!(compare(&b, &a, &Options::default()).is_ok());
    a.prompt_tokens = Some(serde_json::json!(200));
    let e = compare(&b, &a, &Options::default()).unwrap_err();
    assert!(e.to_string().contains("prompt tokens 100 vs 200"), "{e}");
    // Unknown on one side: nothing to check.
    a.prompt_tokens = None;
    assert!(compare(&b, &a, &Options::default()).is_ok());
}

#[test]
fn no_common_level_is_an_error_not_an_empty_success() {
    let b = run("s", &spread(10, 1.0), "a");
    let mut a = run("s", &spread(10, 1.0), "b");
    for l in &mut a.levels {
        l.key = LevelKey::Rate(2.0);
    }
    let e = compare(&b, &a, &Options::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("BEFORE has concurrency 1, concurrency 8; AFTER has rate 2/s, rate 2/s"),
        "{e}"
    );
    assert!(
        e.contains("same --concurrency, --rate or --prompt-tokens"),
        "{e}"
    );
}

#[test]
fn a_side_with_no_request_is_refused_not_judged() {
    let b = run("s", &spread(10, 1.0), "a");
    let a = run("s", &[], "b");
    let e = compare(&b, &a, &Options::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("nothing to compare: AFTER has no request"),
        "{e}"
    );
    let e = compare(&a, &a, &Options::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("BEFORE and AFTER"), "{e}");
}

#[test]
fn option_parsers() {
    assert_eq!(parse_threshold("10%"), Ok(0.1));
    assert_eq!(parse_threshold("0.05"), Ok(0.05));
    assert!(parse_threshold("-1%").is_err());
    assert!(parse_threshold("ten").unwrap_err().contains("10%"));
    assert_eq!(parse_alpha("0.01"), Ok(0.01));
    assert!(parse_alpha("0.7").is_err());
}

/// Level summaries that contradict the file's requests, a level listed
/// twice, or a rate that is not a positive number are refused: they were trusted (and a file
/// whose summaries claimed requests it did not hold compared as "no regression").
#[test]
fn level_counts_that_contradict_the_records_are_refused() {
    let file = |levels: &str, requests: &str| {
        parse_run(
            std::path::Path::new("x.json"),
            &format!(
                r#"{{"schema":"llm-probe.bench/v1","metadata":{{"target":"t","model":"m","scenario":"s"}},
                   "levels":[{levels}],"requests":[{requests}]}}"#
            ),
        )
    };
    let ok = r#"{"level":0,"ok":true,"ttft_seconds":0.1}"#;
    let failed = r#"{"level":0,"ok":false,"reason":"timeout"}"#;
    let both = format!("{ok},{failed}");
    file(
        r#"{"concurrency":1,"requests":{"sent":2,"failed":1}}"#,
        &both,
    )
    .unwrap();
    for (levels, requests, needle) in [
        (
            r#"{"concurrency":1,"requests":{"sent":1,"failed":5}}"#,
            ok,
            "failed",
        ),
        (
            r#"{"concurrency":1,"requests":{"sent":100,"failed":0}}"#,
            "",
            "100",
        ),
        (
            r#"{"concurrency":1,"requests":{"sent":2,"failed":0}}"#,
            both.as_str(),
            "contradict",
        ),
        (r#"{"concurrency":1},{"concurrency":1}"#, ok, "twice"),
        (r#"{"rate":-2}"#, ok, "rate"),
        (r#"{"rate":0}"#, ok, "rate"),
    ] {
        let e = file(levels, requests).unwrap_err();
        assert!(e.contains(needle), "{levels} {requests}: {e}");
    }
}

/// A bench run with `sla_capacity` (capacity `capacity`, broken at `broken` by TTFT P95,
/// straddling there when `straddles`) and one level of TTFTs `ttfts` at concurrency 1 (the
/// first output token equal to TTFT, or 10 ms later when `reasoning`).
fn sla_run(capacity: Option<u64>, broken: Option<u64>, straddles: bool, reasoning: bool) -> Run {
    let requests: Vec<String> = spread(60, 1.0)
        .iter()
        .map(|t| {
            let first_output = if reasoning { t + 0.01 } else { *t };
            format!(
                r#"{{"level":0,"ok":true,"ttft_seconds":{t},
                   "time_to_first_output_token_seconds":{first_output}}}"#
            )
        })
        .collect();
    let key = |c: Option<u64>| match c {
        Some(c) => format!(r#"{{"concurrency":{c},"rate":null}}"#),
        None => "null".into(),
    };
    let straddle = match (straddles, broken) {
        (true, Some(b)) => {
            format!(r#"[{{"concurrency":{b},"rate":null,"criteria":["ttft_p95"]}}]"#)
        }
        _ => "[]".into(),
    };
    parse_run(
        std::path::Path::new("x.json"),
        &format!(
            r#"{{"schema":"llm-probe.bench/v1","metadata":{{"target":"t","model":"m",
               "scenario":"s","max_tokens":64,"slo":{{"ttft_p95_seconds":0.3,
               "output_tokens_per_second_min":30,"max_failure_ratio":0.01}}}},
               "levels":[{{"concurrency":1}}],"requests":[{}],
               "sla_capacity":{{"concurrency":{},"rate":null,"broken_at":{},
               "broken_by":["ttft_p95"],"straddles":{straddle}}}}}"#,
            requests.join(","),
            capacity.map_or("null".into(), |c| c.to_string()),
            key(broken),
        ),
    )
    .unwrap()
}

#[test]
fn an_sla_capacity_drop_is_a_regression_on_its_own() {
    let before = sla_run(Some(4), Some(8), false, false);
    let after = sla_run(None, Some(1), false, false);
    let c = compare(&before, &after, &Options::default()).unwrap();
    let cap = c.capacity.as_ref().unwrap();
    assert_eq!(
        (cap.before, cap.after),
        (Some(LevelKey::Concurrency(4)), None)
    );
    assert_eq!(cap.verdict, Verdict::Regression);
    assert_eq!(cap.after_broken_by, vec!["TTFT P95 > 300 ms".to_string()]);
    assert!(!cap.after_straddles);
    // The samples are the same: only the capacity regressed, and that is enough.
    assert!(c.levels[0]
        .rows
        .iter()
        .all(|r| r.verdict != Some(Verdict::Regression)));
    assert!(c.has_regression());
    assert_eq!(c.exit_status(false), 1);
    let text = report::to_text(&c, &before, &after);
    assert!(text.starts_with("REGRESSION: "), "{text}");
    assert!(text.contains("SLA capacity 4 → none"), "{text}");
    assert!(
        text.contains("AFTER breaks the SLA at concurrency 1: TTFT P95 > 300 ms."),
        "{text}"
    );
    // A rise is an improvement; the same capacity is `~`; a drop where AFTER's interval
    // crosses the objective says so.
    let c = compare(&after, &before, &Options::default()).unwrap();
    assert_eq!(c.capacity.unwrap().verdict, Verdict::Improvement);
    let c = compare(&before, &before, &Options::default()).unwrap();
    assert_eq!(c.capacity.unwrap().verdict, Verdict::NoChange);
    let shaky = sla_run(Some(2), Some(4), true, false);
    let c = compare(&before, &shaky, &Options::default()).unwrap();
    let cap = c.capacity.as_ref().unwrap();
    assert!(cap.after_straddles && cap.verdict == Verdict::Regression);
    assert!(report::to_text(&c, &before, &shaky).contains("the knee is not established"));
}

#[test]
fn the_first_output_token_row_only_where_it_differs_from_ttft() {
    let plain = sla_run(Some(4), None, false, false);
    let c = compare(&plain, &plain, &Options::default()).unwrap();
    assert!(c.levels[0]
        .rows
        .iter()
        .all(|r| r.metric != Metric::TimeToFirstOutputToken));
    let reasoning = sla_run(Some(4), None, false, true);
    let c = compare(&reasoning, &reasoning, &Options::default()).unwrap();
    assert!(c.levels[0]
        .rows
        .iter()
        .any(|r| r.metric == Metric::TimeToFirstOutputToken));
}

#[test]
fn inconclusive_rows_exit_3_only_when_asked() {
    // 6 requests per side: intervals far wider than ±10 %.
    let b = run("s", &spread(6, 1.0), "a");
    let a = run("s", &spread(6, 1.02), "b");
    let c = compare(&b, &a, &Options::default()).unwrap();
    assert!(!c.inconclusive().is_empty());
    assert!(!c.has_regression());
    assert_eq!(c.exit_status(false), 0);
    assert_eq!(c.exit_status(true), EXIT_INCONCLUSIVE);
    let text = report::to_text(&c, &b, &a);
    assert!(text.starts_with("INCONCLUSIVE: "), "{text}");
    assert!(text.contains("\nINCONCLUSIVE: "), "the banner: {text}");
    let json = report::to_json(&c, &b, &a);
    assert_eq!(json["inconclusive"], true);
    assert_eq!(json["exit_status"], 0);
}

/// The JSON reports name each metric's object as the daemon's metrics ([`Metric::json_name`]).
#[test]
fn every_metric_has_its_json_name_in_the_reports() {
    let mut m = report::PerMetric::default();
    for metric in Metric::ALL {
        m.set(metric, metric.label());
    }
    let v = serde_json::to_value(&m).unwrap();
    assert_eq!(v.as_object().unwrap().len(), Metric::ALL.len(), "{v}");
    for metric in Metric::ALL {
        assert_eq!(v[metric.json_name()], metric.label(), "{v}");
    }
    let none = serde_json::to_value(report::PerMetric::<u8>::default()).unwrap();
    assert_eq!(
        none.as_object().map(|o| o.len()),
        Some(0),
        "a metric without a row is absent"
    );
}

/// A prompt-length sweep's run: levels keyed by `prompt_tokens_sent`, 20 requests each with
/// the server's count `counted[level]` and a TTFT of `ttft` per 1,000 tokens (1 % apart); its
/// SLA capacity is its first level.
fn prompt_run(sizes: &[u64], counted: &[u64], ttft: f64, first_prompt: u64) -> Run {
    let levels: Vec<String> = (sizes.iter())
        .map(|t| format!(r#"{{"concurrency":1,"prompt_tokens_sent":{t}}}"#))
        .collect();
    let requests: Vec<String> = (0..sizes.len())
        .flat_map(|i| {
            (0..20).map(move |k| {
                let t = ttft * sizes[i] as f64 / 1000.0 * (1.0 + 0.01 * k as f64);
                format!(
                    r#"{{"level":{i},"ok":true,"ttft_seconds":{t},"prompt_tokens":{}}}"#,
                    counted[i]
                )
            })
        })
        .collect();
    parse_run(
        std::path::Path::new("p.json"),
        &format!(
            r#"{{"schema":"llm-probe.bench/v1","metadata":{{"target":"t","model":"m",
               "scenario":"s","max_tokens":64,"prompt_tokens":{first_prompt}}},
               "levels":[{}],"requests":[{}],
               "sla_capacity":{{"concurrency":1,"prompt_tokens_sent":{}}}}}"#,
            levels.join(","),
            requests.join(","),
            sizes[0]
        ),
    )
    .unwrap()
}

#[test]
fn prompt_length_sweeps_are_matched_per_size() {
    let b = prompt_run(&[256, 1000, 4000], &[258, 1002, 4002], 0.2, 258);
    // AFTER starts at 1000: its first level's count is not a setup difference.
    let a = prompt_run(&[1000, 4000], &[1002, 4400], 0.3, 1002);
    assert_eq!(b.levels[0].key, LevelKey::PromptTokens(256));
    assert_eq!(b.levels[0].counted_prompt(), Some(258.0));
    let c = compare(&b, &a, &Options::default()).unwrap();
    let keys: Vec<LevelKey> = c.levels.iter().map(|l| l.key).collect();
    assert_eq!(
        keys,
        [LevelKey::PromptTokens(1000), LevelKey::PromptTokens(4000)]
    );
    assert_eq!(c.unmatched, ["prompt 256 tokens (BEFORE only)"]);
    assert_eq!(c.levels[0].rows[0].verdict, Some(Verdict::Regression));
    // The same 4,000 words counted 10 % higher: said, not refused.
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert!(
        c.warnings[0].starts_with(
            "at prompt 4000 tokens the server counted 4002 tokens BEFORE and 4400 AFTER"
        ),
        "{:?}",
        c.warnings
    );
    // The capacities (each file's first level) are prompt lengths, ranked by size.
    let cap = c.capacity.unwrap();
    assert_eq!(
        (cap.before, cap.after, cap.verdict),
        (
            Some(LevelKey::PromptTokens(256)),
            Some(LevelKey::PromptTokens(1000)),
            Verdict::Improvement
        )
    );
    // A load sweep shares no level with it.
    let load = run("s", &spread(10, 1.0), "x");
    let e = compare(&load, &a, &Options::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("AFTER has prompt 1000 tokens, prompt 4000 tokens"),
        "{e}"
    );
}
