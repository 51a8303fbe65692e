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
