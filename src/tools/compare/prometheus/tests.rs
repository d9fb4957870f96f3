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
    assert_eq!((c.old_since, c.last_old, c.first_new), (1.0, 4.0, 6.0));
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
    assert_eq!((c.old_since, c.last_old, c.first_new), (4.0, 6.0, 9.0));
    // A → B → C: the BEFORE window of the last change (B → C) must not reach back into A.
    let series = [
        info("A", &[1.0, 2.0]),
        info("B", &[3.0, 4.0, 5.0]),
        info("C", &[7.0, 8.0]),
    ];
    let c = change_in(&series).unwrap();
    assert_eq!((c.old_since, c.last_old, c.first_new), (3.0, 5.0, 7.0));
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
fn identities_are_listed_per_window() {
    let series = [info("A", &[1.0, 2.0, 3.0]), info("B", &[4.0, 5.0])];
    let names = |ids: Vec<Identity>| -> Vec<String> {
        ids.iter()
            .map(|id| {
                id.iter()
                    .find(|(k, _)| k == "response_model")
                    .unwrap()
                    .1
                    .clone()
            })
            .collect()
    };
    assert_eq!(names(identities_in(&series, 0.0, 3.0)), ["A"]);
    assert_eq!(names(identities_in(&series, 2.0, 5.0)), ["A", "B"]);
    assert_eq!(names(identities_in(&series, 3.0, 5.0)), ["B"]);
    assert!(identities_in(&series, 5.0, 9.0).is_empty());
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
    // Debug output too (it printed the URL whole).
    let debug = format!("{c:?}");
    assert!(
        !debug.contains("hunter2") && !debug.contains("s3cret") && debug.contains("127.0.0.1:9090"),
        "{debug}"
    );
}

/// A one-shot HTTP server on loopback answering `status` and `body` to the first request; returns
/// its URL and a handle yielding the request line it received.
async fn answer_once(
    status: &'static str,
    body: &'static str,
) -> (String, tokio::task::JoinHandle<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let handle = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 8192];
        let n = stream.read(&mut buf).await.unwrap();
        let request = String::from_utf8_lossy(&buf[..n]).into_owned();
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(response.as_bytes()).await.unwrap();
        request.lines().next().unwrap_or_default().to_string()
    });
    (url, handle)
}

#[tokio::test]
async fn prometheus_errors_carry_its_own_text_the_query_and_the_url() {
    let (url, request) = answer_once(
        "422 Unprocessable Entity",
        r#"{"status":"error","errorType":"execution","error":"query processing would load too many samples into memory"}"#,
    )
    .await;
    let client = Client::new(
        &format!("{url}/prom/?tenant=s3cret"),
        Duration::from_secs(5),
    )
    .unwrap();
    let e = client
        .samples(r#"llm_probe_endpoint_info{target="sim"}"#, 60.0, 1000.0)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("too many samples") && e.contains("execution"),
        "{e}"
    );
    assert!(
        e.contains(r#"llm_probe_endpoint_info{target=\"sim\"}[60000ms]"#),
        "{e}"
    );
    assert!(
        e.contains("/prom/?tenant=***") && !e.contains("s3cret"),
        "{e}"
    );
    // The request: the API path under the URL's prefix, the user's query kept, ours added.
    let line = request.await.unwrap();
    assert!(
        line.starts_with("GET /prom/api/v1/query?tenant=s3cret&query="),
        "{line}"
    );
    assert!(line.contains("&time=1000.000"), "{line}");
}

#[tokio::test]
async fn range_query_answers_are_parsed() {
    let (url, _) = answer_once(
        "200 OK",
        r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"le":"+Inf","scenario":"chat"},"values":[[10.5,"3"],[11.5,"4"]]}]}}"#,
    )
    .await;
    let client = Client::new(&url, Duration::from_secs(5)).unwrap();
    let series = client.samples("m", 2.0, 11.5).await.unwrap();
    assert_eq!(series.len(), 1);
    assert_eq!(series[0].labels["le"], "+Inf");
    assert_eq!(series[0].samples, vec![(10.5, 3.0), (11.5, 4.0)]);
}

#[test]
fn a_replica_set_is_matched_exactly_whatever_its_labels_hold() {
    let replicas = ["10.0.0.1:80".to_string(), "[::1]:80".to_string()];
    assert_eq!(
        selector_of("m", "sim", None, Some(&replicas)),
        r#"m{target="sim",replica=~"10\\.0\\.0\\.1:80|\\[::1\\]:80"}"#
    );
    assert_eq!(regex_escape(r"a.b*c|d(e)^$\"), r"a\.b\*c\|d\(e\)\^\$\\");
}

fn on_replica(model: &str, replica: &str, times: &[f64]) -> Series {
    let mut s = info(model, times);
    s.labels.insert("replica".into(), replica.into());
    s
}

#[test]
fn replicas_are_grouped_by_what_they_ran_last_in_the_window_oldest_identity_first() {
    let series = [
        // r1 ran v1 throughout; r2 was upgraded to v2 at t = 50; r3 ran v2 only before the
        // window; the target-level series (no replica) is not a replica.
        on_replica("v1", "r1", &[10.0, 60.0, 90.0]),
        on_replica("v1", "r2", &[10.0, 40.0]),
        on_replica("v2", "r2", &[50.0, 90.0]),
        on_replica("v2", "r3", &[20.0]),
        info("v3", &[5.0, 95.0]),
    ];
    let groups = groups_by_identity(&series, 30.0, 100.0);
    let shown: Vec<(String, Vec<String>, f64)> = groups
        .iter()
        .map(|g| {
            let model = g.identity.iter().find(|(k, _)| k == "response_model");
            (model.unwrap().1.clone(), g.replicas.clone(), g.first_seen)
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("v1".into(), vec!["r1".to_string()], 10.0),
            ("v2".into(), vec!["r2".to_string()], 20.0),
        ]
    );
    assert!(groups_by_identity(&series, 200.0, 300.0).is_empty());
}
