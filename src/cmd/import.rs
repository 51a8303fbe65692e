//! `kbench import`: published kernels in one of the known formats written out as tasks,
//! submissions and published.csv (`import::*` reads and writes; this only picks the reader).

use clap::ValueEnum;

use crate::cli::{ImportArgs, ImportFormat};
use crate::error::{Error, Result};
use crate::exit::Exit;
use crate::import;

pub fn run(args: &ImportArgs) -> Result<Exit> {
    let cuda_l2_only = !args.shapes.is_empty() || args.sample.is_some() || args.gpu != "h100";
    if cuda_l2_only && args.format != ImportFormat::CudaL2 {
        return Err(Error::Usage(
            "use --gpu, --shapes or --sample here: they are for kbench import cuda-l2".into(),
        ));
    }
    let imported = match args.format {
        ImportFormat::CudaL1 => import::cuda_l1::read(&args.src)?,
        ImportFormat::KernelbenchRun => import::kernelbench_run::read(&args.src)?,
        ImportFormat::Sakana => import::sakana::read(&args.src)?,
        ImportFormat::GoodKernels => import::good_kernels::read(&args.src)?,
        ImportFormat::CudaL2 => {
            let selection = import::cuda_l2::Selection {
                shapes: args.shapes.clone(),
                sample: args.sample,
            };
            import::cuda_l2::read(&args.src, &args.gpu, &selection)?
        }
    };
    if imported.rows.is_empty() {
        for s in &imported.skipped {
            eprintln!("  {}: {}", s.at, s.why);
        }
        return Err(Error::Usage(format!(
            "import {}: no row could be imported",
            args.src.display()
        )));
    }
    imported.write(&args.out)?;
    let format = args.format.to_possible_value().expect("no skipped variant");
    print!(
        "{}",
        imported.report(&args.src, format.get_name(), &args.out)
    );
    Ok(Exit::Passed)
}
