use super::*;

#[test]
fn increase_counts_whole_observations_with_resets_as_prometheus() {
    let s = [
        (10.0, 5.0),
        (20.0, 7.0),
        (30.0, 9.0),
        (40.0, 2.0),
        (50.0, 4.0),
    ];
    // Baseline: the sample at the start (10 s, value 5); rises 2, 2; reset to 2 counts 2; rise 2.
    assert_eq!(increase(&s, 10.0, 50.0), Some(8.0));
    // Adjacent windows split the observations exactly.
    assert_eq!(increase(&s, 10.0, 30.0), Some(4.0));
    assert_eq!(increase(&s, 30.0, 50.0), Some(4.0));
    // A series born inside the window: its first sample is the baseline.
    assert_eq!(increase(&s, 0.0, 30.0), Some(4.0));
    // No sample in the window.
    assert_eq!(increase(&s, 50.0, 60.0), None);
}

#[test]
fn selectors_escape_label_values() {
    assert_eq!(
        selector("m", "a\"b\\c", Some("chat")),
        r#"m{target="a\"b\\c",scenario="chat"}"#
    );
    assert_eq!(selector("m", "sim", None), r#"m{target="sim"}"#);
}

fn info(model: &str, times: &[f64]) -> Series {
    let labels = [
        ("__name__", "llm_probe_endpoint_info"),
        ("target", "sim"),
        ("model", "sim-model"),
        ("response_model", model),
        ("server", ""),
        ("instance", "127.0.0.1:1"),
    ];
    Series {
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        samples: times.iter().map(|&t| (t, 1.0)).collect(),
    }
}

#[test]
fn the_change_lies_between_the_old_sets_last_and_the_new_sets_first_sample() {
    let series = [
        info("A", &[1.0, 2.0, 3.0, 4.0]),
        info("B", &[6.0, 7.0, 8.0]),
    ];
    let c = change_in(&series).unwrap();
    assert_eq!((c.last_old, c.first_new), (4.0, 6.0));
    let resp = |id: &Identity| {
        id.iter()
            .find(|(k, _)| k == "response_model")
            .unwrap()
            .1
            .clone()
    };
    assert_eq!((resp(&c.old), resp(&c.new)), ("A".into(), "B".into()));
    // Empty labels and labels Prometheus adds are not part of the identity.
    assert!(!c.new.iter().any(|(k, _)| k == "server" || k == "instance"));
    // A → B → A: the last change, back to A.
    let series = [
        info("A", &[1.0, 2.0, 9.0, 10.0]),
        info("B", &[4.0, 5.0, 6.0]),
    ];
    let c = change_in(&series).unwrap();
    assert_eq!((c.last_old, c.first_new), (6.0, 9.0));
    // One replica of two switched to another series of the same identity: still no change.
    let series = [info("A", &[1.0, 2.0]), info("A", &[3.0, 4.0])];
    assert!(matches!(
        change_in(&series),
        Err(NoChange::Unchanged { since: 1.0, .. })
    ));
    assert_eq!(change_in(&[]), Err(NoChange::NoSeries));
    // Both still current at the end: replicas disagree.
    let series = [info("A", &[1.0, 5.0]), info("B", &[2.0, 5.0])];
    assert!(matches!(
        change_in(&series),
        Err(NoChange::Concurrent { .. })
    ));
}

#[test]
fn a_url_without_http_is_refused_and_redacted() {
    let e = Client::new("ftp://user:hunter2@host/", Duration::from_secs(1)).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("--prometheus.url") && !text.contains("hunter2"),
        "{text}"
    );
    assert!(Client::new("not a url", Duration::from_secs(1)).is_err());
    let c = Client::new(
        "http://u:hunter2@127.0.0.1:9090/prom?token=s3cret",
        Duration::from_secs(1),
    )
    .unwrap();
    assert!(!c.shown_url().contains("hunter2") && !c.shown_url().contains("s3cret"));
}
