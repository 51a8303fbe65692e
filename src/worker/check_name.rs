//! The runtime checks' names: a closed set the protocol schema carries (`CheckName` in
//! `protocol_schema.json`), so kbench and its workers (`kbench_worker/wire/messages.py`'s
//! `CheckName`) name a check from one list and a misspelt name is a compile error in Rust and an
//! `AttributeError` in Python. The strings are the record's (`checks[].name` in results.json)
//! and the prefixes of reasons; docs/checks.md documents each one.

use serde::{Deserialize, Serialize};

/// A runtime check's name. A name this kbench does not know (a record written by an older one,
/// whose check has since been renamed or dropped) is read and written back as it was
/// (`Unknown`): `kbench merge` and `kbench report` keep such records whole.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub enum CheckName {
    #[serde(rename = "correctness.scaled_tolerance")]
    CorrectnessScaledTolerance,
    #[serde(rename = "determinism.rerun")]
    DeterminismRerun,
    #[serde(rename = "harness.alone")]
    HarnessAlone,
    #[serde(rename = "harness.result_channel_auth")]
    HarnessResultChannelAuth,
    #[serde(rename = "harness.transfer")]
    HarnessTransfer,
    #[serde(rename = "inputs.distribution_perturbation")]
    InputsDistributionPerturbation,
    #[serde(rename = "inputs.integrity")]
    InputsIntegrity,
    #[serde(rename = "inputs.mean_shift")]
    InputsMeanShift,
    #[serde(rename = "inputs.shape_perturbation")]
    InputsShapePerturbation,
    #[serde(rename = "integrity.monkeypatch_snapshot")]
    IntegrityMonkeypatchSnapshot,
    #[serde(rename = "kernelbench.environment")]
    KernelbenchEnvironment,
    #[serde(rename = "kernels.mapped")]
    KernelsMapped,
    #[serde(rename = "memory.poisoned_allocator")]
    MemoryPoisonedAllocator,
    #[serde(rename = "outputs.alias")]
    OutputsAlias,
    #[serde(rename = "outputs.exact_type")]
    OutputsExactType,
    #[serde(rename = "outputs.independence")]
    OutputsIndependence,
    #[serde(rename = "outputs.settled")]
    OutputsSettled,
    #[serde(rename = "outputs.structure")]
    OutputsStructure,
    #[serde(rename = "params.perturbation")]
    ParamsPerturbation,
    #[serde(rename = "precision.fp32_accumulation")]
    PrecisionFp32Accumulation,
    #[serde(rename = "precision.fp64_error_ratio")]
    PrecisionFp64ErrorRatio,
    #[serde(rename = "precision.fp64_judged")]
    PrecisionFp64Judged,
    #[serde(rename = "precision.tf32_flags")]
    PrecisionTf32Flags,
    #[serde(rename = "profile.library_output")]
    ProfileLibraryOutput,
    #[serde(rename = "profile.library_share")]
    ProfileLibraryShare,
    #[serde(rename = "profile.ncu")]
    ProfileNcu,
    #[serde(rename = "profile.reference_ops")]
    ProfileReferenceOps,
    #[serde(rename = "runtime.l2_persist_limit")]
    RuntimeL2PersistLimit,
    #[serde(rename = "runtime.processes")]
    RuntimeProcesses,
    #[serde(rename = "runtime.thread_count")]
    RuntimeThreadCount,
    #[serde(rename = "sanitizer.initcheck")]
    SanitizerInitcheck,
    #[serde(rename = "sanitizer.memcheck")]
    SanitizerMemcheck,
    #[serde(rename = "sanitizer.racecheck")]
    SanitizerRacecheck,
    #[serde(rename = "sanitizer.synccheck")]
    SanitizerSynccheck,
    #[serde(rename = "task.facts")]
    TaskFacts,
    #[serde(rename = "timing.audit")]
    TimingAudit,
    #[serde(rename = "timing.stream_join")]
    TimingStreamJoin,
    #[serde(rename = "timing.timed_output_check")]
    TimingTimedOutputCheck,
    #[serde(rename = "timing.wall_envelope")]
    TimingWallEnvelope,
    /// A name this kbench does not know, as written (not in the schema: a worker names only
    /// the variants above).
    #[serde(untagged)]
    #[cfg_attr(test, schemars(skip))]
    Unknown(String),
}

impl CheckName {
    /// The name as the record and reasons write it.
    pub fn as_str(&self) -> &str {
        use CheckName as C;
        match self {
            C::CorrectnessScaledTolerance => "correctness.scaled_tolerance",
            C::DeterminismRerun => "determinism.rerun",
            C::HarnessAlone => "harness.alone",
            C::HarnessResultChannelAuth => "harness.result_channel_auth",
            C::HarnessTransfer => "harness.transfer",
            C::InputsDistributionPerturbation => "inputs.distribution_perturbation",
            C::InputsIntegrity => "inputs.integrity",
            C::InputsMeanShift => "inputs.mean_shift",
            C::InputsShapePerturbation => "inputs.shape_perturbation",
            C::IntegrityMonkeypatchSnapshot => "integrity.monkeypatch_snapshot",
            C::KernelbenchEnvironment => "kernelbench.environment",
            C::KernelsMapped => "kernels.mapped",
            C::MemoryPoisonedAllocator => "memory.poisoned_allocator",
            C::OutputsAlias => "outputs.alias",
            C::OutputsExactType => "outputs.exact_type",
            C::OutputsIndependence => "outputs.independence",
            C::OutputsSettled => "outputs.settled",
            C::OutputsStructure => "outputs.structure",
            C::ParamsPerturbation => "params.perturbation",
            C::PrecisionFp32Accumulation => "precision.fp32_accumulation",
            C::PrecisionFp64ErrorRatio => "precision.fp64_error_ratio",
            C::PrecisionFp64Judged => "precision.fp64_judged",
            C::PrecisionTf32Flags => "precision.tf32_flags",
            C::ProfileLibraryOutput => "profile.library_output",
            C::ProfileLibraryShare => "profile.library_share",
            C::ProfileNcu => "profile.ncu",
            C::ProfileReferenceOps => "profile.reference_ops",
            C::RuntimeL2PersistLimit => "runtime.l2_persist_limit",
            C::RuntimeProcesses => "runtime.processes",
            C::RuntimeThreadCount => "runtime.thread_count",
            C::SanitizerInitcheck => "sanitizer.initcheck",
            C::SanitizerMemcheck => "sanitizer.memcheck",
            C::SanitizerRacecheck => "sanitizer.racecheck",
            C::SanitizerSynccheck => "sanitizer.synccheck",
            C::TaskFacts => "task.facts",
            C::TimingAudit => "timing.audit",
            C::TimingStreamJoin => "timing.stream_join",
            C::TimingTimedOutputCheck => "timing.timed_output_check",
            C::TimingWallEnvelope => "timing.wall_envelope",
            C::Unknown(name) => name,
        }
    }
}

impl std::fmt::Display for CheckName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Every name the schema carries (the variants but `Unknown`).
    fn known() -> Vec<String> {
        let protocol = crate::worker::request::schema();
        match &protocol.types["CheckName"] {
            crate::worker::schema::TypeDef::Enum { values } => values.clone(),
            def => panic!("CheckName is not an enum: {def:?}"),
        }
    }

    #[test]
    fn each_name_reads_back_as_its_variant_and_as_str_is_serde_s() {
        let names = known();
        assert!(names.len() > 30, "{names:?}");
        for name in &names {
            let read: CheckName = serde_json::from_value(name.as_str().into()).unwrap();
            assert!(!matches!(read, CheckName::Unknown(_)), "{name}");
            assert_eq!(read.as_str(), name);
            assert_eq!(serde_json::to_value(&read).unwrap(), name.as_str());
        }
    }

    /// A record of an older kbench may name a check this one does not know: it is kept as
    /// written, so merging or reporting such a record writes it back unchanged.
    #[test]
    fn an_unknown_name_is_kept_as_written() {
        let read: CheckName = serde_json::from_value("outputs.kept_copy".into()).unwrap();
        assert_eq!(read, CheckName::Unknown("outputs.kept_copy".into()));
        assert_eq!(serde_json::to_value(&read).unwrap(), "outputs.kept_copy");
        assert_eq!(read.to_string(), "outputs.kept_copy");
    }

    /// The check names docs/checks.md writes in backquotes (`family.name`, of the families
    /// below) are the schema's, and each of those is documented there.
    #[test]
    fn docs_checks_md_documents_every_name_and_no_other() {
        const FAMILIES: [&str; 16] = [
            "correctness",
            "determinism",
            "harness",
            "inputs",
            "integrity",
            "kernelbench",
            "kernels",
            "memory",
            "outputs",
            "params",
            "precision",
            "profile",
            "runtime",
            "sanitizer",
            "task",
            "timing",
        ];
        // Functions of the worker package the text names, not checks.
        const NOT_CHECKS: [&str; 4] = [
            "params.built",
            "params.pair",
            "params.perturb",
            "runtime.warm_thread_pools",
        ];
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/checks.md");
        let text = std::fs::read_to_string(path).unwrap();
        let documented: BTreeSet<String> = text
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|quoted| {
                quoted.split_once('.').is_some_and(|(family, rest)| {
                    FAMILIES.contains(&family)
                        && !rest.is_empty()
                        && rest.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                })
            })
            .filter(|quoted| !NOT_CHECKS.contains(quoted))
            .map(String::from)
            .collect();
        let known: BTreeSet<String> = known().into_iter().collect();
        let undocumented: Vec<&String> = known.difference(&documented).collect();
        let unknown: Vec<&String> = documented.difference(&known).collect();
        assert!(
            undocumented.is_empty() && unknown.is_empty(),
            "names docs/checks.md does not document: {undocumented:?}; names it documents that are not CheckName's: {unknown:?}"
        );
    }
}
