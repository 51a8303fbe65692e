//! What the machine has: the Python worker's probe (Python, torch, CUDA, GPUs, compilers) and
//! NVML's driver version. Read-only: nothing here changes a GPU's settings.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::record::Environment;
use crate::worker::request::{self, Command};
use crate::worker::{Link, Reply, Spawn, Worker};

const PROBE_DEADLINE: Duration = Duration::from_secs(120);

#[derive(Clone, Debug)]
pub struct Probe {
    pub facts: Value,
}

/// The probe's reply: the machine's facts, read by name.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Probed {
    pub facts: Value,
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
        self.facts["cuda_available"] == true
    }

    pub fn gpu_count(&self) -> usize {
        self.facts["gpus"].as_array().map_or(0, Vec::len)
    }

    /// The smallest visible GPU's memory in bytes, None without a GPU.
    pub fn smallest_gpu_memory(&self) -> Option<u64> {
        self.facts["gpus"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g["memory_bytes"].as_u64())
            .min()
    }

    pub fn torch(&self) -> Option<String> {
        self.facts["torch"].as_str().map(String::from)
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
        let mut caps: Vec<String> = self.facts["gpus"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g["capability"].as_str().map(String::from))
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
        let s = |k: &str| self.facts[k].as_str().map(String::from);
        Environment {
            os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
            python: s("python"),
            torch: s("torch"),
            torch_cuda: s("torch_cuda"),
            triton: s("triton"),
            driver: nvml_driver().ok(),
            gpus: self.facts["gpus"].as_array().cloned().unwrap_or_default(),
            cpu: s("cpu"),
            ceilings: None,
        }
    }
}

/// The NVIDIA driver version through NVML, or why it cannot be read.
pub fn nvml_driver() -> std::result::Result<String, String> {
    let nvml = nvml_wrapper::Nvml::init().map_err(|e| e.to_string())?;
    nvml.sys_driver_version().map_err(|e| e.to_string())
}
