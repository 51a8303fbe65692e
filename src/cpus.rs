//! Where timing runs on the host. The thread that submits a timed forward runs, in both workers
//! of a GPU slot, on one CPU set aside for that slot: on a virtual machine the CPUs differ in
//! speed by up to 2x and drift (`reports/h100-host-placement`), so a forward that waits for
//! the GPU while it is being submitted ran at the speed of whichever CPU each worker's process
//! happened to be on. On one CPU, taken in turns, both arms see the same host.

use std::io;

/// The CPUs this thread may run on, ascending.
fn allowed() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .collect())
    }
}

/// Keep this thread, and the threads and processes it starts from now on, to `cpus`.
fn restrict(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: as above; CPU_SET only writes inside the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The CPU for each of `slots` timed pairs (the highest CPUs this process may use, shared round
/// robin when there are fewer CPUs than slots) and the CPUs left for everything else, or None
/// when fewer than two would be left: then nothing is set aside, and timing still runs both
/// arms' submitting threads on the slot's CPU.
fn plan(cpus: &[usize], slots: usize) -> (Vec<usize>, Option<Vec<usize>>) {
    if cpus.is_empty() {
        return (Vec::new(), None);
    }
    let timing: Vec<usize> = (0..slots)
        .map(|i| cpus[cpus.len() - 1 - i % cpus.len()])
        .collect();
    let rest: Vec<usize> = cpus
        .iter()
        .copied()
        .filter(|c| !timing.contains(c))
        .collect();
    (timing, (rest.len() >= 2).then_some(rest))
}

/// Set the timing CPUs aside: from here on this thread and everything it starts (builds,
/// workers, their threads) keep off them; a worker's submitting thread moves onto its slot's CPU
/// when timing starts. Returns the CPU of each slot (empty when the affinity cannot be read).
/// Call it before starting threads that should keep off them.
pub fn reserve(slots: usize) -> Vec<usize> {
    let Ok(cpus) = allowed() else {
        return Vec::new();
    };
    let (timing, rest) = plan(&cpus, slots);
    if let Some(rest) = rest {
        if let Err(e) = restrict(&rest) {
            eprintln!("kbench: could not keep the timing CPUs {timing:?} free: {e}");
        }
    }
    timing
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_cpus_are_set_aside_one_per_slot() {
        let cpus: Vec<usize> = (0..16).collect();
        let (timing, rest) = plan(&cpus, 2);
        assert_eq!(timing, vec![15, 14]);
        assert_eq!(rest.unwrap(), (0..14).collect::<Vec<_>>());
    }

    #[test]
    fn nothing_is_set_aside_when_too_few_would_be_left() {
        let (timing, rest) = plan(&[0, 1], 1);
        assert_eq!(timing, vec![1]);
        assert!(rest.is_none());
        let (timing, rest) = plan(&[3], 2);
        assert_eq!(timing, vec![3, 3]);
        assert!(rest.is_none());
        assert_eq!(plan(&[], 1), (Vec::new(), None));
    }

    #[test]
    fn this_process_may_run_somewhere() {
        assert!(!allowed().unwrap().is_empty());
    }
}
