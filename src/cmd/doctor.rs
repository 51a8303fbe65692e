//! `kbench doctor`: probe the set-up and print `doctor::checks` for the device asked for, each
//! with its fix; exit 1 when a check that device needs fails (Python with torch, ninja, a C++
//! compiler; CUDA and nvcc on a GPU). The rest limit what a run can do, not whether it runs.

use crate::cli::{DeviceArg, DoctorArgs};
use crate::config::{self, Device};
use crate::doctor;
use crate::error::Result;
use crate::exit::Exit;
use crate::probe::Probe;
use crate::worker;

pub fn run(args: &DoctorArgs) -> Result<Exit> {
    let python = config::python(args.python.python.as_deref());
    let cache = config::cache_dir();
    let worker_path = worker::python::worker_path(&cache)?;
    let probe = Probe::run(&python, &worker_path, &cache.join("doctor"));
    let device = doctor::device(args.device, probe.as_ref().ok());
    let checks = doctor::checks(&python, probe.as_ref(), device);
    for c in &checks {
        println!(
            "{} {:<13} {}",
            match (c.ok, c.needed) {
                (true, _) => "ok  ",
                (false, true) => "MISS",
                (false, false) => "note",
            },
            c.name,
            c.found
        );
        if !c.ok {
            println!("     {:<13} fix: {}", "", c.fix);
        }
    }
    let missing: Vec<&str> = checks
        .iter()
        .filter(|c| c.needed && !c.ok)
        .map(|c| c.name)
        .collect();
    let device = format!(
        "--device {}{}",
        device.torch_name(),
        match (args.device, device) {
            (DeviceArg::Auto, Device::Cuda) => " (auto: torch sees a GPU)",
            (DeviceArg::Auto, Device::Cpu) => " (auto: torch sees no GPU)",
            _ => "",
        }
    );
    if missing.is_empty() {
        println!("kbench doctor: ready for {device}");
    } else {
        println!(
            "kbench doctor: not ready for {device}: {} missing",
            missing.join(", ")
        );
    }
    Ok(Exit::gate(missing.is_empty()))
}
