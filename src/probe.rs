//! What the machine has: the Python worker's probe (Python, torch, CUDA, GPUs, compilers) and
//! NVML's driver version. Read-only: nothing here changes a GPU's settings.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::record::Environment;
use crate::worker::request::{self, Command};
use crate::worker::{Link, Reply, Spawn, Worker};

const PROBE_DEADLINE: Duration = Duration::from_secs(120);

#[derive(Clone, Debug)]
pub struct Probe {
    pub facts: Facts,
}

/// The machine's facts kbench reads of the probe worker's (`kbench_worker/roles/probe.py`). What the
/// worker leaves out or null reads as not found, as the doctor reports it.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Facts {
    pub python: Option<String>,
    pub torch: Option<String>,
    /// The CUDA version torch was built with.
    pub torch_cuda: Option<String>,
    #[serde(default)]
    pub cuda_available: bool,
    #[serde(default)]
    pub gpus: Vec<Gpu>,
    /// The nvcc found, and the C++ compiler.
    pub nvcc: Option<String>,
    pub cxx: Option<String>,
    #[serde(default)]
    pub ninja: bool,
    pub cpu: Option<String>,
    pub triton: Option<String>,
    /// CUTLASS's headers for `kbench import cuda-l2`'s kernels: "VERSION at FOLDER".
    #[serde(default)]
    pub cutlass: Option<String>,
}

/// One GPU torch sees; the run record keeps it whole.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Gpu {
    pub index: Option<u64>,
    pub name: Option<String>,
    /// Keys the cached speed-of-light ceilings (`sol`).
    pub uuid: Option<String>,
    /// Compute capability, e.g. "9.0".
    pub capability: Option<String>,
    pub memory_bytes: Option<u64>,
    pub sm_count: Option<u64>,
    pub l2_bytes: Option<u64>,
}

/// The probe's reply: the machine's facts.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Probed {
    pub facts: Facts,
}

impl Command for request::Probe {
    type Reply = Probed;
}

impl Probe {
    /// Run the probe worker with `python`.
    pub fn run(python: &str, worker_path: &Path, scratch: &Path) -> Result<Probe> {
        let fail = |message: String| Error::Python {
            python: python.into(),
            message,
        };
        std::fs::create_dir_all(scratch).map_err(|e| Error::write(scratch, e))?;
        let log = scratch.join("probe.log");
        let spec = Spawn::role(
            python,
            worker_path,
            "probe",
            log.clone(),
            scratch.to_path_buf(),
        )
        .env("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
        let mut worker = Worker::spawn(&spec).map_err(|e| fail(e.to_string()))?;
        let reply = worker.request(request::Probe {}, PROBE_DEADLINE);
        worker.finish();
        let tail = || {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(5)..].join("\n")
        };
        match reply {
            Ok(Reply::Ok(Probed { facts })) => Ok(Probe { facts }),
            Ok(Reply::Err(e)) => Err(fail(e.message)),
            Err(f) => Err(fail(format!(
                "{f}; is torch installed? (kbench doctor)\n{}",
                tail()
            ))),
        }
    }

    pub fn cuda_available(&self) -> bool {
        self.facts.cuda_available
    }

    pub fn gpu_count(&self) -> usize {
        self.facts.gpus.len()
    }

    /// The smallest visible GPU's memory in bytes, None without a GPU.
    pub fn smallest_gpu_memory(&self) -> Option<u64> {
        self.facts.gpus.iter().filter_map(|g| g.memory_bytes).min()
    }

    pub fn torch(&self) -> Option<String> {
        self.facts.torch.clone()
    }

    /// GPU `index`'s facts as JSON, as the run record keeps them (null where there is none).
    pub fn gpu_json(&self, index: usize) -> Value {
        self.facts.gpus.get(index).map_or(Value::Null, |g| {
            serde_json::to_value(g).expect("a GPU's facts serialize")
        })
    }

    /// TORCH_CUDA_ARCH_LIST for the compile pool (which sees no GPU) and the candidate alike, so
    /// the candidate finds the pool's build up to date: the environment's own value when set,
    /// else the visible GPUs' architectures, e.g. "9.0"; "9.0" when there is none.
    pub fn cuda_arch_list(&self) -> String {
        if let Ok(list) = std::env::var("TORCH_CUDA_ARCH_LIST") {
            if !list.trim().is_empty() {
                return list;
            }
        }
        let mut caps: Vec<String> = self
            .facts
            .gpus
            .iter()
            .filter_map(|g| g.capability.clone())
            .collect();
        caps.sort();
        caps.dedup();
        if caps.is_empty() {
            "9.0".into()
        } else {
            caps.join(";")
        }
    }

    pub fn environment(&self) -> Environment {
        let facts = self.facts.clone();
        Environment {
            os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
            python: facts.python,
            torch: facts.torch,
            torch_cuda: facts.torch_cuda,
            triton: facts.triton,
            driver: nvml_driver().ok(),
            gpus: (0..facts.gpus.len()).map(|i| self.gpu_json(i)).collect(),
            cpu: facts.cpu,
            ceilings: None,
        }
    }
}

/// The NVIDIA driver version through NVML, or why it cannot be read.
pub fn nvml_driver() -> std::result::Result<String, String> {
    let nvml = nvml_wrapper::Nvml::init().map_err(|e| e.to_string())?;
    nvml.sys_driver_version().map_err(|e| e.to_string())
}
