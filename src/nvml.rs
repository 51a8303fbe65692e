//! The GPU's state through NVML: read-only telemetry by default (clocks, clocks-event reasons,
//! power, temperature), and an opt-in clock lock whose guard restores the clocks on every exit
//! path (drop, panic, SIGINT/SIGTERM). kbench never calls a setter unless `--lock-clocks` was
//! given with `--dedicated`; the lock is tested against a fake GPU only.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// One reading, taken between timing rounds (never inside a timed region).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Telemetry {
    pub sm_mhz: u32,
    pub mem_mhz: u32,
    /// NVML clocks-event (throttle) reasons bitmask.
    pub reasons: u64,
    pub power_mw: u32,
    pub temperature_c: u32,
}

// NVML clocks-event reasons (nvml.h).
const SW_POWER_CAP: u64 = 0x4;
const HW_SLOWDOWN: u64 = 0x8;
const SW_THERMAL_SLOWDOWN: u64 = 0x20;
const HW_THERMAL_SLOWDOWN: u64 = 0x40;
const HW_POWER_BRAKE_SLOWDOWN: u64 = 0x80;

/// What a round's telemetry means for its samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoundTag {
    Clean,
    /// Software power cap: the steady state of heavy tensor-core work on an H100. Kept, tagged.
    PowerCapped,
    /// Hardware or thermal slowdown, or the SM clock under half its maximum: the whole round
    /// is discarded so the arms stay balanced.
    Slowdown,
}

impl Telemetry {
    pub fn tag(&self, max_sm_mhz: Option<u32>) -> RoundTag {
        let slow =
            HW_SLOWDOWN | SW_THERMAL_SLOWDOWN | HW_THERMAL_SLOWDOWN | HW_POWER_BRAKE_SLOWDOWN;
        let under_half = max_sm_mhz.is_some_and(|max| self.sm_mhz * 2 < max);
        if self.reasons & slow != 0 || under_half {
            RoundTag::Slowdown
        } else if self.reasons & SW_POWER_CAP != 0 {
            RoundTag::PowerCapped
        } else {
            RoundTag::Clean
        }
    }
}

/// What kbench asks of a GPU; `Nvml` is the real one, tests use a fake.
pub trait Gpu: Send {
    fn read(&mut self) -> Result<Telemetry, String>;
    fn max_sm_mhz(&mut self) -> Result<u32, String>;
    /// Lock the SM clock at `mhz`, or at the TDP base clock when `None`.
    fn lock_clocks(&mut self, mhz: Option<u32>) -> Result<(), String>;
    fn reset_clocks(&mut self) -> Result<(), String>;
}

/// A GPU through NVML. CUDA indices match NVML's because kbench's workers run with
/// CUDA_DEVICE_ORDER=PCI_BUS_ID.
pub struct Nvml {
    nvml: nvml_wrapper::Nvml,
    index: u32,
}

impl Nvml {
    pub fn open(index: u32) -> Result<Nvml, String> {
        let nvml = nvml_wrapper::Nvml::init().map_err(|e| format!("initialise NVML: {e}"))?;
        nvml.device_by_index(index)
            .map_err(|e| format!("open GPU {index} through NVML: {e}"))?;
        Ok(Nvml { nvml, index })
    }

    /// Processes computing on this GPU now (kbench's own workers are not started yet).
    pub fn compute_processes(&self) -> Result<usize, String> {
        self.device()?
            .running_compute_processes()
            .map(|p| p.len())
            .map_err(|e| e.to_string())
    }

    fn device(&self) -> Result<nvml_wrapper::Device<'_>, String> {
        self.nvml
            .device_by_index(self.index)
            .map_err(|e| e.to_string())
    }
}

impl Gpu for Nvml {
    fn read(&mut self) -> Result<Telemetry, String> {
        use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
        let d = self.device()?;
        let e = |e: nvml_wrapper::error::NvmlError| e.to_string();
        Ok(Telemetry {
            sm_mhz: d.clock_info(Clock::SM).map_err(e)?,
            mem_mhz: d.clock_info(Clock::Memory).map_err(e)?,
            reasons: d.current_throttle_reasons().map_err(e)?.bits(),
            power_mw: d.power_usage().map_err(e)?,
            temperature_c: d.temperature(TemperatureSensor::Gpu).map_err(e)?,
        })
    }

    fn max_sm_mhz(&mut self) -> Result<u32, String> {
        use nvml_wrapper::enum_wrappers::device::Clock;
        self.device()?
            .max_clock_info(Clock::SM)
            .map_err(|e| e.to_string())
    }

    fn lock_clocks(&mut self, mhz: Option<u32>) -> Result<(), String> {
        use nvml_wrapper::enum_wrappers::device::ClockLimitId;
        use nvml_wrapper::enums::device::GpuLockedClocksSetting;
        let setting = match mhz {
            Some(f) => GpuLockedClocksSetting::Numeric {
                min_clock_mhz: f,
                max_clock_mhz: f,
            },
            None => GpuLockedClocksSetting::Symbolic {
                lower_bound: ClockLimitId::Tdp,
                upper_bound: ClockLimitId::Tdp,
            },
        };
        let mut d = self.device()?;
        d.set_gpu_locked_clocks(setting)
            .map_err(|e| format!("lock the clocks of GPU {}: {e}", self.index))
    }

    fn reset_clocks(&mut self) -> Result<(), String> {
        let mut d = self.device()?;
        d.reset_gpu_locked_clocks()
            .map_err(|e| format!("reset the clocks of GPU {}: {e}", self.index))
    }
}

/// Clocks locked for the guard's lifetime: reset when it drops (also while a panic unwinds) and
/// on a termination signal (`reset_on_signal`).
pub struct ClockLock<G: Gpu> {
    gpu: Arc<Mutex<G>>,
}

impl<G: Gpu> ClockLock<G> {
    pub fn new(mut gpu: G, mhz: Option<u32>) -> Result<ClockLock<G>, String> {
        gpu.lock_clocks(mhz)?;
        Ok(ClockLock {
            gpu: Arc::new(Mutex::new(gpu)),
        })
    }

    /// The GPU, shared with a signal handler that must reset it too.
    pub fn shared(&self) -> Arc<Mutex<G>> {
        self.gpu.clone()
    }
}

impl<G: Gpu> Drop for ClockLock<G> {
    fn drop(&mut self) {
        let mut gpu = self
            .gpu
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Err(e) = gpu.reset_clocks() {
            eprintln!("kbench: failed to {e}; reset them with nvidia-smi -rgc");
        }
    }
}

/// On SIGINT, SIGTERM or SIGHUP, before kbench exits (`signals`): reset every locked GPU.
pub fn reset_on_signal<G: Gpu + Send + 'static>(gpus: Vec<Arc<Mutex<G>>>) {
    crate::signals::undo_on_exit(move || {
        for gpu in &gpus {
            let mut gpu = gpu.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if let Err(e) = gpu.reset_clocks() {
                eprintln!("kbench: failed to {e}; reset them with nvidia-smi -rgc");
            }
        }
    });
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A scripted GPU that records what was asked of it.
    #[derive(Default)]
    pub struct FakeGpu {
        pub calls: Arc<Mutex<Vec<String>>>,
        pub readings: Vec<Telemetry>,
        pub fail_lock: bool,
    }

    impl Gpu for FakeGpu {
        fn read(&mut self) -> Result<Telemetry, String> {
            self.calls.lock().unwrap().push("read".into());
            if self.readings.is_empty() {
                return Err("no reading".into());
            }
            Ok(self.readings.remove(0))
        }
        fn max_sm_mhz(&mut self) -> Result<u32, String> {
            Ok(1980)
        }
        fn lock_clocks(&mut self, mhz: Option<u32>) -> Result<(), String> {
            self.calls.lock().unwrap().push(format!("lock {mhz:?}"));
            if self.fail_lock {
                Err("not permitted".into())
            } else {
                Ok(())
            }
        }
        fn reset_clocks(&mut self) -> Result<(), String> {
            self.calls.lock().unwrap().push("reset".into());
            Ok(())
        }
    }

    fn reading(sm_mhz: u32, reasons: u64) -> Telemetry {
        Telemetry {
            sm_mhz,
            mem_mhz: 2619,
            reasons,
            power_mw: 300_000,
            temperature_c: 50,
        }
    }

    #[test]
    fn rounds_are_tagged_by_reason_and_clock() {
        assert_eq!(reading(1980, 0).tag(Some(1980)), RoundTag::Clean);
        assert_eq!(
            reading(1400, SW_POWER_CAP).tag(Some(1980)),
            RoundTag::PowerCapped
        );
        assert_eq!(
            reading(1980, HW_SLOWDOWN).tag(Some(1980)),
            RoundTag::Slowdown
        );
        assert_eq!(
            reading(1980, HW_THERMAL_SLOWDOWN | SW_POWER_CAP).tag(None),
            RoundTag::Slowdown
        );
        assert_eq!(reading(900, 0).tag(Some(1980)), RoundTag::Slowdown);
        assert_eq!(reading(900, 0).tag(None), RoundTag::Clean);
    }

    #[test]
    fn the_lock_is_released_when_the_guard_drops() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        {
            let _lock = ClockLock::new(
                FakeGpu {
                    calls: calls.clone(),
                    ..FakeGpu::default()
                },
                Some(1500),
            )
            .unwrap();
            assert_eq!(*calls.lock().unwrap(), ["lock Some(1500)"]);
        }
        assert_eq!(*calls.lock().unwrap(), ["lock Some(1500)", "reset"]);
    }

    #[test]
    fn the_lock_is_released_when_a_panic_unwinds() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let inner = calls.clone();
        let result = std::panic::catch_unwind(move || {
            let _lock = ClockLock::new(
                FakeGpu {
                    calls: inner,
                    ..FakeGpu::default()
                },
                None,
            )
            .unwrap();
            panic!("evaluation failed");
        });
        assert!(result.is_err());
        assert_eq!(*calls.lock().unwrap(), ["lock None", "reset"]);
    }

    #[test]
    fn a_refused_lock_leaves_nothing_to_reset() {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let gpu = FakeGpu {
            calls: calls.clone(),
            fail_lock: true,
            ..FakeGpu::default()
        };
        assert!(ClockLock::new(gpu, None).is_err());
        assert_eq!(*calls.lock().unwrap(), ["lock None"]);
    }
}
