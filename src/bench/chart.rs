//! SVG charts of a sweep (`plotters`, SVG backend): TTFT P50/P95/P99 per level with the SLO
//! line, per-request output tokens/s P50/P5 per level with the floor, and the throughput–latency
//! curve (aggregate output tokens/s against P95 TTFT).

use plotters::prelude::*;

use super::level::{LevelStats, Load};
use super::Report;

/// The largest magnitude a chart's axis takes (see [`draw`]).
const MAX_AXIS_VALUE: f64 = 1e15;

/// One line of a chart: its legend, colour and points.
struct Line {
    label: String,
    color: RGBColor,
    points: Vec<(f64, f64)>,
    dashed: bool,
    /// A text beside each point (the level), or none.
    point_labels: Vec<String>,
}

/// The three charts as `(file name, SVG text)`.
///
/// Errors: plotters could not draw (a bug; the message says which chart).
pub fn charts(r: &Report) -> Result<Vec<(&'static str, String)>, String> {
    let stats: Vec<&LevelStats> = r.levels.iter().map(|(s, _)| s).collect();
    let x_desc = match stats.first().map(|s| s.load) {
        Some(Load::Rate(_)) => "request rate (requests/s)",
        _ => "concurrency (virtual users)",
    };
    let xs: Vec<f64> = stats.iter().map(|s| s.load.x()).collect();
    let series = |f: &dyn Fn(&LevelStats) -> Option<f64>, scale: f64| -> Vec<(f64, f64)> {
        stats
            .iter()
            .filter_map(|s| f(s).map(|y| (s.load.x(), y * scale)))
            .collect()
    };
    let flat = |y: f64| -> Vec<(f64, f64)> {
        let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if lo.is_finite() {
            vec![(lo, y), (hi, y)]
        } else {
            Vec::new()
        }
    };
    let slo_ms = r.target.slo.ttft_p95.as_secs_f64() * 1e3;
    let floor = r.target.slo.output_tokens_per_second_min;
    let line = |label: &str, color, points, dashed| Line {
        label: label.to_string(),
        color,
        points,
        dashed,
        point_labels: Vec::new(),
    };
    let ttft = vec![
        line("TTFT P50", BLUE, series(&|s| s.ttft.p50, 1e3), false),
        line("TTFT P95", MAGENTA, series(&|s| s.ttft.p95, 1e3), false),
        line("TTFT P99", RED, series(&|s| s.ttft.p99, 1e3), false),
        line(
            &format!("SLO P95 ≤ {slo_ms:.0} ms"),
            BLACK,
            flat(slo_ms),
            true,
        ),
    ];
    let tps = vec![
        line(
            "tokens/s P50",
            BLUE,
            series(&|s| s.output_tokens_per_second.p50, 1.0),
            false,
        ),
        line(
            "tokens/s P5",
            RED,
            series(&|s| s.output_tokens_per_second.p5, 1.0),
            false,
        ),
        line(&format!("floor {floor} tokens/s"), BLACK, flat(floor), true),
    ];
    let (curve, names): (Vec<(f64, f64)>, Vec<String>) = stats
        .iter()
        .filter_map(|s| {
            let name = match s.load {
                Load::Concurrency(c) => format!("C={c}"),
                Load::Rate(r) => format!("{r}/s"),
            };
            s.ttft.p95.map(|p| ((p * 1e3, s.output_throughput), name))
        })
        .unzip();
    let mut curve = line("levels", BLUE, curve, false);
    curve.point_labels = names;
    let title = format!("{} / {}", r.target.name, r.scenario.name);
    Ok(vec![
        (
            "ttft.svg",
            draw(
                &format!("TTFT per level — {title}"),
                x_desc,
                "TTFT (ms)",
                &ttft,
                SeriesLabelPosition::UpperLeft,
            )?,
        ),
        (
            "tokens_per_second.svg",
            draw(
                &format!("Per-request output tokens/s — {title}"),
                x_desc,
                "output tokens/s per request",
                &tps,
                SeriesLabelPosition::UpperRight,
            )?,
        ),
        (
            "throughput_latency.svg",
            draw(
                &format!("Throughput vs latency — {title}"),
                "TTFT P95 (ms)",
                "aggregate output tokens/s",
                &[curve],
                SeriesLabelPosition::LowerRight,
            )?,
        ),
    ])
}

fn range(lines: &[Line], pick: fn(&(f64, f64)) -> f64) -> (f64, f64) {
    let vals = lines.iter().flat_map(|l| l.points.iter().map(pick));
    let (lo, hi) = vals.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.05).max(1e-9);
    ((lo - pad).min(0.0_f64.max(lo - pad)), hi + pad)
}

/// Where the legend goes: the corner each chart's lines leave free (TTFT rises to the right,
/// tokens/s falls, throughput–latency ends to the right at the top).
fn draw(
    caption: &str,
    x_desc: &str,
    y_desc: &str,
    lines: &[Line],
    legend: SeriesLabelPosition,
) -> Result<String, String> {
    let mut svg = String::new();
    let err = |e: &dyn std::fmt::Display| format!("drawing the chart {caption:?}: {e}");
    // The plotting crate lays its axes out by stepping through key points: beyond this
    // magnitude (or at a non-finite value) the steps stop moving and it never returns.
    if let Some(bad) = lines
        .iter()
        .flat_map(|l| &l.points)
        .flat_map(|&(x, y)| [x, y])
        .find(|v| !v.is_finite() || v.abs() > MAX_AXIS_VALUE)
    {
        return Err(err(&format_args!(
            "the value {bad:e} cannot be drawn (charts take values up to {MAX_AXIS_VALUE:e}); the reports hold the numbers"
        )));
    }
    {
        let root = SVGBackend::with_string(&mut svg, (900, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let (x0, x1) = range(lines, |p| p.0);
        let (y0, y1) = range(lines, |p| p.1);
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(x0..x1, y0.max(0.0)..y1)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .draw()
            .map_err(|e| err(&e))?;
        for l in lines {
            let style = ShapeStyle::from(&l.color).stroke_width(2);
            let color = l.color;
            let points = l.points.clone();
            if l.dashed {
                chart
                    .draw_series(DashedLineSeries::new(points, 8, 6, style))
                    .map_err(|e| err(&e))?
            } else {
                chart
                    .draw_series(LineSeries::new(points, style).point_size(4))
                    .map_err(|e| err(&e))?
            }
            .label(l.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            let texts = l.points.iter().zip(&l.point_labels).map(|(p, t)| {
                EmptyElement::at(*p) + Text::new(t.clone(), (6, -18), ("sans-serif", 14))
            });
            chart.draw_series(texts).map_err(|e| err(&e))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(legend)
            .draw()
            .map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(points: Vec<(f64, f64)>) -> Line {
        Line {
            label: "l".into(),
            color: BLUE,
            points,
            dashed: false,
            point_labels: Vec::new(),
        }
    }

    /// Issue 27, item 7: values the plotting crate cannot lay an axis over (it looped for ever
    /// computing the key points of a 1e308-wide axis) give an error at once, not a hang.
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
                let _ = tx.send(draw(
                    "c",
                    "x",
                    "y",
                    &[line(p)],
                    SeriesLabelPosition::UpperLeft,
                ));
            });
            let r = rx
                .recv_timeout(std::time::Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("{points:?}: drawing did not end"));
            let e = r.err().unwrap_or_else(|| panic!("{points:?} was drawn"));
            assert!(e.contains("cannot be drawn"), "{points:?}: {e}");
        }
        let ok = draw(
            "c",
            "x",
            "y",
            &[line(vec![(1.0, 5.0), (100_000.0, 9e6)])],
            SeriesLabelPosition::UpperLeft,
        )
        .unwrap();
        assert!(ok.starts_with("<svg"));
    }
}
