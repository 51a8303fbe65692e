//! The report's roofline (`--profile ncu`): every kernel Nsight Compute profiled in the run,
//! the candidates' and the references' beside them, at its arithmetic intensity (FLOPs per DRAM
//! byte) and achieved rate (FLOP/s), under the GPU's roofs as the run measured them at start-up
//! (`sol`: the copy bandwidth's diagonal and each measured GEMM rate's ceiling). Measured
//! ceilings, not datasheet peaks, for the reason `sol` gives; the GEMM rates are tensor-core
//! rates where the dtype has them, while the kernels' FLOPs count no tensor-core work, so a
//! kernel's point sits below what it did on the tensor cores. A kernel that counted no FLOP or
//! moved no DRAM byte has no place on a log axis and is left out (the caption counts them).

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::nsight::Kernel;
use crate::record::{Ceilings, RunRecord};

type Drawn = Result<(), Box<dyn std::error::Error>>;
/// A point: FLOP per byte, GFLOP/s.
type Point = (f64, f64);

/// The kernels of the run as the plot places them.
pub struct Points {
    /// (FLOP/byte, GFLOP/s) of the candidates' own kernels, their library kernels, the
    /// references' kernels.
    pub own: Vec<Point>,
    pub library: Vec<Point>,
    pub reference: Vec<Point>,
    /// Profiled kernels with no place on the axes.
    pub left_out: usize,
}

/// Whether any evaluation of the run was profiled (the plot is drawn only then).
pub fn profiled(record: &RunRecord) -> bool {
    record.evaluations.iter().any(|e| e.ncu.is_some())
}

/// Every profiled kernel of the run, placed.
pub fn points(record: &RunRecord) -> Points {
    let mut points = Points {
        own: Vec::new(),
        library: Vec::new(),
        reference: Vec::new(),
        left_out: 0,
    };
    let place = |k: &Kernel| {
        Some((k.intensity()?, k.flops_per_s()? * 1e-9)).filter(|p| p.0 > 0.0 && p.1 > 0.0)
    };
    for ncu in record.evaluations.iter().filter_map(|e| e.ncu.as_ref()) {
        let candidate = ncu.candidate.iter().map(|k| (k, if k.own { 0 } else { 1 }));
        for (k, arm) in candidate.chain(ncu.reference.iter().map(|k| (k, 2))) {
            match (place(k), arm) {
                (None, _) => points.left_out += 1,
                (Some(p), 0) => points.own.push(p),
                (Some(p), 1) => points.library.push(p),
                (Some(p), _) => points.reference.push(p),
            }
        }
    }
    points
}

/// The roofs' extent: log axes covering the points and the ridge points, with a margin.
fn ranges(p: &Points, c: Option<&Ceilings>) -> ((f64, f64), (f64, f64)) {
    let all = || p.own.iter().chain(&p.library).chain(&p.reference);
    let peaks = c.map(|c| c.gemm_tflops.values().map(|t| t * 1e3).collect::<Vec<_>>());
    let bw = c.map(|c| c.copy_gbps);
    let ridges = peaks
        .iter()
        .flatten()
        .filter_map(|peak| Some(peak / bw?))
        .collect::<Vec<_>>();
    let span = |vs: Vec<f64>, lo: f64, hi: f64| {
        let (a, b) = vs
            .into_iter()
            .filter(|v| *v > 0.0 && v.is_finite())
            .fold((lo, hi), |(a, b), v| (a.min(v), b.max(v)));
        (a / 2.0, b * 2.0)
    };
    let x = span(all().map(|q| q.0).chain(ridges).collect(), 0.1, 10.0);
    let y = span(
        all()
            .map(|q| q.1)
            .chain(peaks.into_iter().flatten())
            .collect(),
        1.0,
        10.0,
    );
    (x, y)
}

/// The roofline: roofs where the run measured its ceilings, then the kernels.
pub fn draw(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    points: &Points,
    ceilings: Option<&Ceilings>,
) -> Drawn {
    let ((x0, x1), (y0, y1)) = ranges(points, ceilings);
    let mut chart = ChartBuilder::on(area)
        .caption("Roofline of the profiled kernels", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("arithmetic intensity, FLOP per DRAM byte (log)")
        .y_desc("GFLOP/s (log)")
        .draw()?;
    if let Some(c) = ceilings {
        let bw = c.copy_gbps;
        for (dtype, tflops) in &c.gemm_tflops {
            let peak = tflops * 1e3;
            let ridge = (peak / bw).clamp(x0, x1);
            let roof = [
                (x0, (bw * x0).max(y0)),
                (ridge, peak.min(bw * ridge)),
                (x1, peak),
            ];
            chart
                .draw_series(LineSeries::new(roof, BLACK.mix(0.4)))?
                .label(format!("roof: {bw:.0} GB/s, {tflops:.0} TFLOP/s {dtype}"))
                .legend(|(x, y)| PathElement::new([(x, y), (x + 12, y)], BLACK.mix(0.4)));
        }
    }
    let series: [(&[Point], RGBColor, bool, &str); 3] = [
        (
            &points.reference,
            RGBColor(230, 140, 0),
            false,
            "reference's kernels",
        ),
        (
            &points.library,
            RGBColor(70, 150, 200),
            false,
            "candidates' library kernels",
        ),
        (
            &points.own,
            RGBColor(26, 90, 180),
            true,
            "candidates' own kernels",
        ),
    ];
    for (placed, colour, filled, name) in series {
        let style = if filled {
            colour.filled()
        } else {
            colour.stroke_width(1)
        };
        chart
            .draw_series(placed.iter().map(|p| Circle::new(*p, 3, style)))?
            .label(name)
            .legend(move |(x, y)| Circle::new((x, y), 4, style));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK.mix(0.3))
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nsight::NcuProfile;

    fn kernel(flops: f64, bytes: f64, own: bool) -> Kernel {
        Kernel {
            name: "k".into(),
            own,
            duration_ns: Some(1e6),
            flops: Some(flops),
            dram_bytes: Some(bytes),
            ..Kernel::default()
        }
    }

    #[test]
    fn kernels_are_placed_by_arm_and_those_off_the_axes_counted() {
        let mut record = crate::record::fixtures::sample_record();
        assert!(!profiled(&record), "the sample record has no profile");
        record.evaluations[0].ncu = Some(NcuProfile {
            candidate: vec![
                kernel(2e9, 1e9, true),
                kernel(1e6, 1e9, false),
                kernel(0.0, 1e9, true),
            ],
            reference: vec![kernel(4e9, 1e9, false)],
        });
        assert!(profiled(&record));
        let p = points(&record);
        // 2e9 FLOPs over 1e9 bytes in 1 ms: 2 FLOP/byte at 2000 GFLOP/s.
        let near = |got: &[Point], want: Point| {
            got.len() == 1
                && (got[0].0 / want.0 - 1.0).abs() < 1e-9
                && (got[0].1 / want.1 - 1.0).abs() < 1e-9
        };
        assert!(near(&p.own, (2.0, 2000.0)), "{:?}", p.own);
        assert!(near(&p.library, (0.001, 1.0)), "{:?}", p.library);
        assert!(near(&p.reference, (4.0, 4000.0)), "{:?}", p.reference);
        assert_eq!(p.left_out, 1, "no FLOP: no place on a log axis");
        let ceilings = Ceilings {
            copy_gbps: 3000.0,
            gemm_tflops: [("tf32".to_string(), 400.0)].into(),
            gpu: "H100".into(),
            measured_s: 1.0,
        };
        let ((x0, x1), (y0, y1)) = ranges(&p, Some(&ceilings));
        assert!(
            x0 <= 0.001 && x1 >= 400e3 / 3000.0,
            "the ridge point is on the axis"
        );
        assert!(y0 <= 1.0 && y1 >= 400e3, "the roof is on the axis");
    }
}
