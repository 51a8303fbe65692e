//! Runs split over machines: `kbench eval --shard I/N` evaluates every N-th submission (by
//! relative path, so every machine given the same tree and flags makes the same split).
//! `merge` joins the shards' records.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::submission::Submission;

/// Shard `index` of `count` (0-based, as Slurm array and Kubernetes Indexed Job indices are),
/// with the sizes a merge checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
    /// Submissions selected by the whole run, before the split.
    #[serde(default)]
    pub total: usize,
    /// Of them, this shard's.
    #[serde(default)]
    pub selected: usize,
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Shard, String> {
        let parsed = s
            .split_once('/')
            .and_then(|(i, n)| Some((i.trim().parse().ok()?, n.trim().parse().ok()?)));
        match parsed {
            Some((index, count)) if index < count => Ok(Shard {
                index,
                count,
                total: 0,
                selected: 0,
            }),
            _ => Err(format!("expected I/N with 0 <= I < N, e.g. 0/3, got '{s}'")),
        }
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// This shard's submissions: sorted by relative path, every `count`-th from `index`.
    pub fn select(mut self, mut all: Vec<Submission>) -> (Shard, Vec<Submission>) {
        all.sort_by(|a, b| a.file.cmp(&b.file));
        self.total = all.len();
        let mine: Vec<Submission> = all
            .into_iter()
            .enumerate()
            .filter(|(i, _)| *i % self.count as usize == self.index as usize)
            .map(|(_, s)| s)
            .collect();
        self.selected = mine.len();
        (self, mine)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::task::TaskId;

    fn submissions(n: u32) -> Vec<Submission> {
        (0..n)
            .map(|i| Submission {
                task: TaskId {
                    level: 1,
                    number: i + 1,
                },
                path: PathBuf::new(),
                file: format!("level1/{:02}.py", (i * 7) % n),
                sample: None,
                sha256: String::new(),
            })
            .collect()
    }

    #[test]
    fn shards_split_every_submission_once_in_any_input_order() {
        let shards: Vec<Shard> = (0..3).map(|i| format!("{i}/3").parse().unwrap()).collect();
        let mut files = Vec::new();
        for shard in &shards {
            let mut reversed = submissions(10);
            reversed.reverse();
            let (a, mine) = shard.select(submissions(10));
            let (b, again) = shard.select(reversed);
            assert_eq!(a, b);
            assert_eq!((a.total, a.selected), (10, mine.len()));
            let names: Vec<_> = mine.iter().map(|s| s.file.clone()).collect();
            assert_eq!(
                names,
                again.iter().map(|s| s.file.clone()).collect::<Vec<_>>()
            );
            files.extend(names);
        }
        files.sort();
        let mut all: Vec<_> = submissions(10).into_iter().map(|s| s.file).collect();
        all.sort();
        assert_eq!(files, all);
    }

    #[test]
    fn shard_syntax() {
        assert_eq!("2/3".parse::<Shard>().unwrap().to_string(), "2/3");
        for bad in ["3/3", "1", "a/3", "1/0", "-1/3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }
}
