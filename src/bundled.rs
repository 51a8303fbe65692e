//! The 250 KernelBench tasks shipped inside the binary, written to the cache on first use.

use std::path::{Path, PathBuf};

use include_dir::{include_dir, Dir};

use crate::error::Result;
use crate::worker::python::extract;

static LEVEL1: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/level1");
static LEVEL2: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/level2");
static LEVEL3: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/level3");

/// A folder holding level1/ level2/ level3/ as built into this kbench.
pub fn tasks_root(cache: &Path) -> Result<PathBuf> {
    extract(
        &[
            ("level1", &LEVEL1),
            ("level2", &LEVEL2),
            ("level3", &LEVEL3),
        ],
        cache,
        "tasks",
    )
}
