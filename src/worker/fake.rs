//! A scripted worker for tests: each request is answered by a closure over the request, so the
//! pipeline and timing run end to end without Python. It keeps every request it was sent.

use std::time::Duration;

use serde_json::Value;

use super::link::Failure;
use super::link::Link;
use super::protocol::{Reply, WorkerError};
use super::request::Request;
use super::tree::Beside;

/// What the script answers to one request.
pub type Answer = Result<Reply, Failure>;

/// A worker whose replies come from `script`.
pub struct Scripted<F: FnMut(&Request) -> Answer> {
    script: F,
    /// Every request sent, in order.
    pub sent: Vec<Request>,
    /// Whether the worker was killed (by a failure, or by its user).
    pub killed: bool,
    /// Whether a request was answered with an error.
    pub erred: bool,
    /// Requests answered while what it started beside was stopped (`Link::pause`).
    pub while_paused: usize,
    /// Whether it is paused now.
    pub paused: bool,
    /// Times it was paused.
    pub pauses: usize,
    /// What `Link::beside` reports: processes it started beside its own.
    pub beside: Vec<Beside>,
}

impl<F: FnMut(&Request) -> Answer> Scripted<F> {
    pub fn new(script: F) -> Self {
        Scripted {
            script,
            sent: Vec::new(),
            killed: false,
            erred: false,
            while_paused: 0,
            paused: false,
            pauses: 0,
            beside: Vec::new(),
        }
    }

    /// The wire names of the commands sent, in order.
    pub fn commands(&self) -> Vec<String> {
        self.sent.iter().map(Request::cmd).collect()
    }
}

impl<F: FnMut(&Request) -> Answer> Link for Scripted<F> {
    fn exchange(&mut self, request: Request, _deadline: Duration) -> Answer {
        if self.killed {
            return Err(Failure::Exited("killed by signal 9".into()));
        }
        let answer = (self.script)(&request);
        self.sent.push(request);
        self.while_paused += usize::from(self.paused);
        if answer.is_err() {
            self.killed = true;
        }
        self.erred |= matches!(answer, Ok(Reply::Err(_)));
        answer
    }

    fn python_pid(&self) -> u32 {
        0
    }

    fn kill(&mut self) {
        self.killed = true;
    }

    fn pause(&mut self) {
        self.paused = true;
        self.pauses += 1;
    }

    fn resume(&mut self) {
        self.paused = false;
    }

    fn beside(&self) -> Vec<Beside> {
        self.beside.clone()
    }

    fn clean(&self) -> bool {
        !self.killed && !self.erred
    }
}

/// A successful reply with this body.
pub fn ok(body: Value) -> Answer {
    Ok(Reply::Ok(body))
}

/// The worker's error reply.
pub fn err(error: WorkerError) -> Answer {
    Ok(Reply::Err(error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::request::Ping;
    use crate::worker::ErrorKind;

    #[test]
    fn a_script_answers_and_records_each_request() {
        let mut worker = Scripted::new(|r| match r {
            Request::Ping(_) => ok(serde_json::json!({})),
            _ => err(WorkerError {
                kind: ErrorKind::Protocol,
                message: "unexpected".into(),
                fatal: false,
                traceback: None,
                drift: None,
                check: None,
            }),
        });
        let reply = worker.request(Ping {}, Duration::from_secs(1));
        assert!(matches!(reply, Ok(Reply::Ok(_))));
        assert_eq!(worker.commands(), ["ping"]);
        assert!(worker.clean());
    }

    #[test]
    fn a_failure_leaves_the_worker_dead() {
        let mut worker = Scripted::new(|_| Err(Failure::Timeout(Duration::from_secs(1))));
        assert!(worker.request(Ping {}, Duration::from_secs(1)).is_err());
        assert!(worker.killed);
        let again = worker.request(Ping {}, Duration::from_secs(1));
        assert!(matches!(again, Err(Failure::Exited(_))));
        assert!(!worker.clean());
    }

    #[test]
    fn an_error_reply_leaves_the_worker_running_but_not_clean() {
        let mut worker = Scripted::new(|_| {
            err(WorkerError {
                kind: ErrorKind::Cuda,
                message: "an illegal memory access".into(),
                fatal: false,
                traceback: None,
                drift: None,
                check: None,
            })
        });
        assert!(worker.request(Ping {}, Duration::from_secs(1)).is_ok());
        assert!((!worker.killed, worker.clean()) == (true, false));
    }

    #[test]
    fn a_reply_that_does_not_fit_the_command_kills_the_worker() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Needs {
            field: u32,
        }
        let mut worker = Scripted::new(|_| ok(serde_json::json!({"other": 1})));
        let reply = worker.exchange(Request::Ping(Ping {}), Duration::from_secs(1));
        let read = reply.map(|r| r.read::<Needs>("ping"));
        assert!(matches!(read, Ok(Err(_))));
    }
}
