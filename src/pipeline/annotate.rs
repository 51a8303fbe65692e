//! The pipeline's last stage: what the run adds to an evaluation from outside its workers,
//! applied once, before the backend returns it, so that the label and the result are decided
//! here and nothing that consumes the finished evaluation changes it: the host-speed error the
//! profiled call allows (`timing::allow_host_error`), the file's static findings, the task's
//! flags and its facts' check, and the speed-of-light review (`sol::annotate`). Runs no worker.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::check::Finding;
use crate::config::Config;
use crate::record::{merge_check, Ceilings, Evaluation};
use crate::sol;
use crate::taskfacts::TaskFacts;
use crate::timing;

/// What the run knows before any evaluation and adds to each one.
pub struct Annotations {
    /// The static checks' findings (warnings and worse) by submission file, each taken by the
    /// file's evaluation.
    findings: Mutex<HashMap<String, Vec<Finding>>>,
    /// The speed-of-light ceilings of the run's GPU, where they were measured.
    ceilings: Option<Ceilings>,
}

impl Annotations {
    pub fn new(findings: HashMap<String, Vec<Finding>>, ceilings: Option<Ceilings>) -> Self {
        Annotations {
            findings: Mutex::new(findings),
            ceilings,
        }
    }

    /// Add the findings of a file that came after the run started (a `serve` request's).
    pub fn add(&self, file: String, findings: Vec<Finding>) {
        self.findings
            .lock()
            .expect("findings lock")
            .insert(file, findings);
    }

    /// Annotate `eval` (of a task with `facts`), whose profiled call allowed `host_error`. The
    /// ceilings hold only at the tasks' full size.
    pub(super) fn apply(
        &self,
        eval: &mut Evaluation,
        facts: Option<&TaskFacts>,
        config: &Config,
        host_error: Option<f64>,
    ) {
        if let (Some(t), Some(error)) = (eval.timing.as_mut(), host_error) {
            timing::allow_host_error(t, error);
        }
        eval.findings = self
            .findings
            .lock()
            .expect("findings lock")
            .remove(&eval.file)
            .unwrap_or_default();
        eval.task_flags = facts.map(|f| f.degenerate.clone()).unwrap_or_default();
        if let Some(check) = facts.and_then(TaskFacts::check) {
            merge_check(&mut eval.checks, check);
        }
        let ceilings = self.ceilings.as_ref().filter(|_| config.full_size());
        sol::annotate(eval, facts, ceilings, config.precision);
    }
}
