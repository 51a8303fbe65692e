//! The service over HTTP (tiny_http: one thread per request, each waiting for its evaluation):
//! `POST /v1/evaluate`, `GET /v1/health`, `GET /v1/tasks`, `POST /v1/shutdown`, JSON in and
//! out, every route behind the bearer token when the service has one. Errors are JSON
//! `{"error": ...}` with a 4xx or 5xx status; a verdict, whatever it is, is a 200. The health
//! says `ready`, or 503 once the service drains, and without the token it says only that (a
//! probe's view). Requests are answered until the service ends, while it drains too (a 503, not
//! a connection left hanging). The requests being answered are counted (`Answering`), so a
//! stopping service waits for their replies, but not for a client that never finishes sending
//! or reading.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tiny_http::{Header, Method, Request, Response, Server};

use super::request::{self, Refusal};
use super::service::Service;

/// The requests being answered.
#[derive(Default)]
pub struct Answering {
    count: Mutex<usize>,
    changed: Condvar,
}

/// One request being answered, until dropped.
struct Answer(Arc<Answering>);

impl Drop for Answer {
    fn drop(&mut self) {
        *self.0.count.lock().unwrap_or_else(PoisonError::into_inner) -= 1;
        self.0.changed.notify_all();
    }
}

impl Answering {
    fn begin(self: &Arc<Self>) -> Answer {
        *self.count.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        Answer(Arc::clone(self))
    }

    /// Wait up to `within` for every request to be answered; how many are not.
    pub fn wait(&self, within: Duration) -> usize {
        let until = Instant::now() + within;
        let mut count = self.count.lock().unwrap_or_else(PoisonError::into_inner);
        while *count > 0 && Instant::now() < until {
            let left = until.saturating_duration_since(Instant::now());
            count = self
                .changed
                .wait_timeout(count, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *count
    }
}

/// Answer requests, each on a thread of its own (counted in `answering`), until `closed` is
/// set: after `stop` too (a signal or `POST /v1/shutdown`), while the service drains.
pub fn serve(
    server: &Server,
    service: &Arc<Service>,
    token: Option<&str>,
    stop: &Arc<AtomicBool>,
    closed: &AtomicBool,
    answering: &Arc<Answering>,
) {
    while !closed.load(Ordering::SeqCst) {
        match server.recv_timeout(Duration::from_millis(100)) {
            Ok(Some(request)) => {
                let answer = answering.begin();
                let (service, stop) = (Arc::clone(service), Arc::clone(stop));
                let token = token.map(str::to_string);
                std::thread::spawn(move || {
                    respond(request, &service, token.as_deref(), &stop);
                    drop(answer);
                });
            }
            Ok(None) => {}
            Err(e) => {
                eprintln!("kbench serve: failed to accept a request: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

fn respond(mut request: Request, service: &Service, token: Option<&str>, stop: &AtomicBool) {
    let (status, body) = match route(&mut request, service, token, stop) {
        Ok(body) => (200, body),
        Err(refusal) => (refusal.status, json!({ "error": refusal.message })),
    };
    let response = Response::from_string(body.to_string())
        .with_status_code(status)
        .with_header(
            Header::from_bytes("Content-Type", "application/json").expect("a valid header"),
        );
    // A client gone before its reply: the result is in the record all the same.
    let _ = request.respond(response);
}

fn route(
    request: &mut Request,
    service: &Service,
    token: Option<&str>,
    stop: &AtomicBool,
) -> Result<Value, Refusal> {
    let path = request
        .url()
        .split('?')
        .next()
        .unwrap_or_default()
        .to_string();
    if let Some(token) = token {
        let given = request
            .headers()
            .iter()
            .find(|h| h.field.equiv("Authorization"))
            .map(|h| h.value.as_str().to_string())
            .unwrap_or_default();
        if !same(given.strip_prefix("Bearer ").unwrap_or(""), token) {
            // A probe (Kubernetes', a load balancer's) learns readiness and nothing more.
            if (request.method(), path.as_str()) == (&Method::Get, "/v1/health") {
                return readiness(service).map(|state| json!({ "status": state }));
            }
            return Err(Refusal::new(
                401,
                "this service needs its token: Authorization: Bearer TOKEN",
            ));
        }
    }
    match (request.method(), path.as_str()) {
        (Method::Post, "/v1/evaluate") => {
            let body = read_body(request, service.max_source())?;
            let parsed: request::Request = serde_json::from_slice(&body)
                .map_err(|e| Refusal::new(400, format!("read the request's JSON: {e}")))?;
            service.evaluate(&parsed)
        }
        (Method::Get, "/v1/health") => {
            let state = readiness(service)?;
            let config = service.config();
            let (admitted, capacity) = service.load();
            let place = service.place();
            Ok(json!({
                "status": state,
                "instance": place.instance,
                "node": place.node,
                "kbench_version": env!("CARGO_PKG_VERSION"),
                "device": config.device.torch_name(),
                "gpus": config.gpus,
                "slots": config.slots(),
                "lanes": config.lanes,
                "tasks": service.tasks().len(),
                "queue": { "admitted": admitted, "capacity": capacity },
                "out": config.out,
            }))
        }
        (Method::Get, "/v1/tasks") => Ok(json!({
            "tasks": service
                .tasks()
                .iter()
                .map(|t| json!({ "id": t.id.to_string(), "name": t.label() }))
                .collect::<Vec<_>>(),
        })),
        (Method::Post, "/v1/shutdown") => {
            stop.store(true, Ordering::SeqCst);
            Ok(json!({ "status": "stopping" }))
        }
        (_, "/v1/evaluate" | "/v1/health" | "/v1/tasks" | "/v1/shutdown") => Err(Refusal::new(
            405,
            format!("{} {path}: wrong method", request.method()),
        )),
        _ => Err(Refusal::new(404, format!("no route {path}"))),
    }
}

/// `ready` (200) while the service takes requests; a 503 saying `draining` once it was asked to
/// stop. (Before its set-up is done it does not listen: no reply is no readiness.)
fn readiness(service: &Service) -> Result<&'static str, Refusal> {
    if service.draining() {
        return Err(Refusal::new(
            503,
            "draining: the service takes no more requests",
        ));
    }
    Ok("ready")
}

/// The request's body, refused when larger than a source of `max_source` bytes could make it
/// (every byte escaped twice over, and room for the rest).
fn read_body(request: &mut Request, max_source: usize) -> Result<Vec<u8>, Refusal> {
    let limit = max_source.saturating_mul(6).saturating_add(64 * 1024);
    let mut body = Vec::new();
    request
        .as_reader()
        .take(limit as u64 + 1)
        .read_to_end(&mut body)
        .map_err(|e| Refusal::new(400, format!("read the request's body: {e}")))?;
    if body.len() > limit {
        return Err(Refusal::new(
            413,
            format!("a body over {limit} bytes (--max-source-bytes {max_source})"),
        ));
    }
    Ok(body)
}

/// Whether two tokens are equal, in time that does not depend on where they differ.
fn same(given: &str, token: &str) -> bool {
    given.len() == token.len()
        && given
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_match_only_when_equal() {
        for (given, token, equal) in [
            ("secret", "secret", true),
            ("secreT", "secret", false),
            ("secre", "secret", false),
            ("", "secret", false),
            ("secret!", "secret", false),
        ] {
            assert_eq!(same(given, token), equal, "{given}");
        }
    }
}
