//! Inline SVG charts of the status pages, written with maud (so every title is escaped).
//!
//! Not drawn with `plotters` as `bench`'s charts are: these need a `<title>` on every mark
//! (failure details on hover), CSS classes (the page's light and dark palettes) and stable
//! element classes the tests count, which plotters' SVG backend does not emit. The time axis
//! is wall-clock seconds; values are mapped linearly into a fixed `viewBox`.

use std::time::{SystemTime, UNIX_EPOCH};

use maud::{html, Markup};

use crate::measure::FailureReason;

/// Font size of tick and threshold labels, in `viewBox` units: the charts are 480 wide and
/// drawn at most 1.2× that (CSS), at least 0.7× on a 400 px phone, so labels stay 10–18 px.
pub const LABEL_SIZE: f64 = 15.0;

/// The kinds of failure marks, each with its own shape (and all in one colour, the failure
/// colour): tellable apart without colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailGroup {
    /// `dns`, `connect`, `tls`: a cross.
    Network,
    /// `timeout`: a triangle.
    Timeout,
    /// `http_status`, `http_protocol`: a square.
    Http,
    /// Everything else (the stream's reasons, and any reason added later): a diamond.
    Stream,
}

impl FailGroup {
    /// Every group, in legend order.
    pub const ALL: [FailGroup; 4] = [
        FailGroup::Network,
        FailGroup::Timeout,
        FailGroup::Http,
        FailGroup::Stream,
    ];

    /// The group of `reason`.
    pub fn of(reason: FailureReason) -> FailGroup {
        match reason.as_str() {
            "dns" | "connect" | "tls" => FailGroup::Network,
            "timeout" => FailGroup::Timeout,
            "http_status" | "http_protocol" | "overloaded" => FailGroup::Http,
            _ => FailGroup::Stream,
        }
    }

    /// CSS class: `net`, `timeout`, `http`, `stream`.
    pub fn class(self) -> &'static str {
        match self {
            FailGroup::Network => "fail net",
            FailGroup::Timeout => "fail timeout",
            FailGroup::Http => "fail http",
            FailGroup::Stream => "fail stream",
        }
    }

    /// For the legend.
    pub fn label(self) -> &'static str {
        match self {
            FailGroup::Network => "dns, connect, tls (×)",
            FailGroup::Timeout => "timeout (△)",
            FailGroup::Http => "HTTP status or protocol, overloaded (□)",
            FailGroup::Stream => "stream: decode, truncated, empty, error, too large, other (◇)",
        }
    }
}

/// The failure mark of `group` centred on (`x`, `y`), of CSS class `class`.
pub fn fail_shape(x: f64, y: f64, group: FailGroup, class: &str) -> Markup {
    let d = match group {
        FailGroup::Network => format!("M{:.1} {:.1}l9 9m0 -9l-9 9", x - 4.5, y - 4.5),
        FailGroup::Timeout => format!("M{:.1} {:.1}l5 -9l5 9z", x - 5.0, y + 4.5),
        FailGroup::Http => format!("M{:.1} {:.1}h8v8h-8z", x - 4.0, y - 4.0),
        FailGroup::Stream => format!("M{x:.1} {:.1}l5 5l-5 5l-5 -5z", y - 5.0),
    };
    html! { path class=(class) d=(d) {} }
}

/// A legend key: `mark` drawn in a 24×14 SVG, the chart's classes applying to it.
pub fn legend_key(mark: Markup) -> Markup {
    html! { svg.key viewBox="0 0 24 14" width="24" height="14" aria-hidden="true" { (mark) } }
}

/// A "nice" step (1, 2, 2.5 or 5 × 10ⁿ) for about `ticks` intervals up to `hi`.
pub fn nice_step(hi: f64, ticks: f64) -> f64 {
    if !(hi.is_finite() && hi > 0.0) {
        return 1.0;
    }
    let raw = hi / ticks;
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

/// A step of the time axis in seconds (10 s … 1 day) for at most `ticks` intervals over `span`.
fn time_step(span: f64, ticks: f64) -> f64 {
    const STEPS: [f64; 15] = [
        10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 10800.0,
        21600.0, 43200.0, 86400.0,
    ];
    STEPS
        .iter()
        .copied()
        .find(|s| span / s <= ticks)
        .unwrap_or(86400.0)
}

/// Seconds since the Unix epoch of `t`.
pub fn secs(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A chart under construction: its frame and the marks added so far.
pub struct Chart {
    width: f64,
    height: f64,
    /// Left, right, top, bottom margins.
    pad: (f64, f64, f64, f64),
    x: (f64, f64),
    y: (f64, f64),
    /// Decimals of coordinates: 1 on charts with axes, 0 on sparklines (page weight).
    decimals: usize,
    marks: Vec<Markup>,
}

/// `0..hi` for `values` and `thresholds`, padded above; never empty. Outliers (above 3× the
/// larger of the values' P90 and the highest threshold) do not stretch the axis: it ends at
/// 1.5× that and they are drawn on the top edge (their titles keep the value).
pub fn y_range(values: &[f64], thresholds: &[f64]) -> (f64, f64) {
    let mut vals: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    // Sorts `vals`: the last is the largest.
    let [p90] = crate::stats::quantiles_type7(&mut vals, [0.9]);
    let p90 = p90.unwrap_or(0.0);
    let max = vals.last().copied().unwrap_or(0.0);
    let line = thresholds
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let scale = p90.max(line);
    let top = if max > 3.0 * scale { 1.5 * scale } else { max };
    let hi = top.max(line);
    (0.0, if hi > 0.0 { hi * 1.1 } else { 1.0 })
}

impl Chart {
    /// A `width`×`height` chart over times `x` (epoch seconds) and values `y`; `axes` draws
    /// the frame and tick labels (sparklines have none).
    pub fn new(width: f64, height: f64, x: (f64, f64), y: (f64, f64), axes: bool) -> Self {
        let x = if !(x.0.is_finite() && x.1.is_finite()) {
            // Nothing to draw (no probe yet): the last 10 minutes.
            let now = secs(SystemTime::now());
            (now - 600.0, now)
        } else if x.1 > x.0 {
            x
        } else {
            (x.0 - 30.0, x.0 + 30.0)
        };
        let pad = if axes {
            (70.0, 12.0, 12.0, 26.0)
        } else {
            (2.0, 2.0, 2.0, 2.0)
        };
        // Round tick values: the axis ends on a multiple of a nice step.
        let y = if axes {
            let step = nice_step(y.1 - y.0, 4.0);
            (y.0, y.0 + ((y.1 - y.0) / step).ceil().max(1.0) * step)
        } else {
            y
        };
        Chart {
            width,
            height,
            pad,
            x,
            y,
            decimals: usize::from(axes),
            marks: Vec::new(),
        }
    }

    /// A coordinate with the chart's decimals.
    fn n(&self, v: f64) -> String {
        format!("{v:.*}", self.decimals)
    }

    /// The x coordinate of time `t` (epoch seconds).
    pub fn px(&self, t: f64) -> f64 {
        let (l, r) = (self.pad.0, self.width - self.pad.1);
        l + (t - self.x.0) / (self.x.1 - self.x.0) * (r - l)
    }

    /// The y coordinate of value `v` (clamped to the frame).
    pub fn py(&self, v: f64) -> f64 {
        let (t, b) = (self.pad.2, self.height - self.pad.3);
        let f = ((v - self.y.0) / (self.y.1 - self.y.0)).clamp(0.0, 1.0);
        b - f * (b - t)
    }

    /// A point at (`t`, `v`) of CSS class `class`, with `title` shown on hover.
    pub fn point(&mut self, t: f64, v: f64, class: &str, title: &str) {
        let (x, y) = (self.px(t), self.py(v));
        self.marks.push(html! {
            circle class=(class) cx=(self.n(x)) cy=(self.n(y)) r="3" { title { (title) } }
        });
    }

    /// A line through `points` (time, value).
    pub fn line(&mut self, points: &[(f64, f64)], class: &str) {
        if points.len() < 2 {
            return;
        }
        let d: Vec<String> = points
            .iter()
            .map(|&(t, v)| format!("{},{}", self.n(self.px(t)), self.n(self.py(v))))
            .collect();
        self.marks
            .push(html! { polyline class=(class) points=(d.join(" ")) {} });
    }

    /// A horizontal threshold line at value `v` labelled `label` (none when empty); `data-value`
    /// carries `v`.
    pub fn threshold(&mut self, v: f64, class: &str, label: &str) {
        let y = self.py(v);
        let (l, r) = (self.pad.0, self.width - self.pad.1);
        self.marks.push(html! {
            line class=(class) data-value=(v) x1=(self.n(l)) x2=(self.n(r)) y1=(self.n(y)) y2=(self.n(y)) {
                @if !label.is_empty() { title { (label) } }
            }
            @if self.pad.0 > 10.0 {
                text class="thr-label" x=(self.n(r - 4.0)) y=(self.n(y - 5.0)) text-anchor="end" font-size=(LABEL_SIZE) { (label) }
            }
        });
    }

    /// A vertical marker at time `t` with `title` on hover.
    pub fn marker(&mut self, t: f64, class: &str, title: &str) {
        let x = self.px(t);
        let (top, bottom) = (self.pad.2, self.height - self.pad.3);
        self.marks.push(html! {
            line class=(class) x1=(self.n(x)) x2=(self.n(x)) y1=(self.n(top)) y2=(self.n(bottom)) { title { (title) } }
        });
    }

    /// A failure mark on the time axis at time `t`: shaped by `reason`'s [`FailGroup`], of
    /// classes `fail {reason}`, with `title` on hover.
    pub fn failure(&mut self, t: f64, reason: FailureReason, title: &str) {
        let (x, y) = (self.px(t), self.height - self.pad.3 - 7.0);
        let group = FailGroup::of(reason);
        let class = format!("fail {}", reason.as_str());
        let shape = fail_shape(x, y, group, &class).into_string();
        // The shape's path with a <title> child for the hover text.
        let with_title = format!(
            "{}<title>{}</title></path>",
            shape.trim_end_matches("</path>"),
            maud::html! { (title) }.into_string()
        );
        self.marks.push(maud::PreEscaped(with_title));
    }

    /// The SVG: `title` and `desc` (none when empty) are its text alternative; `unit` labels
    /// the y ticks.
    pub fn finish(self, id: &str, title: &str, desc: &str, unit: &str) -> Markup {
        let axes = self.pad.0 > 10.0;
        let (l, r, t, b) = (
            self.pad.0,
            self.width - self.pad.1,
            self.pad.2,
            self.height - self.pad.3,
        );
        let step = nice_step(self.y.1 - self.y.0, 4.0);
        let ticks: Vec<(f64, String)> = (0..)
            .map(|k| self.y.0 + step * f64::from(k))
            .take_while(|v| *v <= self.y.1 + step * 1e-9)
            .map(|v| (self.py(v), format!("{}{unit}", short(v))))
            .collect();
        let span = self.x.1 - self.x.0;
        let tstep = time_step(span, 4.0);
        let times: Vec<(f64, String)> = (0..)
            .map(|k| ((self.x.0 / tstep).ceil() + f64::from(k)) * tstep)
            .take_while(|at| at.is_finite() && *at <= self.x.1)
            .take(20)
            .map(|at| {
                let when = UNIX_EPOCH + std::time::Duration::from_secs_f64(at.max(0.0));
                let hms = humantime::format_rfc3339_seconds(when).to_string();
                // HH:MM on whole minutes, HH:MM:SS below.
                let end = if tstep >= 60.0 { 16 } else { 19 };
                (self.px(at), hms.get(11..end).unwrap_or("").to_string())
            })
            .collect();
        let desc_id = format!("{id}-d");
        let class = if axes { "chart" } else { "chart spark" };
        html! {
            // Inline in HTML: no xmlns needed. The first <title> child names the image; a
            // <desc> adds the numbers.
            svg class=(class) id=[(!desc.is_empty()).then_some(id)] role="img"
                viewBox=(format!("0 0 {} {}", self.width, self.height))
                aria-describedby=[(!desc.is_empty()).then_some(&desc_id)] {
                title { (title) }
                @if !desc.is_empty() { desc id=(desc_id) { (desc) } }
                @if axes {
                    rect class="frame" x=(self.n(l)) y=(self.n(t)) width=(self.n(r - l)) height=(self.n(b - t)) {}
                    @for (y, label) in &ticks {
                        line class="grid" x1=(self.n(l)) x2=(self.n(r)) y1=(self.n(*y)) y2=(self.n(*y)) {}
                        text class="tick" x=(self.n(l - 5.0)) y=(self.n(y + 5.0)) text-anchor="end" font-size=(LABEL_SIZE) { (label) }
                    }
                    @for (x, label) in &times {
                        line class="grid" x1=(self.n(*x)) x2=(self.n(*x)) y1=(self.n(b)) y2=(self.n(b + 4.0)) {}
                        text class="tick" x=(self.n(*x)) y=(self.n(b + 20.0))
                            text-anchor=(if *x > r - 30.0 { "end" } else { "middle" }) font-size=(LABEL_SIZE) { (label) }
                    }
                }
                @for m in &self.marks { (m) }
            }
        }
    }
}

/// A tick value (a multiple of a nice step) in few characters: `250`, `2.5`, `0.25`.
fn short(v: f64) -> String {
    let s = if v >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Rolling `q`-quantile (type 7, [`crate::stats::quantile_type7`]) over the last `window` values
/// of `points` (time, value).
pub fn rolling(points: &[(f64, f64)], window: usize, q: f64) -> Vec<(f64, f64)> {
    (0..points.len())
        .filter_map(|i| {
            let from = (i + 1).saturating_sub(window);
            let mut vals: Vec<f64> = points[from..=i].iter().map(|p| p.1).collect();
            let [v] = crate::stats::quantiles_type7(&mut vals, [q]);
            v.map(|v| (points[i].0, v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_values_into_the_frame_and_escapes_titles() {
        let mut c = Chart::new(400.0, 200.0, (0.0, 100.0), (0.0, 1000.0), true);
        assert_eq!(c.py(0.0), 174.0);
        assert_eq!(c.py(1000.0), 12.0);
        assert_eq!(c.px(0.0), 70.0);
        assert_eq!(c.px(100.0), 388.0);
        c.point(50.0, 300.0, "pt", "<script>\"x\"</script>");
        let svg = c.finish("c", "a & b", "d", " ms").into_string();
        assert!(
            svg.contains("&lt;script&gt;&quot;x&quot;&lt;/script&gt;"),
            "{svg}"
        );
        assert!(svg.contains("a &amp; b"));
        assert!(!svg.contains("<script>"));
    }

    #[test]
    fn outliers_do_not_stretch_the_axis_but_thresholds_do() {
        let mut v: Vec<f64> = vec![10.0; 20];
        assert_eq!(y_range(&v, &[]), (0.0, 11.0));
        v.push(10_000.0);
        assert_eq!(y_range(&v, &[]), (0.0, 15.0 * 1.1));
        assert_eq!(y_range(&v, &[300.0]), (0.0, 450.0 * 1.1));
        let mut near = vec![10.0; 20];
        near.push(400.0);
        assert_eq!(
            y_range(&near, &[300.0]),
            (0.0, 400.0 * 1.1),
            "a value near the SLO line is drawn where it is, not clamped"
        );
        assert_eq!(y_range(&[], &[]), (0.0, 1.0));
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(nice_step(363.0, 4.0), 100.0);
        assert_eq!(nice_step(330.0, 4.0), 100.0);
        assert_eq!(nice_step(90.0, 4.0), 25.0);
        assert_eq!(nice_step(1.1, 4.0), 0.5);
        assert_eq!(nice_step(0.0, 4.0), 1.0);
        // The odd ticks (82.5 / 165 / 248 / 330 ms) become 0, 100, 200, 300, 400.
        let c = Chart::new(480.0, 240.0, (0.0, 600.0), (0.0, 330.0), true);
        let svg = c.finish("c", "t", "d", " ms").into_string();
        for want in [">0 ms<", ">100 ms<", ">200 ms<", ">300 ms<", ">400 ms<"] {
            assert!(svg.contains(want), "{want}: {svg}");
        }
        assert!(!svg.contains("82.5") && !svg.contains(">330"), "{svg}");
        assert_eq!(short(2.5), "2.5");
        assert_eq!(short(0.25), "0.25");
        assert_eq!(short(1.0), "1");
        assert_eq!(time_step(600.0, 4.0), 300.0);
        assert_eq!(time_step(6.0 * 3600.0, 4.0), 7200.0);
    }

    #[test]
    fn a_chart_of_nothing_renders() {
        let span = (f64::INFINITY, f64::NEG_INFINITY);
        let svg = Chart::new(480.0, 240.0, span, (0.0, 1.0), true)
            .finish("c", "t", "", "")
            .into_string();
        assert!(svg.contains("class=\"tick\""), "{svg}");
    }

    #[test]
    fn failure_kinds_differ_in_shape() {
        let shapes: Vec<String> = FailGroup::ALL
            .iter()
            .map(|g| fail_shape(0.0, 0.0, *g, "x").into_string())
            .collect();
        for (i, a) in shapes.iter().enumerate() {
            for b in &shapes[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(FailGroup::of(FailureReason::Connect), FailGroup::Network);
        assert_eq!(FailGroup::of(FailureReason::HttpStatus), FailGroup::Http);
        assert_eq!(FailGroup::of(FailureReason::Truncated), FailGroup::Stream);
        let mut c = Chart::new(480.0, 240.0, (0.0, 600.0), (0.0, 330.0), true);
        c.failure(10.0, FailureReason::Timeout, "<b>");
        let svg = c.finish("c", "t", "", "").into_string();
        assert!(
            svg.contains("<path class=\"fail timeout\"")
                && svg.contains("<title>&lt;b&gt;</title></path>"),
            "{svg}"
        );
    }

    #[test]
    fn rolling_quantiles() {
        let pts: Vec<(f64, f64)> = (1..=5).map(|i| (f64::from(i), f64::from(i))).collect();
        // Type 7, as bench: the median of two values is their mean (nearest rank said 1.0).
        let p50 = rolling(&pts, 3, 0.5);
        assert_eq!(
            p50,
            vec![(1.0, 1.0), (2.0, 1.5), (3.0, 2.0), (4.0, 3.0), (5.0, 4.0)]
        );
        // P95 of 3, 4, 5: 4 + 0.9 × (5 − 4) (nearest rank said 5.0).
        let p95 = rolling(&pts, 3, 0.95);
        assert_eq!(p95.len(), 5);
        assert!((p95[4].1 - 4.9).abs() < 1e-12, "{p95:?}");
    }
}
