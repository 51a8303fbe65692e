//! `kbench doctor`: each thing a run needs, found or not, with the fix when not, and whether
//! a run on the device asked for needs it. Every run needs Python with torch, ninja and a C++
//! compiler (torch builds extensions with them); one on a GPU needs CUDA and nvcc too. NVML
//! (telemetry) and CUTLASS (CUDA-L2's kernels) are never needed.

use crate::cli::DeviceArg;
use crate::config::Device;
use crate::error::Error;
use crate::probe::{nvml_driver, Probe};

pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    /// A run on the device checked for needs it: `kbench doctor` fails when it is missing.
    pub needed: bool,
    pub found: String,
    pub fix: &'static str,
}

/// The device `--device` asks for; `auto` picks as `eval` does: CUDA when torch sees a GPU.
pub fn device(asked: DeviceArg, probe: Option<&Probe>) -> Device {
    match asked {
        DeviceArg::Cuda => Device::Cuda,
        DeviceArg::Cpu => Device::Cpu,
        DeviceArg::Auto if probe.is_some_and(|p| p.facts.cuda_available) => Device::Cuda,
        DeviceArg::Auto => Device::Cpu,
    }
}

/// The checks for a run on `device`, from a probe (or the reason no probe could run).
pub fn checks(python: &str, probe: Result<&Probe, &Error>, device: Device) -> Vec<Check> {
    let mut out = Vec::new();
    let on_gpu = device == Device::Cuda;
    let facts = match probe {
        Ok(p) => &p.facts,
        Err(why) => {
            out.push(Check {
                name: "python + torch",
                ok: false,
                needed: true,
                found: format!("{python}: {why}"),
                fix: "install torch into a venv (python3 -m venv .venv && .venv/bin/pip install torch==2.11.0 ninja numpy) or pass --python",
            });
            return out;
        }
    };
    let text = |fact: &Option<String>| fact.as_deref().unwrap_or("not found").to_string();
    out.push(Check {
        name: "python",
        ok: true,
        needed: true,
        found: format!("{} ({python})", text(&facts.python)),
        fix: "",
    });
    out.push(Check {
        name: "torch",
        ok: true,
        needed: true,
        found: text(&facts.torch),
        fix: "",
    });
    out.push(cuda_check(facts, on_gpu));
    out.push(Check {
        name: "nvcc",
        ok: facts.nvcc.is_some(),
        needed: on_gpu,
        found: text(&facts.nvcc),
        fix: "install the CUDA toolkit (or pip install nvidia-cuda-nvcc) and set CUDA_HOME; needed for CUDA load_inline submissions",
    });
    out.push(Check {
        name: "ninja",
        ok: facts.ninja,
        needed: true,
        found: if facts.ninja {
            "found".into()
        } else {
            "not found".into()
        },
        fix: "pip install ninja (torch builds extensions with it)",
    });
    out.push(Check {
        name: "c++ compiler",
        ok: facts.cxx.is_some(),
        needed: true,
        found: text(&facts.cxx),
        fix: "install g++ (apt-get install g++)",
    });
    out.push(Check {
        name: "CUTLASS",
        ok: facts.cutlass.is_some(),
        needed: false,
        found: text(&facts.cutlass),
        fix: "only for kbench import cuda-l2's kernels: pip install --no-deps -r requirements-cuda-l2.txt (nvidia-cutlass's headers; offline: pip install --no-deps its wheel), or set CUTLASS_DIR to a CUTLASS checkout",
    });
    out.extend(host_tools());
    out
}

/// The optional tools of the host: the CUDA toolkit's sanitizer and profiler, and NVML.
fn host_tools() -> [Check; 3] {
    let sanitizer = crate::sanitizer::find();
    let ncu = crate::nsight::find();
    let nvml = nvml_driver();
    [
        Check {
            name: "compute-sanitizer",
            ok: sanitizer.is_some(),
            needed: false,
            found: sanitizer.map_or("not found".into(), |p| p.display().to_string()),
            fix: "only for eval --sanitize: it comes with the CUDA toolkit (CUDA_HOME/bin); put it on PATH",
        },
        Check {
            name: "ncu",
            ok: ncu.is_some(),
            needed: false,
            found: ncu.map_or("not found".into(), |p| p.display().to_string()),
            fix: "only for eval --profile ncu: Nsight Compute comes with the CUDA toolkit (CUDA_HOME/bin); put it on PATH",
        },
        Check {
            name: "NVML",
            ok: nvml.is_ok(),
            needed: false,
            found: nvml.map_or_else(|e| e, |v| format!("driver {v}")),
            fix: "install the NVIDIA driver (libnvidia-ml.so); without it kbench records no driver or clock telemetry",
        },
    ]
}

/// Whether torch sees a GPU, and which.
fn cuda_check(facts: &crate::probe::Facts, on_gpu: bool) -> Check {
    let gpus: Vec<String> = facts
        .gpus
        .iter()
        .map(|g| {
            format!(
                "{} (sm {})",
                g.name.as_deref().unwrap_or("?"),
                g.capability.as_deref().unwrap_or("?")
            )
        })
        .collect();
    let cuda = facts.torch_cuda.as_deref().unwrap_or("not found");
    Check {
        name: "CUDA",
        ok: facts.cuda_available,
        needed: on_gpu,
        found: if gpus.is_empty() { "no GPU visible to torch".into() } else { format!("CUDA {cuda} with {}", gpus.join(", ")) },
        fix: "install a CUDA build of torch and the NVIDIA driver; without a GPU, kbench runs on the CPU (--device cpu)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe of a host with torch, ninja and g++, but no GPU and no nvcc.
    fn cpu_host() -> Probe {
        Probe {
            facts: serde_json::from_value(serde_json::json!({
                "python": "3.12", "torch": "2.11.0", "cuda_available": false,
                "ninja": true, "cxx": "g++ 13",
            }))
            .unwrap(),
        }
    }

    /// The needed checks that fail, by name.
    fn missing(probe: Result<&Probe, &Error>, device: Device) -> Vec<&'static str> {
        checks("python3", probe, device)
            .into_iter()
            .filter(|c| c.needed && !c.ok)
            .map(|c| c.name)
            .collect()
    }

    #[test]
    fn the_device_asked_for_decides_what_is_needed() {
        let probe = cpu_host();
        let gone = Error::Other("no python".into());
        for (probe, device, expected) in [
            (Ok(&probe), Device::Cpu, vec![]),
            (Ok(&probe), Device::Cuda, vec!["CUDA", "nvcc"]),
            (Err(&gone), Device::Cpu, vec!["python + torch"]),
            (Err(&gone), Device::Cuda, vec!["python + torch"]),
        ] {
            assert_eq!(missing(probe, device), expected, "{device:?}");
        }
    }

    #[test]
    fn auto_picks_the_device_as_eval_does() {
        let mut gpu_host = cpu_host();
        gpu_host.facts.cuda_available = true;
        for (asked, probe, expected) in [
            (DeviceArg::Auto, Some(&cpu_host()), Device::Cpu),
            (DeviceArg::Auto, Some(&gpu_host), Device::Cuda),
            (DeviceArg::Auto, None, Device::Cpu),
            (DeviceArg::Cuda, Some(&cpu_host()), Device::Cuda),
            (DeviceArg::Cpu, Some(&gpu_host), Device::Cpu),
        ] {
            assert_eq!(device(asked, probe), expected, "{asked:?}");
        }
    }
}
