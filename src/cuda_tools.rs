//! Where the CUDA toolkit's command-line tools are (`compute-sanitizer` for `--sanitize`, `ncu`
//! for `--profile ncu`): on PATH, else in `$CUDA_HOME/bin` (or `$CUDA_PATH/bin`), else in
//! `/usr/local/cuda/bin`, beside nvcc where the toolkit is installed as NVIDIA installs it; and
//! a worker's command line run by one.

use std::path::{Path, PathBuf};

use crate::worker::Spawn;

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

/// The worker's command line `spec` run by the tool at `tool` with its arguments `args`, the
/// venv's tools (ninja) first on PATH as for the worker run alone.
pub fn run_under(tool: &Path, mut args: Vec<String>, spec: Spawn) -> Spawn {
    args.push(spec.python.clone());
    args.extend(spec.args.iter().cloned());
    let venv = Path::new(&spec.python).parent().map(Path::to_path_buf);
    let host = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(venv.into_iter().chain(std::env::split_paths(&host)));
    let wrapped = Spawn {
        python: tool.display().to_string(),
        args,
        ..spec
    };
    match path {
        Ok(path) => wrapped.env("PATH", path.to_string_lossy()),
        Err(_) => wrapped,
    }
}

/// What the tools' wrapper tests share: a candidate worker's command line, and the worker's part
/// of a wrapped one (its last four arguments).
#[cfg(test)]
pub mod testing {
    use std::path::Path;

    use crate::worker::Spawn;

    pub fn candidate() -> Spawn {
        Spawn::role(
            "python3",
            Path::new("/w"),
            "candidate",
            "log".into(),
            "/out".into(),
        )
    }

    pub fn worker_tail(wrapped: &Spawn) -> Vec<&str> {
        let skip = wrapped.args.len().saturating_sub(4);
        wrapped.args[skip..].iter().map(String::as_str).collect()
    }
}
