//! `kbench import FORMAT SRC OUT`: kernels as their authors published them (CUDA-L1's JSON
//! Lines, upstream KernelBench run directories, Sakana AI CUDA Engineer rows, CUDA-L2's and
//! good-kernels' checkouts) turned into the task tree of the references they were timed against
//! (`OUT/tasks/levelN/ID_Name.py`), the submissions in the mirrored layout
//! (`OUT/submissions/levelN/...`) and their published results (`OUT/published.csv`). A bad row is skipped with why; it never stops the import.
//!
//! A corpus is untrusted: its files are read through no symbolic link, never blocking and up to
//! a cap (`untrusted`); a link, FIFO, socket or device in it is not read, but named on stderr and
//! in the report (`Import::unread`); and OUT's files are created new, never through a link.

pub mod cuda_l1;
pub mod cuda_l2;
pub mod good_kernels;
pub mod kernelbench_run;
mod rows;
pub mod sakana;
mod tree;

#[cfg(test)]
mod tests;

pub use rows::{boolean, code, json_rows, number, task_id, whole};
pub use tree::{file_name, Import, CORPUS_CAP, SOURCE_CAP};
