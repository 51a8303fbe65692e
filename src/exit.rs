//! The process's exit codes, as documented in `--help` (`cli`) and the README: 0 the gate
//! passed, 1 the gate failed, 2 kbench itself failed, 130 a termination signal stopped it. Only
//! commands, `main` and the signal handler (`signals`) choose one; a bad kernel moves the gate,
//! never kbench's own code.

use std::process::ExitCode;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Every evaluated kernel passed the gate (or the command has no gate).
    Passed = 0,
    /// A kernel failed the gate (or `compare` found a regression, `check` an error).
    GateFailed = 1,
    /// kbench's own failure: bad arguments, unreadable input, no Python with torch.
    KbenchFailed = 2,
    /// SIGINT, SIGTERM or SIGHUP stopped kbench before its end (`signals`).
    Stopped = 130,
}

impl Exit {
    /// The exit of a command whose gate passed or not.
    pub fn gate(passed: bool) -> Exit {
        if passed {
            Exit::Passed
        } else {
            Exit::GateFailed
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_documented_ones() {
        assert_eq!(Exit::Passed as u8, 0);
        assert_eq!(Exit::GateFailed as u8, 1);
        assert_eq!(Exit::KbenchFailed as u8, 2);
        assert_eq!(Exit::Stopped as u8, 130);
        assert_eq!(Exit::gate(true), Exit::Passed);
        assert_eq!(Exit::gate(false), Exit::GateFailed);
    }
}
