//! The task's size in this run, as the compile, reference and candidate workers load it.

use serde_json::{Map, Value};

use crate::config::Config;
use crate::taskfacts::TaskFacts;

/// The task's size in this run: `--scale` and `--set`, except that in a tree without a
/// `scale.toml` the small size derived in the task's facts (`facts`) stands in for `--scale
/// small` (`--set` still wins).
pub(super) fn sizing(
    cfg: &Config,
    facts: Option<&TaskFacts>,
) -> (Option<String>, Map<String, Value>) {
    match facts {
        Some(f)
            if cfg.scale.as_deref() == Some("small")
                && f.small_size.as_deref() == Some("derived") =>
        {
            let mut set = f.small_overrides.clone();
            set.extend(cfg.sets.clone());
            (None, set)
        }
        _ => (cfg.scale.clone(), cfg.sets.clone()),
    }
}

/// The task's small size, where its facts know one (`scale.toml`'s, or the derived one), with
/// `--set`; else the run's size (`sizing`). The sanitizer's trial runs at it: the tools slow a
/// kernel down a hundredfold and more.
pub(super) fn small(
    cfg: &Config,
    facts: Option<&TaskFacts>,
) -> (Option<String>, Map<String, Value>) {
    match facts.and_then(|f| f.small_size.as_deref().map(|source| (f, source))) {
        Some((f, "derived")) => {
            let mut set = f.small_overrides.clone();
            set.extend(cfg.sets.clone());
            (None, set)
        }
        Some((_, "scale.toml")) => (Some("small".into()), cfg.sets.clone()),
        _ => sizing(cfg, facts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::resolved;

    #[test]
    fn the_small_size_is_the_task_s_own_or_the_run_s() {
        let cfg = resolved(&["--set", "dim=8"]);
        let facts = |source: Option<&str>| TaskFacts {
            small_size: source.map(str::to_string),
            small_overrides: serde_json::from_str(r#"{"batch_size": 2}"#).unwrap(),
            ..Default::default()
        };
        let derived = facts(Some("derived"));
        let (scale, set) = small(&cfg, Some(&derived));
        assert_eq!((scale, set.len()), (None, 2));
        let table = facts(Some("scale.toml"));
        assert_eq!(small(&cfg, Some(&table)).0.as_deref(), Some("small"));
        let unknown = facts(None);
        assert_eq!(small(&cfg, Some(&unknown)), sizing(&cfg, Some(&unknown)));
        assert_eq!(small(&cfg, None), sizing(&cfg, None));
    }
}
