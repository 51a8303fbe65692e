//! Progress while a run goes, on stderr: a line per finished evaluation and what is running now,
//! in which phase. On a terminal a bar that redraws twice a second (its clock and the running
//! evaluation's times move through long phases); without one (a pipe, a log file) a line every
//! `LINE_EVERY`, so the output is never silent for long. Phases are recorded as the pipeline
//! tells them (`pipeline::Phase`): nothing here decides one.

use std::io::IsTerminal;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressState, ProgressStyle};

use crate::pipeline::Phase;
use crate::record::{Evaluation, Timing};
use crate::submission::Submission;

/// How often a line is printed when stderr is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(10);

/// The longest reason a finished evaluation's line shows.
const REASON_CHARS: usize = 120;

pub struct Progress {
    bar: ProgressBar,
    state: Arc<Mutex<State>>,
    /// Without a terminal: the thread printing lines, stopped by dropping the sender.
    lines: Option<(mpsc::Sender<()>, JoinHandle<()>)>,
}

impl Progress {
    pub fn new(total: usize) -> Progress {
        let state = Arc::new(Mutex::new(State::new(total, Instant::now())));
        let bar = ProgressBar::new(total as u64);
        let shown = Arc::clone(&state);
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} evaluated, {activity}",
            )
            .expect("static template")
            .with_key(
                "activity",
                move |_: &ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = w.write_str(&lock(&shown).activity(Instant::now()));
                },
            ),
        );
        let lines = if std::io::stderr().is_terminal() {
            bar.enable_steady_tick(Duration::from_millis(500));
            None
        } else {
            let (stop, stopped) = mpsc::channel::<()>();
            let state = Arc::clone(&state);
            let thread = std::thread::spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(LINE_EVERY) {
                    eprintln!("{}", lock(&state).line(Instant::now()));
                }
            });
            Some((stop, thread))
        };
        Progress { bar, state, lines }
    }

    pub fn built(&self) {
        lock(&self.state).built += 1;
        self.bar.tick();
    }

    pub fn started(&self, s: &Submission) {
        lock(&self.state).running.push(Running {
            file: s.file.clone(),
            since: Instant::now(),
            phase: None,
        });
        self.bar.tick();
    }

    pub fn entered(&self, s: &Submission, phase: Phase) {
        if let Some(r) = lock(&self.state)
            .running
            .iter_mut()
            .find(|r| r.file == s.file)
        {
            r.phase = Some((phase, Instant::now()));
        }
        self.bar.tick();
    }

    pub fn evaluated(&self, e: &Evaluation) {
        {
            let mut state = lock(&self.state);
            state.done += 1;
            if let Some(at) = state.running.iter().position(|r| r.file == e.file) {
                state.running.remove(at);
            }
        }
        self.bar.inc(1);
        let timing = e.timing.as_ref().map(timing_line).unwrap_or_default();
        let reason = if e.reason.is_empty() {
            String::new()
        } else {
            format!("  ({})", short_reason(&e.reason))
        };
        self.bar.suspend(|| {
            eprintln!(
                "{:>13}  {}  {}{timing}{reason}",
                e.verdict.as_str(),
                e.label(),
                e.file
            )
        });
    }

    pub fn finish(self) {
        self.bar.finish_and_clear();
        if let Some((stop, thread)) = self.lines {
            drop(stop);
            let _ = thread.join();
        }
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the run has done and what it is doing.
struct State {
    started: Instant,
    total: usize,
    built: usize,
    done: usize,
    running: Vec<Running>,
}

/// An evaluation running now: its file, when it started, and the phase it is in, since when.
struct Running {
    file: String,
    since: Instant,
    phase: Option<(Phase, Instant)>,
}

impl State {
    fn new(total: usize, started: Instant) -> State {
        State {
            started,
            total,
            built: 0,
            done: 0,
            running: Vec::new(),
        }
    }

    /// The builds, then the evaluation running longest and for how long, and its phase.
    fn activity(&self, now: Instant) -> String {
        let mut text = format!("{} built", self.built);
        match self.running.iter().min_by_key(|r| r.since) {
            Some(r) => {
                text.push_str(&format!(
                    "; evaluating {} for {}",
                    r.file,
                    clock(now.saturating_duration_since(r.since))
                ));
                if let Some((phase, since)) = r.phase {
                    text.push_str(&format!(
                        ", {} for {}",
                        phase.as_str(),
                        clock(now.saturating_duration_since(since))
                    ));
                }
                if self.running.len() > 1 {
                    text.push_str(&format!(" (+{} more)", self.running.len() - 1));
                }
            }
            None if self.built < self.total => text.push_str("; building"),
            None => {}
        }
        text
    }

    /// The line printed without a terminal.
    fn line(&self, now: Instant) -> String {
        format!(
            "kbench: [{}] {}/{} evaluated, {}",
            clock(now.saturating_duration_since(self.started)),
            self.done,
            self.total,
            self.activity(now)
        )
    }
}

fn clock(d: Duration) -> String {
    let s = d.as_secs();
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Speedup, interval, label and %SOL of one evaluation, as its progress line shows them.
fn timing_line(t: &Timing) -> String {
    let mut line = format!(
        "  {:.3}x [{:.3}, {:.3}] {}",
        t.speedup, t.speedup_ci_low, t.speedup_ci_high, t.label
    );
    if let Some(b) = &t.compile {
        line.push_str(&format!(
            "  vs torch.compile {:.3}x [{:.3}, {:.3}] {}",
            b.speedup, b.speedup_ci_low, b.speedup_ci_high, b.label
        ));
    }
    if let Some(p) = t.percent_sol {
        line.push_str(&format!("  {p:.0}% SOL"));
    }
    if t.invalid {
        line.push_str("  TIMING INVALID");
    }
    line
}

/// A reason's first line, cut at `REASON_CHARS`; where anything is left out, the line says
/// where the whole reason is.
fn short_reason(reason: &str) -> String {
    let line = reason
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let cut: String = line.chars().take(REASON_CHARS).collect();
    if cut == reason.trim() {
        cut
    } else {
        format!("{cut}... [whole reason in results.json and report.html]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(file: &str, since: Instant, phase: Option<(Phase, Instant)>) -> Running {
        Running {
            file: file.into(),
            since,
            phase,
        }
    }

    #[test]
    fn the_line_names_the_longest_running_evaluation_its_phase_and_their_times() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let mut state = State::new(30, t0);
        assert_eq!(state.activity(t0), "0 built; building");
        state.built = 5;
        state.done = 2;
        state.running = vec![
            running("level1/2_b.py", at(60), Some((Phase::Trials, at(70)))),
            running("level1/1_a.py", at(20), None),
        ];
        let now = at(3725);
        assert_eq!(
            state.line(now),
            "kbench: [01:02:05] 2/30 evaluated, 5 built; evaluating level1/1_a.py for \
             01:01:45 (+1 more)"
        );
        state.running[1].phase = Some((Phase::Timing, at(3695)));
        assert_eq!(
            state.activity(now),
            "5 built; evaluating level1/1_a.py for 01:01:45, timing for 00:00:30 (+1 more)"
        );
        state.running.remove(1);
        assert_eq!(
            state.activity(now),
            "5 built; evaluating level1/2_b.py for 01:01:05, correctness trials for 01:00:55"
        );
    }

    #[test]
    fn a_long_or_multi_line_reason_says_where_the_rest_is() {
        assert_eq!(
            short_reason("trial 0: output 0 differs"),
            "trial 0: output 0 differs"
        );
        let long = "x".repeat(200);
        let short = short_reason(&long);
        assert!(short.starts_with(&"x".repeat(REASON_CHARS)));
        assert!(short.ends_with("... [whole reason in results.json and report.html]"));
        assert!(short_reason("\nfirst\nsecond").starts_with("first... [whole reason"));
    }
}
