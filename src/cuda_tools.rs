//! Where the CUDA toolkit's command-line tools are (`compute-sanitizer` for `--sanitize`, `ncu`
//! for `--profile ncu`): on PATH, else in `$CUDA_HOME/bin` (or `$CUDA_PATH/bin`), else in
//! `/usr/local/cuda/bin`, beside nvcc where the toolkit is installed as NVIDIA installs it.

use std::path::PathBuf;

/// The tool `name`'s path, the first place that holds it as a file.
pub fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let cuda_home = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(|home| PathBuf::from(home).join("bin"));
    std::env::split_paths(&path)
        .chain(cuda_home)
        .chain([PathBuf::from("/usr/local/cuda/bin")])
        .map(|dir| dir.join(name))
        .find(|tool| tool.is_file())
}
