//! SVG charts of a sweep (`plotters`, SVG backend) that show the knee:
//!
//! - `ttft.svg`: TTFT P50/P95/P99 per level with their 95 % intervals as whiskers, the SLO line
//!   (labelled) and the SLA capacity marked;
//! - `tokens_per_second.svg`: per-request output tokens/s P50/P5 per level with whiskers, the
//!   floor line and the capacity;
//! - `throughput_latency.svg`: aggregate output tokens/s against P95 TTFT, one labelled point per
//!   level, with the SLO as a vertical line;
//! - `prefill.svg` (a prompt-length sweep only): prefill speed P50 per prompt length, the client's
//!   (prompt tokens per second of TTFT) and the server's own where it reports one.
//!
//! A prompt-length sweep's load axis is the generated prompt's size.
//!
//! Both axes are logarithmic: the load axis has a tick at each level (so 1, 2, 4, 8 … are evenly
//! spaced, a log₂ axis), the value axes ticks at 1, 2, 5 × 10ᵏ, labelled without `.0`. Colours are
//! the Okabe–Ito palette (distinguishable with the common colour-vision deficiencies), each
//! series also with its own marker shape; the legend sits in its own panel right of the plot,
//! so it never covers a point.

use plotters::coord::combinators::{IntoLogRange, LogCoord, WithKeyPoints};
use plotters::prelude::*;

use super::level::{LevelStats, Load};
use super::Report;

/// Okabe & Ito (2008), "Color Universal Design": blue, vermillion, bluish green, reddish purple.
const BLUE: RGBColor = RGBColor(0, 114, 178);
const VERMILLION: RGBColor = RGBColor(213, 94, 0);
const GREEN: RGBColor = RGBColor(0, 158, 115);
const PURPLE: RGBColor = RGBColor(204, 121, 167);
const INK: RGBColor = RGBColor(0, 0, 0);

/// A marker shape, so that series differ without colour too.
#[derive(Clone, Copy)]
enum Marker {
    Circle,
    Square,
    Triangle,
}

/// The largest magnitude a chart's axis takes (see [`draw`]).
const MAX_AXIS_VALUE: f64 = 1e15;

/// One series: legend, colour, marker, points and their intervals.
struct Series {
    label: String,
    color: RGBColor,
    marker: Marker,
    points: Vec<(f64, f64)>,
    /// `(x, low, high)` per point with an interval.
    whiskers: Vec<(f64, f64, f64)>,
    /// Text beside each point (the level), or none.
    point_labels: Vec<String>,
}

/// A labelled straight line across the plot: an objective (horizontal on a per-level chart,
/// vertical on the throughput–latency chart) or the capacity level (vertical).
struct Guide {
    label: String,
    value: f64,
    vertical: bool,
    color: RGBColor,
}

/// One chart to draw.
struct Chart<'a> {
    caption: String,
    x_desc: &'a str,
    y_desc: &'a str,
    /// Ticks of the x axis: the levels (per-level charts) or none (nice ticks are chosen).
    x_ticks: Option<Vec<f64>>,
    series: Vec<Series>,
    guides: Vec<Guide>,
    /// A note in the plot's top left (e.g. "SLA capacity: none").
    note: Option<String>,
}

/// A percentile and its 95 % interval `[low, high]` (`None`: an end the sample cannot bound).
type Estimate = (Option<f64>, [Option<f64>; 2]);

/// `x` as a tick label: integers without `.0`, others with up to 3 significant digits.
pub fn tick_label(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 * x.abs().max(1.0) || x.abs() >= 100.0 {
        return format!("{:.0}", x.round());
    }
    let digits = if x.abs() >= 10.0 {
        1
    } else if x.abs() >= 1.0 {
        2
    } else {
        3
    };
    let t = format!("{x:.digits$}");
    t.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Ticks at 1, 2, 5 × 10ᵏ within `[lo, hi]` (positive); at every 1…9 × 10ᵏ when that gives
/// fewer than three (a range within one decade).
fn nice_log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let ticks = |mantissas: &[f64]| {
        let mut out = Vec::new();
        let mut decade = 10f64.powf(lo.log10().floor());
        while decade <= hi {
            for m in mantissas {
                let v = decade * m;
                if v >= lo && v <= hi {
                    out.push(v);
                }
            }
            decade *= 10.0;
        }
        out
    };
    let coarse = ticks(&[1.0, 2.0, 5.0]);
    if coarse.len() >= 3 {
        coarse
    } else {
        ticks(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    }
}

/// The level's short name on charts: `C=4`, `2/s` or `4000 tok`.
fn level_name(load: Load) -> String {
    match load {
        Load::Concurrency(c) => format!("C={c}"),
        Load::Rate(r) => format!("{}/s", tick_label(r)),
        Load::Prompt { tokens, .. } => format!("{tokens} tok"),
    }
}

/// The charts as `(file name, SVG text)`: three, and `prefill.svg` for a prompt-length sweep.
///
/// Errors: plotters could not draw (a bug; the message says which chart).
pub fn charts(r: &Report) -> Result<Vec<(&'static str, String)>, String> {
    let stats: Vec<&LevelStats> = r.levels.iter().map(|(s, _)| s).collect();
    let first = stats
        .first()
        .map(|s| s.load)
        .or(r.plan.levels.first().copied());
    let x_desc = match first {
        Some(Load::Rate(_)) => "request rate (requests/s, log scale)",
        Some(Load::Prompt { .. }) => "prompt tokens (generated, log scale)",
        _ => "concurrency (virtual users, log₂ scale)",
    };
    let levels: Vec<f64> = stats.iter().map(|s| s.load.x()).collect();
    // Series side by side at a level: a small offset in log space keeps whiskers apart.
    let per_level = |label: &str,
                     color,
                     marker,
                     offset: f64,
                     pick: &dyn Fn(&LevelStats) -> Estimate,
                     scale: f64| {
        let mut points = Vec::new();
        let mut whiskers = Vec::new();
        for s in &stats {
            let (v, ci) = pick(s);
            let x = s.load.x() * offset;
            if let Some(v) = v.filter(|v| *v > 0.0) {
                points.push((x, v * scale));
                let low = ci[0].unwrap_or(v) * scale;
                let high = ci[1].unwrap_or(v) * scale;
                if low > 0.0 && high > low {
                    whiskers.push((x, low, high));
                }
            }
        }
        Series {
            label: label.to_string(),
            color,
            marker,
            points,
            whiskers,
            point_labels: Vec::new(),
        }
    };
    let slo_ms = r.target.slo.ttft_p95.as_secs_f64() * 1e3;
    let floor = r.target.slo.output_tokens_per_second_min;
    let capacity_guide = r.capacity.capacity.map(|load| Guide {
        label: format!("SLA capacity {}", level_name(load)),
        value: load.x(),
        vertical: true,
        color: GREEN,
    });
    let capacity_note = match (r.capacity.capacity, r.capacity.broken_at) {
        (None, Some(at)) => Some(format!(
            "SLA capacity: none ({} already breaks the SLA)",
            level_name(at)
        )),
        _ => None,
    };
    let ttft = Chart {
        caption: format!("TTFT per level — {} / {}", r.target.name, r.scenario.name),
        x_desc,
        y_desc: "TTFT (ms, log scale)",
        x_ticks: Some(levels.clone()),
        series: vec![
            per_level(
                "TTFT P50",
                BLUE,
                Marker::Circle,
                0.97,
                &|s| (s.ttft.p50, s.ttft.p50_ci),
                1e3,
            ),
            per_level(
                "TTFT P95",
                VERMILLION,
                Marker::Square,
                1.0,
                &|s| (s.ttft.p95, s.ttft.p95_ci),
                1e3,
            ),
            per_level(
                "TTFT P99",
                PURPLE,
                Marker::Triangle,
                1.03,
                &|s| (s.ttft.p99, s.ttft.p99_ci),
                1e3,
            ),
        ],
        guides: [
            Some(Guide {
                label: format!("SLO: P95 ≤ {} ms", tick_label(slo_ms)),
                value: slo_ms,
                vertical: false,
                color: INK,
            }),
            capacity_guide.as_ref().map(clone_guide),
        ]
        .into_iter()
        .flatten()
        .collect(),
        note: capacity_note.clone(),
    };
    let tps = Chart {
        caption: format!(
            "Per-request output tokens/s — {} / {}",
            r.target.name, r.scenario.name
        ),
        x_desc,
        y_desc: "output tokens/s per request (log scale)",
        x_ticks: Some(levels.clone()),
        series: vec![
            per_level(
                "tokens/s P50",
                BLUE,
                Marker::Circle,
                0.98,
                &|s| {
                    (
                        s.output_tokens_per_second.p50,
                        s.output_tokens_per_second.p50_ci,
                    )
                },
                1.0,
            ),
            per_level(
                "tokens/s P5",
                VERMILLION,
                Marker::Square,
                1.02,
                &|s| {
                    (
                        s.output_tokens_per_second.p5,
                        s.output_tokens_per_second.p5_ci,
                    )
                },
                1.0,
            ),
        ],
        guides: [
            (floor > 0.0).then(|| Guide {
                label: format!("SLO: P5 ≥ {} tokens/s", tick_label(floor)),
                value: floor,
                vertical: false,
                color: INK,
            }),
            capacity_guide.as_ref().map(clone_guide),
        ]
        .into_iter()
        .flatten()
        .collect(),
        note: capacity_note,
    };
    let (curve, names): (Vec<(f64, f64)>, Vec<String>) = stats
        .iter()
        .filter_map(|s| {
            let p = s.ttft.p95.filter(|p| *p > 0.0)?;
            (s.output_throughput > 0.0)
                .then(|| ((p * 1e3, s.output_throughput), level_name(s.load)))
        })
        .unzip();
    let throughput = Chart {
        caption: format!(
            "Throughput vs latency — {} / {}",
            r.target.name, r.scenario.name
        ),
        x_desc: "TTFT P95 (ms, log scale)",
        y_desc: "aggregate output tokens/s (log scale)",
        x_ticks: None,
        series: vec![Series {
            label: "levels".into(),
            color: BLUE,
            marker: Marker::Circle,
            points: curve,
            whiskers: Vec::new(),
            point_labels: names,
        }],
        guides: vec![Guide {
            label: format!("SLO: P95 ≤ {} ms", tick_label(slo_ms)),
            value: slo_ms,
            vertical: true,
            color: INK,
        }],
        note: None,
    };
    let mut out = vec![
        ("ttft.svg", draw(&ttft)?),
        ("tokens_per_second.svg", draw(&tps)?),
        ("throughput_latency.svg", draw(&throughput)?),
    ];
    if matches!(first, Some(Load::Prompt { .. })) {
        let mut prefill = Chart {
            caption: format!(
                "Prefill speed per prompt length — {} / {}",
                r.target.name, r.scenario.name
            ),
            x_desc,
            y_desc: "prompt tokens/s (P50, log scale)",
            x_ticks: Some(levels.clone()),
            series: vec![
                per_level(
                    "client: prompt / TTFT",
                    BLUE,
                    Marker::Circle,
                    0.98,
                    &|s| {
                        (
                            s.prefill_tokens_per_second.p50,
                            s.prefill_tokens_per_second.p50_ci,
                        )
                    },
                    1.0,
                ),
                per_level(
                    "server's own prefill",
                    VERMILLION,
                    Marker::Square,
                    1.02,
                    &|s| {
                        (
                            s.server_prefill_tokens_per_second.p50,
                            s.server_prefill_tokens_per_second.p50_ci,
                        )
                    },
                    1.0,
                ),
            ],
            guides: r
                .target
                .slo
                .prefill_tokens_per_second_min
                .map(|floor| Guide {
                    label: format!("SLO: ≥ {} tokens/s", tick_label(floor)),
                    value: floor,
                    vertical: false,
                    color: INK,
                })
                .into_iter()
                .collect(),
            note: None,
        };
        // A server that reports no prefill time has no series to show (nor a legend entry).
        if prefill.series[1].points.is_empty() {
            prefill.series.truncate(1);
            prefill.note = Some("the server reported no prefill time of its own".into());
        }
        out.push(("prefill.svg", draw(&prefill)?));
    }
    Ok(out)
}

fn clone_guide(g: &Guide) -> Guide {
    Guide {
        label: g.label.clone(),
        value: g.value,
        vertical: g.vertical,
        color: g.color,
    }
}

/// A positive range holding `values`, widened by a quarter of a decade each side (a single value
/// gets a decade around it); `(1, 10)` without values.
fn log_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    if !lo.is_finite() {
        return (1.0, 10.0);
    }
    let pad = if hi / lo < 1.5 {
        10f64.powf(0.5)
    } else {
        10f64.powf(0.12)
    };
    (lo / pad, hi * pad)
}

/// The chart's axis: logarithmic, with ticks at `ticks`.
fn axis(lo: f64, hi: f64, ticks: Vec<f64>) -> WithKeyPoints<LogCoord<f64>> {
    use plotters::coord::combinators::BindKeyPoints;
    (lo..hi).log_scale().with_key_points(ticks)
}

/// Width of the plot panel; the legend panel takes the rest of the 900 × 520 image.
const PLOT_WIDTH: u32 = 690;

fn draw(c: &Chart) -> Result<String, String> {
    let mut svg = String::new();
    let err = |e: &dyn std::fmt::Display| format!("drawing the chart {:?}: {e}", c.caption);
    // The axes are laid out by stepping through decades and key points: beyond this magnitude
    // (or at a non-finite value) the steps overflow and never end.
    let values = c
        .series
        .iter()
        .flat_map(|s| {
            let points = s.points.iter().flat_map(|&(x, y)| [x, y]);
            points.chain(s.whiskers.iter().flat_map(|&(x, lo, hi)| [x, lo, hi]))
        })
        .chain(c.guides.iter().map(|g| g.value))
        .chain(c.x_ticks.iter().flatten().copied());
    if let Some(bad) = values
        .into_iter()
        .find(|v| !v.is_finite() || v.abs() > MAX_AXIS_VALUE)
    {
        return Err(err(&format_args!(
            "the value {bad:e} cannot be drawn (charts take values up to {MAX_AXIS_VALUE:e}); the reports hold the numbers"
        )));
    }
    {
        let root = SVGBackend::with_string(&mut svg, (900, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let root = root
            .titled(&c.caption, ("sans-serif", 20))
            .map_err(|e| err(&e))?;
        let (plot_area, legend_area) = root.split_horizontally(PLOT_WIDTH);
        let xs = c.series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
        let guide_x = c.guides.iter().filter(|g| g.vertical).map(|g| g.value);
        let (x0, x1) = match &c.x_ticks {
            Some(levels) => log_range(levels.iter().copied().chain(xs)),
            None => log_range(xs.chain(guide_x)),
        };
        let ys = c.series.iter().flat_map(|s| {
            s.points
                .iter()
                .map(|p| p.1)
                .chain(s.whiskers.iter().flat_map(|w| [w.1, w.2]))
        });
        let guide_y = c.guides.iter().filter(|g| !g.vertical).map(|g| g.value);
        let (y0, y1) = log_range(ys.chain(guide_y));
        let x_ticks = c.x_ticks.clone().unwrap_or_else(|| nice_log_ticks(x0, x1));
        let mut chart = ChartBuilder::on(&plot_area)
            .margin(12)
            .x_label_area_size(48)
            .y_label_area_size(64)
            .build_cartesian_2d(axis(x0, x1, x_ticks), axis(y0, y1, nice_log_ticks(y0, y1)))
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc(c.x_desc)
            .y_desc(c.y_desc)
            .x_label_formatter(&|v| tick_label(*v))
            .y_label_formatter(&|v| tick_label(*v))
            .light_line_style(WHITE)
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(|e| err(&e))?;
        for g in &c.guides {
            let style = ShapeStyle::from(&g.color).stroke_width(2);
            let (line, anchor, offset) = if g.vertical {
                (vec![(g.value, y0), (g.value, y1)], (g.value, y1), (4, 4))
            } else {
                (vec![(x0, g.value), (x1, g.value)], (x0, g.value), (6, -18))
            };
            chart
                .draw_series(DashedLineSeries::new(line, 8, 6, style))
                .map_err(|e| err(&e))?;
            let text = EmptyElement::at(anchor)
                + Text::new(
                    g.label.clone(),
                    offset,
                    ("sans-serif", 14).into_font().color(&g.color),
                );
            chart
                .draw_series(std::iter::once(text))
                .map_err(|e| err(&e))?;
        }
        if let Some(note) = &c.note {
            let text = EmptyElement::at((x0, y1))
                + Text::new(
                    note.clone(),
                    (8, 6),
                    ("sans-serif", 14).into_font().color(&GREEN),
                );
            chart
                .draw_series(std::iter::once(text))
                .map_err(|e| err(&e))?;
        }
        for s in &c.series {
            let style = ShapeStyle::from(&s.color).stroke_width(2);
            if s.points.len() > 1 {
                chart
                    .draw_series(LineSeries::new(s.points.clone(), style))
                    .map_err(|e| err(&e))?;
            }
            for &(x, lo, hi) in &s.whiskers {
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(x, lo), (x, hi)],
                        style,
                    )))
                    .map_err(|e| err(&e))?;
                let caps = [lo, hi].map(|y| {
                    EmptyElement::at((x, y)) + PathElement::new(vec![(-5, 0), (5, 0)], style)
                });
                chart.draw_series(caps).map_err(|e| err(&e))?;
            }
            let filled = style.filled();
            for &p in &s.points {
                match s.marker {
                    Marker::Circle => chart
                        .draw_series(std::iter::once(Circle::new(p, 5, filled)))
                        .map(|_| ()),
                    Marker::Square => chart
                        .draw_series(std::iter::once(
                            EmptyElement::at(p) + Rectangle::new([(-5, -5), (5, 5)], filled),
                        ))
                        .map(|_| ()),
                    Marker::Triangle => chart
                        .draw_series(std::iter::once(TriangleMarker::new(p, 6, filled)))
                        .map(|_| ()),
                }
                .map_err(|e| err(&e))?;
            }
            let texts = s.points.iter().zip(&s.point_labels).map(|(p, t)| {
                EmptyElement::at(*p) + Text::new(t.clone(), (8, -18), ("sans-serif", 14))
            });
            chart.draw_series(texts).map_err(|e| err(&e))?;
        }
        legend(&legend_area, c).map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
    }
    Ok(svg)
}

/// The legend in its own panel: one entry per series (line and marker) and per guide (dashed).
fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    c: &Chart,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let mut y = 40;
    for s in &c.series {
        let style = ShapeStyle::from(&s.color).stroke_width(2);
        area.draw(&PathElement::new(vec![(8, y), (40, y)], style))?;
        match s.marker {
            Marker::Circle => area.draw(&Circle::new((24, y), 5, style.filled()))?,
            Marker::Square => {
                area.draw(&Rectangle::new([(19, y - 5), (29, y + 5)], style.filled()))?
            }
            Marker::Triangle => area.draw(&TriangleMarker::new((24, y), 6, style.filled()))?,
        }
        area.draw(&Text::new(s.label.clone(), (48, y - 8), ("sans-serif", 14)))?;
        y += 24;
    }
    if c.series.iter().any(|s| !s.whiskers.is_empty()) {
        area.draw(&Text::new(
            "whiskers: 95 % CI".to_string(),
            (8, y - 8),
            ("sans-serif", 13),
        ))?;
        y += 24;
    }
    for g in &c.guides {
        let style = ShapeStyle::from(&g.color).stroke_width(2);
        area.draw(&PathElement::new(vec![(8, y), (18, y)], style))?;
        area.draw(&PathElement::new(vec![(26, y), (36, y)], style))?;
        area.draw(&Text::new(g.label.clone(), (48, y - 8), ("sans-serif", 14)))?;
        y += 24;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(points: Vec<(f64, f64)>) -> Chart<'static> {
        Chart {
            caption: "c".into(),
            x_desc: "x",
            y_desc: "y",
            x_ticks: None,
            series: vec![Series {
                label: "l".into(),
                color: BLUE,
                marker: Marker::Circle,
                points,
                whiskers: Vec::new(),
                point_labels: Vec::new(),
            }],
            guides: Vec::new(),
            note: None,
        }
    }

    /// Values the axes cannot be laid over (the layout looped for ever over a 1e308-wide
    /// axis) give an error at once, not a hang.
    #[test]
    fn absurd_values_are_refused_not_drawn_for_ever() {
        for points in [
            vec![(1.0, 1.0), (1e308, 2.0)],
            vec![(1e300, 1.0), (1.5e300, 2.0)],
            vec![(1.0, 1.0), (2.0, 1e200)],
            vec![(1.0, f64::INFINITY), (2.0, 1.0)],
        ] {
            let (tx, rx) = std::sync::mpsc::channel();
            let p = points.clone();
            std::thread::spawn(move || {
                let _ = tx.send(draw(&chart(p)));
            });
            let r = rx
                .recv_timeout(std::time::Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("{points:?}: drawing did not end"));
            let e = r.err().unwrap_or_else(|| panic!("{points:?} was drawn"));
            assert!(e.contains("cannot be drawn"), "{points:?}: {e}");
        }
        let ok = draw(&chart(vec![(1.0, 5.0), (100_000.0, 9e6)])).unwrap();
        assert!(ok.starts_with("<svg"), "{ok}");
    }

    #[test]
    fn ticks_are_integers_without_a_decimal_point() {
        assert_eq!(tick_label(4.0), "4");
        assert_eq!(tick_label(300.0), "300");
        assert_eq!(tick_label(0.5), "0.5");
        assert_eq!(tick_label(2.5), "2.5");
        assert_eq!(tick_label(1234.4), "1234");
        assert_eq!(
            nice_log_ticks(15.0, 600.0),
            vec![20.0, 50.0, 100.0, 200.0, 500.0]
        );
    }
}
