//! Loss curves as SVG line charts, shared by the training examples.

use std::path::Path;

use plotters::prelude::*;

/// One named curve and its colour.
pub struct Curve<'a> {
    /// The legend's label.
    pub label: &'a str,
    /// `(x, y)` points in order.
    pub points: &'a [(f64, f64)],
    /// The line's colour.
    pub color: RGBColor,
}

/// Writes `curves` to `path` as one 800x480 SVG chart with a legend, both
/// axes from 0.
pub fn line_chart(
    path: &Path,
    title: &str,
    (x_desc, y_desc): (&str, &str),
    curves: &[Curve],
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let points = || curves.iter().flat_map(|c| c.points.iter());
    let x_max = points().map(|p| p.0).fold(1.0f64, f64::max);
    let y_max = points().map(|p| p.1).fold(1e-3f64, f64::max) * 1.05;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()?;
    for c in curves {
        let color = c.color;
        chart
            .draw_series(LineSeries::new(c.points.iter().copied(), color))?
            .label(c.label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart.configure_series_labels().border_style(BLACK).draw()?;
    root.present()?;
    Ok(())
}
