//! `kbench compare`: run B against run A task by task (`report::compare` computes and renders);
//! with `--fail-on-regression` the exit code is the regression gate.

use crate::cli::CompareArgs;
use crate::error::{Error, Result};
use crate::exit::Exit;
use crate::record::RunRecord;
use crate::report;

pub fn run(args: &CompareArgs) -> Result<Exit> {
    if !(0.0..1.0).contains(&args.band) {
        return Err(Error::Usage(format!(
            "compare with --band {}: it is outside [0, 1)",
            args.band
        )));
    }
    let (_, before) = RunRecord::read(&args.before)?;
    let (_, after) = RunRecord::read(&args.after)?;
    let c = report::compare::compare(&before, &after, args.band);
    print!("{}", report::compare::render(&c));
    let Some(threshold) = args.fail_on_regression else {
        return Ok(Exit::Passed);
    };
    if !(0.0..1.0).contains(&threshold) {
        return Err(Error::Usage(format!(
            "compare with --fail-on-regression {threshold}: it is outside [0, 1)"
        )));
    }
    let why = report::compare::regressions(&c, threshold);
    for w in &why {
        println!("regression: {w}");
    }
    Ok(Exit::gate(why.is_empty()))
}
