//! Speed of light (docs/design/timing.md 10.4 item 18): the least time a task can take on this machine,
//! from the task's facts (bytes every call moves, matmul/convolution FLOPs) and ceilings measured
//! on the machine at start-up (device copy bandwidth, GEMM rate per dtype). %SOL = T_SOL / median
//! time. A candidate well above 100 % ran faster than the hardware allows: its timing is invalid (work
//! the events did not see, or a broken measurement) and the gate fails it. Measured ceilings
//! rather than datasheet peaks, because clocks, power caps and SKUs differ from the datasheet.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::probe::Probe;
use crate::record::{Ceilings, Evaluation};
use crate::taskfacts::TaskFacts;
use crate::worker::request::{Command, MeasureCeilings};
use crate::worker::{Link, Reply, Spawn, Worker};

/// Above this %SOL the candidate's timing is invalid. Not 100: the ceilings are themselves
/// measured (best of a few), and on the H100 PyTorch's own ReLU at full size already read 100 %
/// of the measured copy bandwidth, so an honest kernel a few percent faster must not be ruled out.
pub const MAX_PERCENT_SOL: f64 = 105.0;
/// Above this speedup a result is flagged for review (KernelBench's rule), not failed.
pub const REVIEW_SPEEDUP: f64 = 10.0;
/// torch's import and CUDA context dominate; the measurement itself takes about 2 s.
const MEASURE_DEADLINE: Duration = Duration::from_secs(180);
/// Part of the cache key: bump it when roles/ceilings.py measures differently.
const METHOD_VERSION: u32 = 1;

/// Whether measured ceilings are usable: every rate finite and positive.
fn is_valid(c: &Ceilings) -> bool {
    let rate = |v: f64| v.is_finite() && v > 0.0;
    rate(c.copy_gbps) && c.gemm_tflops.values().all(|&v| rate(v))
}

/// The GEMM rate that bounds a run at `precision`. fp32 runs take the TF32 rate: cuDNN lets fp32
/// convolutions use TF32 by default, so the reference itself may beat the strict fp32 rate.
fn gemm_key(precision: &str) -> &str {
    match precision {
        "fp32" => "tf32",
        other => other,
    }
}

/// Task facts count bytes at the task's own dtypes (float32 in KernelBench); a half-precision
/// run halves its float tensors but not its integer ones. Halving every byte keeps T_SOL a lower
/// bound.
fn byte_scale(precision: &str) -> f64 {
    match precision {
        "fp16" | "bf16" => 0.5,
        _ => 1.0,
    }
}

/// T_SOL in ms: max(min_bytes / copy bandwidth, FLOPs / GEMM rate at `precision`), each term
/// only when known. A missing term leaves a smaller but still valid lower bound; None when
/// neither is known. `min_bytes` counts every input, parameter and output byte once; FLOPs count
/// matmuls and convolutions only (elementwise work is bounded by the bytes).
pub fn t_sol_ms(facts: &TaskFacts, ceilings: &Ceilings, precision: &str) -> Option<f64> {
    let memory = facts
        .min_bytes
        .map(|b| b as f64 * byte_scale(precision) / (ceilings.copy_gbps * 1e9) * 1e3);
    let compute = facts
        .flops
        .zip(ceilings.gemm_tflops.get(gemm_key(precision)))
        .map(|(f, tflops)| f as f64 / (tflops * 1e12) * 1e3);
    match (memory, compute) {
        (Some(m), Some(c)) => Some(m.max(c)),
        (m, c) => m.or(c),
    }
    .filter(|t| t.is_finite() && *t > 0.0)
}

/// 100 × T_SOL / median: how close a measured time is to the speed of light.
pub fn percent_sol(t_sol_ms: f64, median_ms: f64) -> Option<f64> {
    (median_ms.is_finite() && median_ms > 0.0).then(|| 100.0 * t_sol_ms / median_ms)
}

/// Add the physical checks to a timed evaluation: %SOL of both arms when the task's facts and
/// the ceilings are known, `invalid` with a warning when the candidate beats the speed of light,
/// and a review warning above `REVIEW_SPEEDUP`. Not enforced (a warning only) on degenerate
/// tasks, where an honest kernel may skip reading its inputs, or when the reference itself beats
/// the bound, which means the facts or the ceilings are off for this task. Call once per
/// evaluation.
pub fn annotate(
    eval: &mut Evaluation,
    facts: Option<&TaskFacts>,
    ceilings: Option<&Ceilings>,
    precision: &str,
) {
    let Some(t) = eval.timing.as_mut() else {
        return;
    };
    if t.speedup > REVIEW_SPEEDUP {
        t.warnings.push(format!(
            "speedup {:.1}x above {REVIEW_SPEEDUP}x: flagged for review",
            t.speedup
        ));
    }
    let Some((facts, sol)) = facts
        .zip(ceilings)
        .and_then(|(f, c)| Some((f, t_sol_ms(f, c, precision)?)))
    else {
        return;
    };
    t.sol_ms = Some(sol);
    t.percent_sol = percent_sol(sol, t.candidate.median_ms);
    t.reference_percent_sol = percent_sol(sol, t.reference.median_ms);
    let Some(candidate) = t.percent_sol.filter(|p| *p > MAX_PERCENT_SOL) else {
        return;
    };
    if !facts.degenerate.is_empty() {
        t.warnings.push(format!(
            "{candidate:.0} % SOL on a degenerate task ({}): not enforced",
            facts.degenerate.join(", ")
        ));
    } else if let Some(reference) = t.reference_percent_sol.filter(|p| *p > MAX_PERCENT_SOL) {
        t.warnings.push(format!(
            "{candidate:.0} % SOL, but the reference runs at {reference:.0} % SOL: the task's \
             facts or the ceilings are off, not enforced"
        ));
    } else {
        t.invalid = true;
        t.warnings.push(format!(
            "faster than the speed of light: {candidate:.0} % SOL (timing invalid)"
        ));
    }
}

/// The cache key of a GPU's ceilings: its name and UUID, the driver, torch (which ships cuBLAS)
/// and the method. None without a UUID: another GPU of the same model must not share them.
fn cache_key(gpu: &Value, driver: Option<&str>, torch: Option<&str>) -> Option<String> {
    let uuid = gpu["uuid"].as_str().filter(|u| !u.is_empty())?;
    let mut h = Sha256::new();
    for part in [
        gpu["name"].as_str().unwrap_or_default(),
        uuid,
        driver.unwrap_or_default(),
        torch.unwrap_or_default(),
        &METHOD_VERSION.to_string(),
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    Some(format!("{:x}", h.finalize()))
}

/// The ceilings of GPU `gpu` (an index in PCI bus order, as kbench's workers see it): from the
/// cache, else measured by a `ceilings` worker and cached, so repeated runs on the same GPU,
/// driver and torch do not measure again. Call once at start-up, before any evaluation uses the
/// GPU: the measurement needs it to itself.
pub fn load_or_measure(
    python: &str,
    worker_path: &Path,
    cache: &Path,
    probe: &Probe,
    gpu: u32,
) -> Result<Ceilings, String> {
    let dir = cache.join("ceilings");
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let key = cache_key(
        &probe.gpu_json(gpu as usize),
        crate::probe::nvml_driver().ok().as_deref(),
        probe.torch().as_deref(),
    );
    let file = key.map(|k| dir.join(format!("{k}.json")));
    let cached = file
        .as_ref()
        .and_then(|f| std::fs::read(f).ok())
        .and_then(|b| serde_json::from_slice::<Ceilings>(&b).ok())
        .filter(is_valid);
    if let Some(c) = cached {
        return Ok(c);
    }
    let ceilings = measure(python, worker_path, &dir, gpu)?;
    if let Some(f) = file {
        let bytes = serde_json::to_vec_pretty(&ceilings).map_err(|e| e.to_string())?;
        crate::atomic_file::write(&f, &bytes).map_err(|e| e.to_string())?;
    }
    Ok(ceilings)
}

/// The ceilings worker's reply.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Measured {
    pub ceilings: Ceilings,
}

impl Command for MeasureCeilings {
    type Reply = Measured;
}

fn measure(python: &str, worker_path: &Path, dir: &Path, gpu: u32) -> Result<Ceilings, String> {
    let spec = Spawn::role(
        python,
        worker_path,
        "ceilings",
        dir.join("ceilings.log"),
        dir.to_path_buf(),
    )
    .env("CUDA_VISIBLE_DEVICES", gpu.to_string())
    .env("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    let mut worker = Worker::spawn(&spec).map_err(|e| format!("start the ceilings worker: {e}"))?;
    let reply = worker.request(MeasureCeilings {}, MEASURE_DEADLINE);
    worker.finish();
    let ceilings: Ceilings = match reply {
        Ok(Reply::Ok(Measured { ceilings })) => ceilings,
        Ok(Reply::Err(e)) => return Err(e.message),
        Err(f) => return Err(f.to_string()),
    };
    if is_valid(&ceilings) {
        Ok(ceilings)
    } else {
        Err(format!("implausible ceilings {ceilings:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixtures::sample_evaluation;
    use serde_json::json;

    /// The H100 figures of docs/design/timing.md: 3.0 TB/s copy, ~52 TFLOP/s fp32, TF32 ~400, bf16 ~800.
    fn h100() -> Ceilings {
        Ceilings {
            copy_gbps: 3000.0,
            gemm_tflops: [
                ("fp32".to_string(), 50.0),
                ("tf32".to_string(), 400.0),
                ("bf16".to_string(), 800.0),
                ("fp16".to_string(), 800.0),
            ]
            .into(),
            gpu: "NVIDIA H100 80GB HBM3".into(),
            measured_s: 2.0,
        }
    }

    fn facts(min_bytes: Option<u64>, flops: Option<u64>) -> TaskFacts {
        TaskFacts {
            min_bytes,
            flops,
            ..TaskFacts::default()
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn memory_bound_task_is_bytes_over_copy_bandwidth() {
        // 3 GB at 3 TB/s: 1 ms; no FLOPs counted.
        let t = t_sol_ms(&facts(Some(3_000_000_000), Some(0)), &h100(), "fp32").unwrap();
        assert!(close(t, 1.0), "{t}");
        // half precision halves the bytes
        let t = t_sol_ms(&facts(Some(3_000_000_000), Some(0)), &h100(), "bf16").unwrap();
        assert!(close(t, 0.5), "{t}");
    }

    #[test]
    fn compute_bound_task_is_flops_over_the_precisions_gemm_rate() {
        // 8192^3 GEMM: 1.1 TFLOP; fp32 runs are bounded by TF32 (400), bf16 by 800 TFLOP/s.
        let flops = 2 * 8192u64.pow(3);
        let bytes = 3 * 8192 * 8192 * 4;
        let f = facts(Some(bytes), Some(flops));
        let fp32 = t_sol_ms(&f, &h100(), "fp32").unwrap();
        assert!(close(fp32, flops as f64 / 400e12 * 1e3), "{fp32}");
        let bf16 = t_sol_ms(&f, &h100(), "bf16").unwrap();
        assert!(close(bf16, flops as f64 / 800e12 * 1e3), "{bf16}");
        // the larger term wins: bytes alone would give 0.27 ms
        assert!(fp32 > bytes as f64 / 3000e9 * 1e3);
    }

    #[test]
    fn missing_terms_leave_the_other_or_nothing() {
        let mut c = h100();
        c.gemm_tflops.remove("fp16");
        let t = t_sol_ms(&facts(Some(3_000_000), Some(10u64.pow(15))), &c, "fp16").unwrap();
        assert!(close(t, 0.0005), "{t}");
        let t = t_sol_ms(&facts(None, Some(4 * 10u64.pow(11))), &h100(), "fp32").unwrap();
        assert!(close(t, 1.0), "{t}");
        assert_eq!(t_sol_ms(&facts(None, None), &h100(), "fp32"), None);
        assert_eq!(t_sol_ms(&facts(Some(0), Some(0)), &h100(), "fp32"), None);
    }

    #[test]
    fn percent_sol_is_sol_over_median() {
        assert!(close(percent_sol(0.5, 1.0).unwrap(), 50.0));
        assert!(close(percent_sol(2.0, 1.0).unwrap(), 200.0));
        assert_eq!(percent_sol(1.0, 0.0), None);
        assert_eq!(percent_sol(1.0, f64::NAN), None);
    }

    /// A timed evaluation of a memory-bound task whose T_SOL is 1 ms (3 GB at 3 TB/s).
    fn timed(reference_ms: f64, candidate_ms: f64) -> (Evaluation, TaskFacts) {
        let mut e = sample_evaluation("tiled.py");
        let t = e.timing.as_mut().unwrap();
        t.reference.median_ms = reference_ms;
        t.candidate.median_ms = candidate_ms;
        t.speedup = reference_ms / candidate_ms;
        t.warnings.clear();
        (e, facts(Some(3_000_000_000), Some(0)))
    }

    #[test]
    fn annotate_sets_percent_sol_of_both_arms() {
        let (mut e, f) = timed(4.0, 2.0);
        annotate(&mut e, Some(&f), Some(&h100()), "fp32");
        let t = e.timing.unwrap();
        assert!(close(t.sol_ms.unwrap(), 1.0));
        assert!(close(t.percent_sol.unwrap(), 50.0));
        assert!(close(t.reference_percent_sol.unwrap(), 25.0));
        assert!(!t.invalid && t.warnings.is_empty(), "{:?}", t.warnings);
    }

    #[test]
    fn faster_than_light_is_invalid() {
        let (mut e, f) = timed(2.0, 0.5);
        annotate(&mut e, Some(&f), Some(&h100()), "fp32");
        let t = e.timing.unwrap();
        assert!(t.invalid);
        assert_eq!(
            t.warnings,
            ["faster than the speed of light: 200 % SOL (timing invalid)"]
        );
    }

    #[test]
    fn faster_than_light_is_not_enforced_when_the_bound_is_suspect() {
        // degenerate task: an honest kernel may skip its inputs
        let (mut e, mut f) = timed(2.0, 0.5);
        f.degenerate = vec!["constant_output".into()];
        annotate(&mut e, Some(&f), Some(&h100()), "fp32");
        let t = e.timing.unwrap();
        assert!(!t.invalid);
        assert_eq!(
            t.warnings,
            ["200 % SOL on a degenerate task (constant_output): not enforced"]
        );
        // the reference beats the bound too: the facts or the ceilings are wrong
        let (mut e, f) = timed(0.8, 0.5);
        annotate(&mut e, Some(&f), Some(&h100()), "fp32");
        let t = e.timing.unwrap();
        assert!(!t.invalid);
        assert!(t.warnings[0].contains("not enforced"), "{:?}", t.warnings);
    }

    #[test]
    fn large_speedups_are_flagged_for_review_without_ceilings() {
        let (mut e, _) = timed(12.0, 1.0);
        annotate(&mut e, None, None, "fp32");
        let t = e.timing.unwrap();
        assert!(!t.invalid && t.sol_ms.is_none());
        assert_eq!(t.warnings, ["speedup 12.0x above 10x: flagged for review"]);
        // an untimed evaluation is left alone
        let mut e = sample_evaluation("23_Softmax.py");
        annotate(&mut e, None, Some(&h100()), "fp32");
        assert!(e.timing.is_none());
    }

    #[test]
    fn cache_key_needs_a_uuid_and_covers_driver_and_torch() {
        let gpu = json!({"name": "H100", "uuid": "GPU-1"});
        let key = cache_key(&gpu, Some("570.1"), Some("2.11")).unwrap();
        assert_eq!(cache_key(&gpu, Some("570.1"), Some("2.11")).unwrap(), key);
        assert_ne!(cache_key(&gpu, Some("570.2"), Some("2.11")).unwrap(), key);
        assert_ne!(cache_key(&gpu, Some("570.1"), Some("2.12")).unwrap(), key);
        let other = json!({"name": "H100", "uuid": "GPU-2"});
        assert_ne!(cache_key(&other, Some("570.1"), Some("2.11")).unwrap(), key);
        assert_eq!(cache_key(&json!({"name": "H100"}), None, None), None);
    }

    #[test]
    fn ceilings_round_trip_and_reject_nonsense() {
        let c = h100();
        let back: Ceilings = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        assert!(is_valid(&c));
        let mut bad = h100();
        bad.copy_gbps = 0.0;
        assert!(!is_valid(&bad));
    }
}
