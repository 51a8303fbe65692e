//! The requests a service answered, by the id their client gave them, so that no request is
//! judged twice: a retry of one already judged gets the reply it had (`Claim::Done`), a retry of
//! one still being judged waits for it (`Claim::Waiting`), and only a request no instance knows
//! is judged (`Claim::New`, whose `Ticket` keeps the reply). A reply that did not judge the
//! request (a refusal, a request left unfinished when the service stopped) is forgotten, so its
//! retry is judged.
//!
//! Each judged reply is kept on disk, in `<out>/requests/<sha256 of the id>.json` (memory holds
//! only the requests being judged), so a restarted service (`--resume`) answers as before, and
//! instances of one run (`serve --instance`, one out root) see each other's: an id this service
//! does not know is looked for in its siblings' folders (read as untrusted files: regular, no
//! link, bounded) before it is judged. An id names one request: the same id with another source,
//! task or settings is refused (409).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::request::Refusal;
use crate::untrusted;

/// The folder of each instance's answers, in its out folder.
pub const FOLDER: &str = "requests";
/// The most an answer file may hold (a reply holds the whole evaluation).
const ANSWER_CAP: u64 = 64 << 20;

/// What a request is, told apart from another with the same id: its task, source and settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Asked {
    pub task: String,
    pub sha256: String,
    /// The run its settings make (`request::Key::folder`).
    pub settings: String,
}

/// A reply being waited for.
#[derive(Default)]
struct Pending {
    reply: Mutex<Option<Result<Value, Refusal>>>,
    ready: Condvar,
}

/// What `claim` found for an id.
pub enum Claim {
    /// Judged before (here, or by a sibling instance): its reply.
    Done(Value),
    /// Being judged here now: wait for it (`wait`).
    Waiting(Waiter),
    /// Unknown: judge it, and hand the reply to the ticket.
    New(Ticket),
}

pub struct Waiter(Arc<Pending>);

/// The right to judge a request; its reply, once given (`finish`), answers every retry. Dropped
/// without one, the id is forgotten.
pub struct Ticket {
    answers: Arc<Inner>,
    id: String,
    pending: Arc<Pending>,
    finished: bool,
}

struct Inner {
    /// The requests being judged here; those judged are on disk only (a service's memory does
    /// not grow with its requests).
    running: Mutex<HashMap<String, (Asked, Arc<Pending>)>>,
    /// This instance's answers folder, and the out root of the run's instances (None: a service
    /// alone).
    own: PathBuf,
    siblings: Option<PathBuf>,
}

#[derive(Clone)]
pub struct Answers(Arc<Inner>);

impl Answers {
    /// The answers of the service whose out folder is `out`; `siblings`: the out root of the
    /// instances of one run.
    pub fn new(out: &Path, siblings: Option<PathBuf>) -> Self {
        Answers(Arc::new(Inner {
            running: Mutex::default(),
            own: out.join(FOLDER),
            siblings,
        }))
    }

    /// What is known of `id`, asked as `asked`; a refusal when the id named another request.
    pub fn claim(&self, id: &str, asked: &Asked) -> Result<Claim, Refusal> {
        let mut running = self
            .0
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((first, pending)) = running.get(id) {
            check_same(id, first, asked)?;
            return Ok(Claim::Waiting(Waiter(Arc::clone(pending))));
        }
        if let Some((first, reply)) = self.0.answer(id) {
            check_same(id, &first, asked)?;
            return Ok(Claim::Done(reply));
        }
        let pending = Arc::new(Pending::default());
        running.insert(id.to_string(), (asked.clone(), Arc::clone(&pending)));
        Ok(Claim::New(Ticket {
            answers: Arc::clone(&self.0),
            id: id.to_string(),
            pending,
            finished: false,
        }))
    }

    /// Keep `reply` as the answer to `id` where none is kept (a record's row, on `--resume`,
    /// whose answer a stop kept from being written).
    pub fn keep(&self, id: &str, asked: &Asked, reply: &Value) -> crate::error::Result<()> {
        if self.0.answer(id).is_some() {
            return Ok(());
        }
        self.0.write(id, asked, reply)
    }
}

impl Inner {
    /// The answer to `id` kept here or, for an instance, by a sibling (instances in name order).
    fn answer(&self, id: &str) -> Option<(Asked, Value)> {
        let name = file_name(id);
        let own = untrusted::read_regular_beneath(&self.own, Path::new(&name), ANSWER_CAP).ok();
        if let Some(found) = own.and_then(|bytes| parse_answer(&bytes, id)) {
            return Some(found);
        }
        let root = self.siblings.as_ref()?;
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
            .ok()?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        dirs.sort();
        let rel = Path::new(FOLDER).join(&name);
        dirs.iter().find_map(|dir| {
            let bytes = untrusted::read_regular_beneath(dir, &rel, ANSWER_CAP).ok()?;
            parse_answer(&bytes, id)
        })
    }

    fn write(&self, id: &str, asked: &Asked, reply: &Value) -> crate::error::Result<()> {
        let own = &self.own;
        std::fs::create_dir_all(own).map_err(|e| crate::error::Error::write(own, e))?;
        let answer = serde_json::json!({
            "id": id,
            "task": asked.task,
            "sha256": asked.sha256,
            "settings": asked.settings,
            "reply": reply,
        });
        crate::atomic_file::write(&own.join(file_name(id)), answer.to_string().as_bytes())
    }
}

fn check_same(id: &str, first: &Asked, asked: &Asked) -> Result<(), Refusal> {
    if first == asked {
        return Ok(());
    }
    Err(Refusal::new(
        409,
        format!(
            "request id {id:?} was given to another request ({}, source sha256 {}, settings {}): \
             an id names one request, its retries included",
            first.task, first.sha256, first.settings
        ),
    ))
}

/// An answer file's name: the SHA-256 of the id (any id is a safe file name so).
fn file_name(id: &str) -> String {
    format!("{:x}.json", Sha256::digest(id.as_bytes()))
}

/// An answer file's request and reply, if it is one and answers `id`.
fn parse_answer(bytes: &[u8], id: &str) -> Option<(Asked, Value)> {
    let answer: Value = serde_json::from_slice(bytes).ok()?;
    (answer["id"].as_str()? == id).then_some(())?;
    let asked = Asked {
        task: answer["task"].as_str()?.to_string(),
        sha256: answer["sha256"].as_str()?.to_string(),
        settings: answer["settings"].as_str()?.to_string(),
    };
    Some((asked, answer["reply"].clone()))
}

impl Waiter {
    /// The reply of the request being judged, within `within`.
    pub fn wait(self, within: Duration) -> Result<Value, Refusal> {
        let until = Instant::now() + within;
        let mut reply = self.0.reply.lock().unwrap_or_else(PoisonError::into_inner);
        while reply.is_none() && Instant::now() < until {
            let left = until.saturating_duration_since(Instant::now());
            reply = (self.0.ready.wait_timeout(reply, left))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        reply.clone().unwrap_or_else(|| {
            Err(Refusal::new(
                503,
                "a request with this id is still being judged: retry later",
            ))
        })
    }
}

impl Ticket {
    /// The request's reply: a judgement is kept (written to the answers folder, where retries
    /// and sibling instances find it), anything else forgotten; whoever waits gets it either way.
    pub fn finish(mut self, asked: &Asked, reply: &Result<Value, Refusal>) {
        self.finished = true;
        if let Ok(value) = reply {
            if let Err(e) = self.answers.write(&self.id, asked, value) {
                eprintln!(
                    "kbench serve: failed to keep the answer to {:?}: {e}",
                    self.id
                );
            }
        }
        self.end(reply.clone());
    }

    /// No longer being judged: the waiters get `reply`.
    fn end(&self, reply: Result<Value, Refusal>) {
        let mut running = (self.answers.running.lock()).unwrap_or_else(PoisonError::into_inner);
        running.remove(&self.id);
        drop(running);
        *self
            .pending
            .reply
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(reply);
        self.pending.ready.notify_all();
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.finished {
            self.end(Err(Refusal::new(500, "kbench failed to judge the request")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn asked(sha: &str) -> Asked {
        Asked {
            task: "level1/19_ReLU".into(),
            sha256: sha.into(),
            settings: "variants/trials5".into(),
        }
    }

    fn new(claim: Claim) -> Ticket {
        match claim {
            Claim::New(ticket) => ticket,
            _ => panic!("not new"),
        }
    }

    #[test]
    fn a_judged_request_is_answered_again_and_a_refused_one_judged_again() {
        let dir = tempfile::tempdir().unwrap();
        let answers = Answers::new(dir.path(), None);
        let ticket = new(answers.claim("r1", &asked("a")).unwrap());
        // While it is judged, a retry waits for its reply.
        let Claim::Waiting(waiter) = answers.claim("r1", &asked("a")).unwrap() else {
            panic!("not waiting")
        };
        let waited = std::thread::spawn(move || waiter.wait(Duration::from_secs(30)));
        ticket.finish(&asked("a"), &Ok(json!({"verdict": "pass"})));
        assert_eq!(waited.join().unwrap().unwrap()["verdict"], "pass");
        let Claim::Done(reply) = answers.claim("r1", &asked("a")).unwrap() else {
            panic!("not done")
        };
        assert_eq!(reply["verdict"], "pass");
        // The same id for another source is refused.
        let Err(refusal) = answers.claim("r1", &asked("b")) else {
            panic!("taken")
        };
        assert_eq!(refusal.status, 409);
        // A refusal is no judgement: the retry is judged; a ticket dropped unused too.
        let ticket = new(answers.claim("r2", &asked("a")).unwrap());
        ticket.finish(&asked("a"), &Err(Refusal::new(503, "stopping")));
        drop(new(answers.claim("r2", &asked("a")).unwrap()));
        new(answers.claim("r2", &asked("a")).unwrap());
    }

    #[test]
    fn a_sibling_instance_s_answer_is_found_and_nothing_through_a_link() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        let siblings = Some(root.path().to_path_buf());
        let first = Answers::new(&a, siblings.clone());
        let ticket = new(first.claim("r1", &asked("a")).unwrap());
        ticket.finish(&asked("a"), &Ok(json!({"verdict": "incorrect"})));
        std::fs::create_dir_all(&b).unwrap();
        let second = Answers::new(&b, siblings.clone());
        let Claim::Done(reply) = second.claim("r1", &asked("a")).unwrap() else {
            panic!("not found")
        };
        assert_eq!(reply["verdict"], "incorrect");
        assert_eq!(second.claim("r1", &asked("c")).err().unwrap().status, 409);
        // An answers folder that is a link to another folder is not read.
        let c = root.path().join("c");
        std::fs::create_dir_all(&c).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let planted = Answers::new(elsewhere.path(), None);
        new(planted.claim("r2", &asked("a")).unwrap())
            .finish(&asked("a"), &Ok(json!({"verdict": "pass"})));
        std::os::unix::fs::symlink(elsewhere.path().join(FOLDER), c.join(FOLDER)).unwrap();
        new(second.claim("r2", &asked("a")).unwrap());
    }

    #[test]
    fn a_restarted_service_answers_what_it_judged_and_keeps_what_its_record_holds() {
        let dir = tempfile::tempdir().unwrap();
        let before = Answers::new(dir.path(), None);
        new(before.claim("r1", &asked("a")).unwrap())
            .finish(&asked("a"), &Ok(json!({"verdict": "pass"})));
        let after = Answers::new(dir.path(), None);
        assert!(matches!(
            after.claim("r1", &asked("a")).unwrap(),
            Claim::Done(_)
        ));
        // A row of the record whose answer was never written is kept; one kept is not replaced.
        after
            .keep("r2", &asked("a"), &json!({"verdict": "incorrect"}))
            .unwrap();
        after
            .keep("r1", &asked("a"), &json!({"verdict": "other"}))
            .unwrap();
        let Claim::Done(r1) = after.claim("r1", &asked("a")).unwrap() else {
            panic!("r1")
        };
        let Claim::Done(r2) = after.claim("r2", &asked("a")).unwrap() else {
            panic!("r2")
        };
        assert_eq!(
            (r1["verdict"].as_str(), r2["verdict"].as_str()),
            (Some("pass"), Some("incorrect"))
        );
    }
}
