//! The status pages in a real browser (Debian `chromium`, headless), for a fleet with a pair in
//! each state (the simulator's fault injection and a dead port):
//!
//! - at 400, 1400 and 1920 px wide, no element of the overview, the wall view or a target page
//!   is wider than the viewport (or sticks out of it), and chart labels stay legible;
//! - the cards come worst first with the states the API gives, the failure reason is visible on
//!   down cards without any interaction, and the summary bar's counts are the API's;
//! - the API, the status badges and the page agree on every pair's state;
//! - behind `--web.route-prefix /llm`, every link of every page resolves (a crawl);
//! - the wall view fits 50 pairs on 1920×1080.
//!
//! How it measures: the pages have no script (and their CSP forbids one), so the test serves a
//! harness page from a small loopback proxy in front of the daemon (which drops the CSP). The
//! harness loads a status page in an `<iframe>` of exactly the width and height under test
//! (Chromium's headless window is at least 500 px wide, an iframe has no such minimum), measures
//! it from the parent when everything has loaded, and writes the numbers into its own DOM, which
//! `chromium --dump-dom` prints. The pages themselves are also loaded directly, under their
//! real CSP, for the screenshots (`LLM_PROBE_SCREENSHOTS=docs` writes them into `docs/`).

use crate::common;
use common::ScriptExt;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::Full;
use llm_probe::daemon::Daemon;
use llm_probe::history::RecentProbe;
use llm_probe::measure::FailureReason;
use llm_probe::server::{ServerOptions, WebUrls};
use llm_probe::simulate::{Fault, Simulator};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

fn target(name: &str, base_url: &str, extra: &str) -> String {
    format!(
        "  - name: {name}\n    protocol: openai-chat\n    base_url: {base_url}\n    model: m\n{extra}"
    )
}

/// The probes file: one scenario `chat`, 1 s interval and timeout unless `targets` say.
fn probes_file(targets: &[String]) -> String {
    format!(
        "defaults:\n  interval: 1s\n  timeout: 1s\nscenarios:\n{}targets:\n{}",
        common::scenario("chat", 8),
        targets.concat()
    )
}

/// A loopback port with nothing listening.
fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// The fleet: down (refused; HTTP 500), failing (served, then gone), breached (40 ms TTFT
/// against a 20 ms objective), ok, no data (no answer within its 1 h timeout).
struct Fleet {
    daemon: Daemon,
    _sims: Vec<Simulator>,
}

async fn fleet(options: ServerOptions) -> Fleet {
    let http500 = common::simulator(
        common::stream(5, 3, 8)
            .model("fleet-model")
            .fault(Fault::Http500),
    )
    .await;
    let flaky = common::simulator(
        common::stream(5, 3, 8)
            .model("fleet-model")
            .fault(Fault::None),
    )
    .await;
    let slow = common::simulator(
        common::stream(40, 3, 8)
            .model("fleet-model")
            .fault(Fault::None),
    )
    .await;
    let fast = common::simulator(
        common::stream(5, 3, 8)
            .model("fleet-model")
            .fault(Fault::None),
    )
    .await;
    let silent = common::simulator(
        common::stream(5, 3, 8)
            .model("fleet-model")
            .fault(Fault::NoHeaders),
    )
    .await;
    let targets = vec![
        target(
            "api-dead",
            &format!("http://127.0.0.1:{}/v1", dead_port()),
            "",
        ),
        target("api-500", &http500.base_url(), ""),
        target("api-flaky", &flaky.base_url(), ""),
        // 2 s to finish a probe: a busy machine must not turn them into failures.
        target(
            "api-slow",
            &slow.base_url(),
            "    slo: {ttft_p95: 20ms}\n    interval: 2s\n    timeout: 2s\n",
        ),
        target(
            "api-ok",
            &fast.base_url(),
            "    slo: {ttft_p95: 5s}\n    interval: 2s\n    timeout: 2s\n",
        ),
        target(
            "api-new",
            &silent.base_url(),
            "    interval: 1h\n    timeout: 1h\n",
        ),
    ];
    let daemon = Daemon::start_with(
        common::parse(&probes_file(&targets)),
        "127.0.0.1:0".parse().unwrap(),
        None,
        options,
    )
    .await
    .unwrap();
    let mut rx = daemon.subscribe();
    // Enough probes of each: two successes of the flaky one, then it goes away.
    let mut seen: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let enough = |seen: &BTreeMap<String, (usize, usize)>, t: &str, ok: usize, failed: usize| {
        seen.get(t).is_some_and(|c| c.0 >= ok && c.1 >= failed)
    };
    while !enough(&seen, "api-flaky", 2, 0) {
        let o = common::outcomes(&mut rx, 1, Duration::from_secs(30)).await;
        let c = seen.entry(o[0].target.to_string()).or_default();
        if o[0].result.is_ok() {
            c.0 += 1
        } else {
            c.1 += 1
        }
    }
    drop(flaky);
    seen.remove("api-flaky");
    while !(enough(&seen, "api-flaky", 0, 1)
        && enough(&seen, "api-dead", 0, 2)
        && enough(&seen, "api-500", 0, 2)
        && enough(&seen, "api-slow", 3, 0)
        && enough(&seen, "api-ok", 3, 0))
    {
        let o = common::outcomes(&mut rx, 1, Duration::from_secs(30)).await;
        let c = seen.entry(o[0].target.to_string()).or_default();
        if o[0].result.is_ok() {
            c.0 += 1
        } else {
            c.1 += 1
        }
    }
    Fleet {
        daemon,
        _sims: vec![http500, slow, fast, silent],
    }
}

/// The states the fleet's pairs must be in, worst first.
const EXPECTED: [(&str, &str); 6] = [
    ("api-500", "down"),
    ("api-dead", "down"),
    ("api-flaky", "failing"),
    ("api-slow", "breached"),
    ("api-ok", "ok"),
    ("api-new", "no_data"),
];

async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let (status, _, body) = common::get(addr, path, None).await;
    (status, body)
}

async fn api(addr: SocketAddr, prefix: &str) -> Value {
    let (status, body) = get(addr, &format!("{prefix}/api/v1/targets")).await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

// ---------------------------------------------------------------------------------------------
// The measuring proxy and Chromium.

/// The harness: `page` in an iframe of `w`×`h` px; on load, the measurements as JSON in
/// `<pre id="measure">`.
fn harness(page: &str, w: u32, h: u32) -> String {
    let src = serde_json::to_string(page).unwrap();
    format!(
        r#"<!doctype html><html><head><meta charset="utf-8"><style>body{{margin:0}} iframe{{border:0;display:block}}</style></head>
<body><iframe id="f" width="{w}" height="{h}"></iframe>
<script>
const f = document.getElementById('f');
f.addEventListener('load', () => {{
  const d = f.contentDocument, w = f.contentWindow;
  const W = d.documentElement.clientWidth;
  const describe = e => e.tagName.toLowerCase() + (e.getAttribute('class') ? '.' + e.getAttribute('class').replace(/ /g, '.') : '');
  // Content clipped by a scrolling or overflow-hidden box (an ellipsis, the failures table's
  // own scroller, the inside of an SVG) does not widen the page.
  const clipped = e => {{
    for (let a = e.parentElement; a && a !== d.body; a = a.parentElement)
      if (w.getComputedStyle(a).overflowX !== 'visible') return true;
    return false;
  }};
  const wide = [];
  for (const e of d.body.querySelectorAll('*')) {{
    const r = e.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    if ((r.right > W + 1 || r.left < -1) && !clipped(e))
      wide.push(describe(e) + ' ' + Math.round(r.left) + '..' + Math.round(r.right));
  }}
  const visibleText = e => e && e.getClientRects().length > 0 && e.offsetHeight > 0 ? e.innerText : null;
  const cards = [...d.querySelectorAll('article.card')].map(a => ({{
    state: a.dataset.state,
    name: (a.querySelector('h2, .name') || a).innerText.trim(),
    reason: visibleText(a.querySelector('.reason')),
    bottom: a.getBoundingClientRect().bottom,
  }}));
  const counts = {{}};
  for (const a of d.querySelectorAll('nav.summary a[data-state]')) counts[a.dataset.state] = +a.dataset.count;
  const labels = [...d.querySelectorAll('svg.chart text')].map(t => t.getBoundingClientRect().height).filter(x => x > 0);
  const out = {{ W, H: w.innerHeight, scrollW: d.documentElement.scrollWidth, wide: wide.slice(0, 30),
    cards, counts, minLabel: labels.length ? Math.min(...labels) : null, title: d.title,
    sheets: d.styleSheets.length }};
  const p = document.createElement('pre');
  p.id = 'measure';
  p.textContent = JSON.stringify(out);
  document.body.appendChild(p);
}});
f.src = {src};
</script></body></html>"#
    )
}

/// Serves the harness at `/__harness?page=&w=&h=` and forwards everything else to `upstream`
/// without its CSP (which forbids the harness' script and framing).
async fn proxy(upstream: SocketAddr, shutdown: CancellationToken) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    tokio::spawn(llm_probe::server::serve(
        listener,
        shutdown,
        move |req: hyper::Request<hyper::body::Incoming>| {
            let client = client.clone();
            let pq = req
                .uri()
                .path_and_query()
                .map(|p| p.to_string())
                .unwrap_or_default();
            async move {
                if let Some(q) = pq.strip_prefix("/__harness?") {
                    let p: BTreeMap<String, String> = url::form_urlencoded::parse(q.as_bytes())
                        .into_owned()
                        .collect();
                    let body =
                        harness(&p["page"], p["w"].parse().unwrap(), p["h"].parse().unwrap());
                    return hyper::Response::builder()
                        .header("content-type", "text/html; charset=utf-8")
                        .body(Full::new(Bytes::from(body)))
                        .unwrap();
                }
                let r = client
                    .get(format!("http://{upstream}{pq}"))
                    .send()
                    .await
                    .unwrap();
                let mut b = hyper::Response::builder().status(r.status().as_u16());
                for (k, v) in r.headers() {
                    if k != "content-security-policy" && k != "content-length" {
                        b = b.header(k.as_str(), v.as_bytes());
                    }
                }
                b.body(Full::new(r.bytes().await.unwrap())).unwrap()
            }
        },
    ));
    addr
}

struct Browser {
    exe: PathBuf,
    dir: tempfile::TempDir,
    runs: std::sync::atomic::AtomicUsize,
}

impl Browser {
    fn new() -> Arc<Browser> {
        Arc::new(Browser {
            exe: common::require_tool("chromium", "apt-get install -y chromium"),
            dir: tempfile::tempdir().unwrap(),
            runs: 0.into(),
        })
    }

    fn profile(&self) -> PathBuf {
        let n = self.runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.dir.path().join(format!("profile-{n}"))
    }

    /// `page` (a path on the proxy) measured at `w`×`h`.
    async fn measure(self: &Arc<Self>, proxy: SocketAddr, page: &str, w: u32, h: u32) -> Value {
        let url = format!(
            "http://{proxy}/__harness?page={}&w={w}&h={h}",
            url::form_urlencoded::byte_serialize(page.as_bytes()).collect::<String>()
        );
        let me = self.clone();
        let (dom, log) = tokio::task::spawn_blocking(move || {
            let args = [
                "--dump-dom".to_string(),
                "--virtual-time-budget=5000".into(),
                format!("--window-size={},{}", w.max(500) + 20, h + 20),
            ];
            common::chromium::run(&me.exe, &me.profile(), &args, &url)
        })
        .await
        .unwrap();
        let at = dom
            .find("<pre id=\"measure\">")
            .unwrap_or_else(|| panic!("{page} at {w} px: no measurement\n{dom}\n{log}"));
        let json = &dom[at + 18..];
        let json = &json[..json.find("</pre>").unwrap()];
        let json = json
            .replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&");
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
    }

    /// A screenshot of `url` (the real page, under its CSP) at `w`×`h`, into `out`; asserts no
    /// console error or CSP violation.
    async fn screenshot(self: &Arc<Self>, url: String, w: u32, h: u32, out: PathBuf) {
        let me = self.clone();
        let (target, page) = (out.clone(), url.clone());
        let log = tokio::task::spawn_blocking(move || {
            let args = [
                format!("--screenshot={}", target.display()),
                format!("--window-size={w},{h}"),
                "--virtual-time-budget=5000".into(),
            ];
            common::chromium::run(&me.exe, &me.profile(), &args, &page).1
        })
        .await
        .unwrap();
        assert!(
            common::chromium::console_errors(&log).is_empty(),
            "{url}: {:?}",
            common::chromium::console_errors(&log)
        );
        let png = std::fs::read(&out).unwrap_or_else(|e| panic!("{}: {e}\n{log}", out.display()));
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 10_000,
            "{}",
            out.display()
        );
        // The PNG's own size (IHDR): the screenshot is the asked viewport.
        let size = (
            u32::from_be_bytes(png[16..20].try_into().unwrap()),
            u32::from_be_bytes(png[20..24].try_into().unwrap()),
        );
        assert_eq!(size, (w, h), "{}", out.display());
    }
}

/// Where screenshots go: `$LLM_PROBE_SCREENSHOTS` (e.g. `docs`), else a temporary directory.
fn shots(fallback: &Path) -> PathBuf {
    std::env::var_os("LLM_PROBE_SCREENSHOTS").map_or(fallback.to_path_buf(), PathBuf::from)
}

fn assert_fits(m: &Value, what: &str, w: u32) {
    assert_eq!(m["W"], w, "{what}: the iframe's viewport");
    assert!(
        m["scrollW"].as_u64().unwrap() <= u64::from(w),
        "{what} at {w} px scrolls sideways: {m}"
    );
    assert!(
        m["wide"].as_array().unwrap().is_empty(),
        "{what} at {w} px: elements wider than the viewport: {}",
        m["wide"]
    );
    assert!(
        m["sheets"].as_u64().unwrap() >= 1,
        "{what}: the stylesheet loaded"
    );
}

// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_in_chromium_at_phone_desktop_and_wall_widths() {
    let browser = Browser::new();
    let options = ServerOptions {
        identity: llm_probe::server::ExporterIdentity {
            instance: "probe-eu-1".into(),
            location: Some("eu-west".into()),
        },
        ..Default::default()
    };
    let f = fleet(options).await;
    let d = &f.daemon;
    let stop = CancellationToken::new();
    let proxy = proxy(d.addr, stop.clone()).await;

    // The API's states: each pair as expected, worst first.
    let v = api(d.addr, "").await;
    let states: Vec<(String, String)> = v["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["target"].as_str().unwrap().into(),
                p["state"].as_str().unwrap().into(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = EXPECTED
        .iter()
        .map(|(t, s)| (t.to_string(), s.to_string()))
        .collect();
    assert_eq!(states, want, "{v}");
    assert_eq!(v["window_seconds"], 600, "the alerts' window");
    assert_eq!(v["exporter"]["location"], "eu-west");
    let dead = &v["pairs"][1];
    assert_eq!(dead["reason"]["reason"], "connect", "{dead}");
    assert!(dead["since"].is_string(), "{dead}");

    // Every page at the three widths of the acceptance; the overview and a target page also
    // at the ends of the supported range, 320 and 2560 px.
    let every_page = [
        "/",
        "/?view=wall",
        "/targets/api-dead",
        "/targets/api-slow",
        "/targets/api-flaky",
    ];
    for w in [320u32, 400, 1400, 1920, 2560] {
        let h = if w <= 400 { 900 } else { 1080 };
        let pages = if matches!(w, 320 | 2560) {
            &["/", "/targets/api-flaky"][..]
        } else {
            &every_page[..]
        };
        for &page in pages {
            let m = browser.measure(proxy, page, w, h).await;
            assert_fits(&m, page, w);
            assert!(
                m["title"]
                    .as_str()
                    .unwrap()
                    .contains("probe-eu-1 · location eu-west"),
                "{page}: the exporter's identity in the title: {}",
                m["title"]
            );
            if page.starts_with("/targets/") {
                let min = m["minLabel"].as_f64().unwrap();
                assert!(
                    min >= 10.0,
                    "{page} at {w} px: chart labels {min:.1} px high"
                );
                continue;
            }
            // Worst first, with the API's states and counts; the reason on down cards.
            let cards = m["cards"].as_array().unwrap();
            let seen: Vec<(String, String)> = cards
                .iter()
                .map(|c| {
                    let name = c["name"].as_str().unwrap();
                    (
                        name.split(" / ").next().unwrap().trim().to_string(),
                        c["state"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            assert_eq!(seen, want, "{page} at {w} px");
            let api_counts = &v["counts"];
            for (state, n) in m["counts"].as_object().unwrap() {
                assert_eq!(&api_counts[state], n, "{page}: the summary's {state} count");
            }
            assert_eq!(m["counts"].as_object().unwrap().len(), 6);
            for c in cards.iter().filter(|c| c["state"] == "down") {
                let reason = c["reason"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{page} at {w} px: no visible reason on {c}"));
                assert!(
                    reason.contains("connect") || reason.contains("http_status"),
                    "{page} at {w} px: {reason}"
                );
                assert!(reason.contains("since"), "{reason}");
            }
        }
    }

    // The filter: query parameters, no script.
    let (_, html) = get(d.addr, "/?state=down&target=api").await;
    assert_eq!(html.matches("<article class=\"card down\"").count(), 2);
    assert_eq!(html.matches("<article").count(), 2, "only the down pairs");
    let (_, html) = get(d.addr, "/?location=us-east").await;
    assert_eq!(
        html.matches("<article").count(),
        0,
        "another location's pairs are not here"
    );
    let (_, html) = get(d.addr, "/?target=slow").await;
    assert_eq!(html.matches("<article").count(), 1);

    // Screenshots of the real pages, under their CSP.
    let dir = shots(browser.dir.path());
    let base = format!("http://{}", d.addr);
    for (name, path, w, h) in [
        ("status-overview.png", "/", 1400, 1000),
        ("status-phone.png", "/", 400, 1600),
        ("status-target.png", "/targets/api-flaky", 1400, 1400),
        (
            "status-probe.png",
            "/probe?target=api-ok&scenario=chat&debug=true&format=html",
            1200,
            900,
        ),
    ] {
        browser
            .screenshot(format!("{base}{path}"), w, h, dir.join(name))
            .await;
    }
    stop.cancel();
    f.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_badges_and_page_agree_on_every_pair() {
    let f = fleet(ServerOptions::default()).await;
    let d = &f.daemon;
    // The history moves on between reads: retry until two reads of the API agree around them.
    for _ in 0..5 {
        let v = api(d.addr, "").await;
        let (_, page) = get(d.addr, "/").await;
        let mut badges = BTreeMap::new();
        for p in v["pairs"].as_array().unwrap() {
            let (t, s) = (
                p["target"].as_str().unwrap(),
                p["scenario"].as_str().unwrap(),
            );
            let (status, svg) = get(d.addr, &format!("/badge/{t}/{s}/status.svg")).await;
            assert_eq!(status, 200);
            let at = svg.find("data-state=\"").unwrap() + 12;
            badges.insert(
                t.to_string(),
                svg[at..].split('"').next().unwrap().to_string(),
            );
        }
        // The states only: the numbers move with every probe.
        let states = |v: &Value| -> Vec<(Value, Value)> {
            v["pairs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| (p["target"].clone(), p["state"].clone()))
                .collect()
        };
        if states(&api(d.addr, "").await) != states(&v) {
            continue;
        }
        let mut cards = BTreeMap::new();
        for chunk in page.split("<article class=\"card ").skip(1) {
            let state = chunk.split('"').next().unwrap().to_string();
            let at = chunk.find("<code>").unwrap() + 6;
            let name = chunk[at..].split('<').next().unwrap().to_string();
            cards.insert(name, state);
        }
        let api: BTreeMap<String, String> = v["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["target"].as_str().unwrap().into(),
                    p["state"].as_str().unwrap().into(),
                )
            })
            .collect();
        assert_eq!(api.len(), EXPECTED.len());
        assert_eq!(badges, api, "badges and API");
        assert_eq!(cards, api, "page and API");
        let states: BTreeSet<&str> = api.values().map(String::as_str).collect();
        assert_eq!(
            states.len(),
            5,
            "down, failing, breached, ok, no data: {api:?}"
        );
        f.daemon.stop().await;
        return;
    }
    panic!("the API never answered the same twice in a row");
}

/// Every `href`, `src` and form `action` of an HTML page.
fn links(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    for attr in ["href=\"", "src=\"", "action=\""] {
        for piece in html.split(attr).skip(1) {
            out.push(piece.split('"').next().unwrap().replace("&amp;", "&"));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_link_resolves_behind_a_route_prefix() {
    let options = ServerOptions {
        urls: WebUrls::new(None, Some("/llm")).unwrap(),
        debug_probe: llm_probe::server::DebugProbePolicy {
            enabled: true,
            min_interval: Some(Duration::ZERO),
        },
        ..Default::default()
    };
    let f = fleet(options).await;
    let d = &f.daemon;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let base = format!("http://{}", d.addr);
    // The redirects and the old paths.
    for (path, status, location) in [
        ("/", 302, Some("/llm/")),
        ("/llm", 302, Some("/llm/")),
        ("/metrics", 404, None),
        ("/-/healthy", 404, None),
        ("/llm/metrics", 200, None),
        ("/llm/-/healthy", 200, None),
        ("/llm/-/ready", 200, None),
    ] {
        let r = client.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(r.status().as_u16(), status, "{path}");
        if let Some(l) = location {
            assert_eq!(r.headers()["location"], l, "{path}");
        }
    }
    // The crawl: every link of every page, from the overview.
    let mut todo = vec!["/llm/".to_string()];
    let mut done = BTreeSet::new();
    while let Some(path) = todo.pop() {
        if !done.insert(path.clone()) {
            continue;
        }
        assert!(done.len() < 300, "the crawl does not end: {done:?}");
        let r = client
            .get(format!("{base}{path}"))
            .header("accept", "text/html")
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let ct = r
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let body = r.text().await.unwrap();
        assert_eq!(status, 200, "{path} (from the crawl): {body}");
        if !ct.starts_with("text/html") {
            continue;
        }
        for link in links(&body) {
            let (no_frag, _) = link.split_once('#').unwrap_or((&link, ""));
            assert!(
                no_frag.starts_with("/llm/") || no_frag.is_empty(),
                "{path} links outside the prefix: {link}"
            );
            // One probe-now page of each kind is enough (each runs a probe); api-new's would
            // wait for its silent server for its whole 1 h timeout.
            let key = no_frag.to_string();
            if key.contains("target=api-new") && key.contains("/probe?") {
                continue;
            }
            if key.contains("/probe?")
                && done.iter().any(|d: &String| {
                    d.contains("/probe?") && d.contains("debug") == key.contains("debug")
                })
            {
                continue;
            }
            if !key.is_empty() && !done.contains(&key) {
                todo.push(key);
            }
        }
    }
    for must in [
        "/llm/metrics",
        "/llm/status.css",
        "/llm/api/v1/targets",
        "/llm/targets/api-dead",
        "/llm/?view=wall",
        "/llm/?state=down",
    ] {
        assert!(
            done.iter().any(|d| d == must),
            "the crawl reached {must}: {done:?}"
        );
    }
    assert!(
        done.iter().any(|d| d.starts_with("/llm/probe?")),
        "probe-now: {done:?}"
    );
    // A probe-now page is readable HTML with the JSON one click away.
    let (status, html) = {
        let r = client
            .get(format!(
                "{base}/llm/probe?target=api-ok&scenario=chat&debug=true"
            ))
            .header("accept", "text/html")
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    };
    assert_eq!(status, 200, "{html}");
    assert!(
        html.contains("<details class=\"json\">") && html.contains("success"),
        "{html}"
    );
    assert!(html.contains("Timeline"), "{html}");
    assert!(
        !html.contains("http-equiv=\"refresh\""),
        "reloading the page by itself would run another probe: {html}"
    );
    let (status, json) = get(d.addr, "/llm/probe?target=api-ok&scenario=chat").await;
    assert_eq!(status, 200);
    assert!(
        serde_json::from_str::<Value>(&json).is_ok(),
        "scripts still get JSON: {json}"
    );
    f.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wall_view_fits_50_pairs_on_1920_by_1080() {
    let browser = Browser::new();
    // 50 targets that never answer (so only the history below counts).
    let silent = common::simulator(
        common::stream(5, 3, 8)
            .model("fleet-model")
            .fault(Fault::NoHeaders),
    )
    .await;
    let targets: Vec<String> = (0..50)
        .map(|i| {
            target(
                &format!("gpu-{:02}-{}", i, ["eu", "us", "ap"][i % 3]),
                &silent.base_url(),
                "    interval: 1h\n    timeout: 1h\n",
            )
        })
        .collect();
    let d = Daemon::start_with(
        common::parse(&probes_file(&targets)),
        "127.0.0.1:0".parse().unwrap(),
        None,
        ServerOptions {
            identity: llm_probe::server::ExporterIdentity {
                instance: "probe-eu-1".into(),
                location: Some("eu-west".into()),
            },
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let now = SystemTime::now();
    for i in 0..50u64 {
        let name: Arc<str> = format!("gpu-{:02}-{}", i, ["eu", "us", "ap"][i as usize % 3]).into();
        for k in 0..20u64 {
            let failed = match i % 10 {
                0 => true,       // down
                1 => k % 4 == 0, // failing
                _ => false,
            };
            let ttft = 60 + (i % 10) * 40 + (k * 7) % 30; // up to ~450 ms: ok, at risk, breached
            d.history.push_probe(RecentProbe {
                target: name.clone(),
                scenario: "chat".into(),
                replica: "".into(),
                started_at: now - Duration::from_secs(20 * (20 - k)),
                ttft: (!failed).then(|| Duration::from_millis(ttft)),
                output_tokens_per_second: (!failed).then_some(80.0),
                tpot: None,
                itl: None,
                e2e: (!failed).then(|| Duration::from_millis(ttft + 200)),
                output_tokens: (!failed).then_some(8),
                failure: failed.then(|| {
                    (
                        FailureReason::HttpStatus,
                        "HTTP 503 Service Unavailable: {\"error\":\"overloaded, retry later\"}"
                            .to_string(),
                    )
                }),
                identity: None,
                trace_id: None,
            });
        }
    }
    let stop = CancellationToken::new();
    let proxy = proxy(d.addr, stop.clone()).await;
    let m = browser.measure(proxy, "/?view=wall", 1920, 1080).await;
    assert_fits(&m, "wall", 1920);
    let cards = m["cards"].as_array().unwrap();
    assert_eq!(cards.len(), 50);
    let lowest = cards
        .iter()
        .map(|c| c["bottom"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(
        lowest <= 1080.0,
        "the 50th card ends at {lowest} px: below the screen"
    );
    let down = cards.iter().filter(|c| c["state"] == "down").count();
    assert_eq!(down, 5);
    for c in cards.iter().filter(|c| c["state"] == "down") {
        assert!(
            c["reason"]
                .as_str()
                .is_some_and(|r| r.contains("http_status")),
            "{c}"
        );
    }
    let dir = shots(browser.dir.path());
    browser
        .screenshot(
            format!("http://{}/?view=wall", d.addr),
            1920,
            1080,
            dir.join("status-wall.png"),
        )
        .await;
    stop.cancel();
    d.stop().await;
    drop(silent);
}
