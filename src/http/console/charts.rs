//! Small inline SVG charts drawn on the server: bars (a value per hour or per run) and a line
//! (the queue's depth). No script draws them; each mark has a `<title>` for a tooltip.

use super::html::Text;
use maud::{Markup, html};

const WIDTH: f64 = 360.0;
const HEIGHT: f64 = 130.0;
const LEFT: f64 = 22.0;
const RIGHT: f64 = 6.0;
/// The plot starts below the «макс.» label, so no mark ever covers it.
const TOP: f64 = 20.0;
const BOTTOM: f64 = 18.0;

/// One mark of a chart.
pub(super) struct Mark {
    /// Shown in the tooltip beside the value.
    pub label: String,
    pub value: f64,
    /// A CSS class of the mark (`bad` for a failed run).
    pub class: &'static str,
}

/// The figure, its axes and the words under the first and last mark, around `plot` (the marks).
fn frame(title: &str, marks: &[Mark], unit: Unit, first: &str, last: &str, plot: Markup) -> Markup {
    let max = marks.iter().map(|m| m.value).fold(0.0, f64::max);
    let bottom = HEIGHT - BOTTOM;
    html! {
        figure.chart {
            figcaption { (Text(title)) }
            svg viewBox={ "0 0 " (WIDTH) " " (HEIGHT) } role="img" aria-label=(Text(title)) {
                line.axis x1=(LEFT) y1=(bottom) x2=(WIDTH - RIGHT) y2=(bottom) {}
                line.grid x1=(LEFT) y1=(TOP) x2=(WIDTH - RIGHT) y2=(TOP) {}
                text.tick x=(LEFT + 4.0) y=(TOP - 6.0) { "макс. " (amount(max, unit)) }
                text.tick x=(LEFT - 4.0) y=(bottom) text-anchor="end" { "0" }
                text.tick x=(LEFT) y=(HEIGHT - 4.0) { (Text(first)) }
                text.tick x=(WIDTH - RIGHT) y=(HEIGHT - 4.0) text-anchor="end" { (Text(last)) }
                (plot)
            }
        }
    }
}

/// A unit's Russian forms for 1, 2 and 5 of it: `["команда", "команды", "команд"]`.
pub(super) type Unit = &'static crate::domain::words::Forms;

/// A value with its unit in the right form: `1 команда`, `3 команды`, `2,5 с`.
fn amount(value: f64, unit: Unit) -> String {
    let form = if value.fract() != 0.0 {
        unit[1]
    } else {
        crate::domain::words::plural(value.abs() as u64, unit)
    };
    format!("{} {form}", number(value))
}

/// A number without a needless fraction: `12`, `2,5`; under a tenth two digits (`0,04`: a
/// quick refresh is not «0,0 с»).
fn number(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else if value.abs() < 0.1 {
        format!("{value:.2}").replace('.', ",")
    } else {
        format!("{value:.1}").replace('.', ",")
    }
}

/// The value drawn at the top of the plot: the largest, or 1 when every value is 0.
fn scale(marks: &[Mark]) -> f64 {
    let max = marks.iter().map(|m| m.value).fold(0.0, f64::max);
    if max <= 0.0 { 1.0 } else { max }
}

/// Bars, one per mark, left to right; `first` and `last` name the ends of the axis.
pub(super) fn bars(title: &str, unit: Unit, marks: &[Mark], first: &str, last: &str) -> Markup {
    let max = scale(marks);
    let plot = WIDTH - LEFT - RIGHT;
    let height = HEIGHT - TOP - BOTTOM;
    let step = plot / marks.len().max(1) as f64;
    let gap = if step > 4.0 { 1.0 } else { 0.0 };
    let bars = html! {
        @for (i, mark) in marks.iter().enumerate() {
            @let h = (mark.value.max(0.0) / max * height).max(if mark.value > 0.0 { 1.0 } else { 0.0 });
            @let x = LEFT + i as f64 * step;
            rect class={ "bar " (mark.class) } x=(tenths(x)) y=(tenths(HEIGHT - BOTTOM - h))
                width=(tenths((step - gap).max(0.5))) height=(tenths(h)) {
                title { (Text(&mark.label)) ": " (amount(mark.value, unit)) }
            }
        }
    };
    frame(title, marks, unit, first, last, bars)
}

/// A coordinate to a tenth.
fn tenths(value: f64) -> String {
    format!("{value:.1}")
}

/// A line through the marks, with the area under it shaded.
pub(super) fn line(title: &str, unit: Unit, marks: &[Mark], first: &str, last: &str) -> Markup {
    let max = scale(marks);
    let plot = WIDTH - LEFT - RIGHT;
    let height = HEIGHT - TOP - BOTTOM;
    let step = plot / (marks.len().max(2) - 1) as f64;
    let points: Vec<(f64, f64)> = marks
        .iter()
        .enumerate()
        .map(|(i, mark)| {
            (
                LEFT + i as f64 * step,
                HEIGHT - BOTTOM - mark.value.max(0.0) / max * height,
            )
        })
        .collect();
    let path: String = points
        .iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect::<Vec<_>>()
        .join(" ");
    let bottom = HEIGHT - BOTTOM;
    let drawn = html! {
        @if let (Some(first), Some(last)) = (points.first(), points.last()) {
            polygon.area points={ (tenths(first.0)) "," (bottom) " " (path) " " (tenths(last.0)) "," (bottom) } {}
            polyline.line points=(path) {}
        }
        // Invisible columns carry each point's tooltip.
        @for ((x, _), mark) in points.iter().zip(marks) {
            rect.hover x=(tenths(x - step / 2.0)) y=(TOP) width=(tenths(step)) height=(tenths(height)) {
                title { (Text(&mark.label)) ": " (amount(mark.value, unit)) }
            }
        }
    };
    frame(title, marks, unit, first, last, drawn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_escaped_and_scaled() {
        let marks = [
            Mark {
                label: "<b>".into(),
                value: 2.0,
                class: "",
            },
            Mark {
                label: "x".into(),
                value: 4.0,
                class: "bad",
            },
        ];
        const COMMANDS: Unit = &["команда", "команды", "команд"];
        let svg = bars("Заголовок", COMMANDS, &marks, "a", "b").into_string();
        assert!(svg.contains("&lt;b&gt;: 2 команды"), "{svg}");
        assert!(!svg.contains("<b>"));
        assert!(svg.contains("макс. 4 команды"));
        // The «макс.» label sits above the plot: the tallest bar starts below it.
        assert!(svg.contains("y=\"14\">макс. 4 команды</text>"), "{svg}");
        assert!(
            svg.contains("class=\"bar bad\" x=\"188.0\" y=\"20.0\""),
            "{svg}"
        );
        let svg = line("Очередь", COMMANDS, &marks, "a", "b").into_string();
        assert!(svg.contains("<polyline"));
        assert_eq!(amount(2.5, COMMANDS), "2,5 команды");
        assert_eq!(amount(1.0, COMMANDS), "1 команда");
        assert_eq!(amount(11.0, COMMANDS), "11 команд");
        assert_eq!(amount(22.0, COMMANDS), "22 команды");
        assert_eq!(amount(0.0, COMMANDS), "0 команд");
        const SECONDS: Unit = &["с", "с", "с"];
        assert_eq!(amount(0.04, SECONDS), "0,04 с");
    }
}
