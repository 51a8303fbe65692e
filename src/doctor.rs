//! `kbench doctor`: each thing a run needs, found or not, with the fix when not.

use crate::error::Error;
use crate::probe::{nvml_driver, Probe};

pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub found: String,
    pub fix: &'static str,
}

/// The checks, from a probe (or the reason no probe could run).
pub fn checks(python: &str, probe: Result<&Probe, &Error>) -> Vec<Check> {
    let mut out = Vec::new();
    let facts = match probe {
        Ok(p) => &p.facts,
        Err(why) => {
            out.push(Check {
                name: "python + torch",
                ok: false,
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
        found: format!("{} ({python})", text(&facts.python)),
        fix: "",
    });
    out.push(Check {
        name: "torch",
        ok: true,
        found: text(&facts.torch),
        fix: "",
    });
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
    out.push(Check {
        name: "CUDA",
        ok: facts.cuda_available,
        found: if gpus.is_empty() { "no GPU visible to torch".into() } else { format!("CUDA {} with {}", text(&facts.torch_cuda), gpus.join(", ")) },
        fix: "install a CUDA build of torch and the NVIDIA driver; without a GPU, kbench runs on the CPU (--device cpu)",
    });
    out.push(Check {
        name: "nvcc",
        ok: facts.nvcc.is_some(),
        found: text(&facts.nvcc),
        fix: "install the CUDA toolkit (or pip install nvidia-cuda-nvcc) and set CUDA_HOME; needed for CUDA load_inline submissions",
    });
    out.push(Check {
        name: "ninja",
        ok: facts.ninja,
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
        found: text(&facts.cxx),
        fix: "install g++ (apt-get install g++)",
    });
    out.push(Check {
        name: "CUTLASS",
        ok: facts.cutlass.is_some(),
        found: text(&facts.cutlass),
        fix: "only for kbench import cuda-l2's kernels: pip install --no-deps -r requirements-cuda-l2.txt (nvidia-cutlass's headers; offline: pip install --no-deps its wheel), or set CUTLASS_DIR to a CUTLASS checkout",
    });
    let nvml = nvml_driver();
    out.push(Check {
        name: "NVML",
        ok: nvml.is_ok(),
        found: nvml.map_or_else(|e| e, |v| format!("driver {v}")),
        fix: "install the NVIDIA driver (libnvidia-ml.so); without it kbench records no driver or clock telemetry",
    });
    out
}
