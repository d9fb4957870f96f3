//! bench's HTML chart in headless Chromium: it renders, with its axes and the SLA marks.

use crate::common;
use common::bench::{bench, plan};
use llm_probe::bench::level::Load;
use llm_probe::simulate::{Load as SimLoad, Script};
use std::process::Command;

/// Runs headless Chromium on `page` and returns the `data-result` attribute its script set.
fn chromium_result(
    chromium: std::path::PathBuf,
    dir: &std::path::Path,
    page: &std::path::Path,
) -> String {
    let profile = dir.join("profile");
    let url = format!("file://{}", page.display());
    let out = Command::new("timeout")
        .arg("120")
        .arg(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--allow-file-access-from-files",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--virtual-time-budget=5000", "--dump-dom", &url])
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    dom.split("data-result=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_else(|| {
            panic!(
                "no result in the DOM: {dom}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .replace("&amp;", "&")
}

/// The charts, rendered by a real browser (headless Chromium): the image decodes at its size
/// and draws lines in colour, not a blank page; the load axis is logarithmic with a
/// tick at each level (1, 2, 4 evenly spaced), its labels are integers without ".0", and the SLA
/// capacity and the SLO line are marked and labelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chart_renders_in_headless_chromium() {
    let chromium = common::require_tool("chromium", "apt-get install -y chromium");
    let sim = common::simulator(Script {
        load: SimLoad {
            slots: 1,
            ..SimLoad::default()
        },
        ..common::stream(20, 2, 8)
    })
    .await;
    let levels = vec![
        Load::Concurrency(1),
        Load::Concurrency(2),
        Load::Concurrency(4),
    ];
    let r = bench(&sim.base_url(), plan(levels, 4, 0)).await;
    let dir = tempfile::tempdir().unwrap();
    llm_probe::bench::command::write_all(&r, dir.path()).unwrap();
    // Draw the SVG onto a canvas and count the pixels that are not white, and the coloured ones.
    let page = dir.path().join("page.html");
    std::fs::write(&page, r#"<html><body><img id="i" src="ttft.svg"><script>
const i = document.getElementById('i');
function done() {
  const c = document.createElement('canvas');
  c.width = i.naturalWidth; c.height = i.naturalHeight;
  const x = c.getContext('2d');
  x.fillStyle = '#fff'; x.fillRect(0, 0, c.width, c.height); x.drawImage(i, 0, 0);
  const d = x.getImageData(0, 0, c.width, c.height).data;
  let ink = 0, colour = 0;
  for (let k = 0; k < d.length; k += 4) {
    if (d[k] < 200 || d[k + 1] < 200 || d[k + 2] < 200) ink++;
    if (Math.abs(d[k] - d[k + 2]) > 100) colour++;
  }
  document.body.setAttribute('data-result', `${i.naturalWidth}x${i.naturalHeight} ink=${ink} colour=${colour}`);
}
if (i.complete) done(); else { i.onload = done; i.onerror = () => document.body.setAttribute('data-result', 'error'); }
</script></body></html>"#).unwrap();
    let dir_path = dir.path().to_path_buf();
    let result = {
        let (c, d, p) = (chromium.clone(), dir_path.clone(), page.clone());
        tokio::task::spawn_blocking(move || chromium_result(c, &d, &p))
            .await
            .unwrap()
    };
    let field = |name: &str| -> u64 {
        result
            .split(' ')
            .find_map(|kv| kv.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{result}"))
    };
    assert!(result.starts_with("900x520 "), "{result}");
    assert!(field("ink=") > 2_000, "{result}");
    assert!(field("colour=") > 300, "{result}");

    // The same chart inline, so the browser lays out its texts: where are the tick labels?
    let svg = std::fs::read_to_string(dir.path().join("ttft.svg")).unwrap();
    let page = dir.path().join("ticks.html");
    std::fs::write(
        &page,
        format!(
            r#"<html><body>{svg}<script>
const texts = [...document.querySelectorAll('svg text')].map(t => {{
  const b = t.getBBox(); return {{s: t.textContent.trim(), x: b.x + b.width / 2, y: b.y}};
}});
const bottom = Math.max(...texts.filter(t => /^[0-9]+$/.test(t.s)).map(t => t.y));
const ticks = texts.filter(t => /^[0-9.]+$/.test(t.s) && Math.abs(t.y - bottom) < 2);
const out = ticks.map(t => `${{t.s}}@${{t.x.toFixed(1)}}`).join(',');
const marks = texts.filter(t => t.s.startsWith('SLA capacity') || t.s.startsWith('SLO')).map(t => t.s).join('|');
document.body.setAttribute('data-result', `ticks=${{out}};marks=${{marks}}`);
</script></body></html>"#
        ),
    )
    .unwrap();
    let result = tokio::task::spawn_blocking(move || chromium_result(chromium, &dir_path, &page))
        .await
        .unwrap();
    let (ticks, marks) = result.split_once(";marks=").unwrap();
    let ticks: Vec<(String, f64)> = ticks
        .trim_start_matches("ticks=")
        .split(',')
        .map(|t| {
            let (s, x) = t.split_once('@').unwrap();
            (s.to_string(), x.parse().unwrap())
        })
        .collect();
    let labels: Vec<&str> = ticks.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(labels, ["1", "2", "4"], "{result}");
    let (g1, g2) = (ticks[1].1 - ticks[0].1, ticks[2].1 - ticks[1].1);
    assert!(
        g1 > 50.0 && (g1 - g2).abs() < 2.0,
        "log₂ spacing expected: {result}"
    );
    assert!(marks.contains("SLO: P95 ≤ 300 ms"), "{result}");
    let capacity = match r.capacity.capacity {
        Some(Load::Concurrency(c)) => format!("SLA capacity C={c}"),
        _ => "SLA capacity: none".to_string(),
    };
    assert!(marks.contains(&capacity), "{capacity} expected: {result}");
}
