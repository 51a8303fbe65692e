//! `kbench serve` end to end on the CPU: the service started on a free loopback port with a
//! token, the Python client (clients/python) sending honest, wrong, crashing and hanging
//! submissions at once, and one awaited; each reply's verdict and class, the refusals (no token,
//! unknown task, a task file outside the tree), the run record holding every result, and a clean
//! stop. Then what no request may do: a build that never ends keeps no later request from its
//! verdict, and a request that hangs keeps neither `POST /v1/shutdown` nor SIGTERM from ending
//! the service, its record and summary written, with no worker left. Needs the project venv
//! (tests/setup-python.sh) or KBENCH_PYTHON.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{exit_within, left_behind, wait_for_marked, Started, MARK};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> String {
    std::env::var("KBENCH_PYTHON")
        .unwrap_or_else(|_| root().join(".venv/bin/python").display().to_string())
}

/// Sends the fixtures named on its command line through the client, at once, and one more
/// awaited, then the refusals; prints one JSON object of what came back.
const DRIVER: &str = r#"
import asyncio, json, sys
from pathlib import Path
from kbench_client import Client, ServiceError

url, token, fixtures = sys.argv[1], sys.argv[2], Path(sys.argv[3])
client = Client(url, token=token)
names = sys.argv[4:]
items = [("level1/19_ReLU", (fixtures / n).read_text()) for n in names]
results = client.evaluate_many(items, concurrency=len(items))
awaited = asyncio.run(client.aevaluate("1/19", (fixtures / "missing_modelnew.py").read_text(), trials=1))

def status(call):
    try:
        call()
    except ServiceError as e:
        return e.status
    return 200

out = {
    "results": {
        n: {"verdict": r.verdict, "class": r.verdict_class, "speedup": r.speedup,
            "file": r.file, "record": r.record}
        for n, r in zip(names, results)
    },
    "awaited": {"verdict": awaited.verdict, "record": awaited.record},
    "no_token": status(lambda: Client(url).tasks()),
    "health_no_token": Client(url).health(),
    "served": results[0].served,
    "again": (lambda r: {"replayed": r.replayed, "file": r.file, "verdict": r.verdict})(
        client.evaluate("level1/19_ReLU", items[0][1], id=results[0].id)),
    "reused_id": status(lambda: client.evaluate("1/19", "other source", id=results[0].id)),
    "unknown_task": status(lambda: client.evaluate("1/999", "x")),
    "outside": status(lambda: client.evaluate("../../../../etc/passwd.py", "x")),
    "bad_setting": status(lambda: client.evaluate("1/19", "x", trials=0)),
    "tasks": [t["id"] for t in client.tasks()],
}
client.shutdown()
print(json.dumps(out))
"#;

/// The build cache the tests share (builds persist across runs in the target folder).
fn cache() -> PathBuf {
    root().join("target/kbench-test-cache")
}

/// `kbench serve` of task 1/19 on the CPU into `out`, with `extra` flags; every process it
/// starts carries `mark` in its environment (`common::marked`). The service (killed when
/// dropped) and its URL.
fn start_service(out: &Path, extra: &[&str], mark: &str) -> (Started, String) {
    let mut service = Command::new(env!("CARGO_BIN_EXE_kbench"))
        .args(["serve", "--listen", "127.0.0.1:0", "--token", "t0ken"])
        .args(["--device", "cpu", "--scale", "small", "--trials", "2"])
        .args(["--max-samples", "8", "--only", "1/19"])
        .args(extra)
        .arg("--python")
        .arg(python())
        .arg("--out")
        .arg(out)
        .env("KBENCH_CACHE", cache())
        .env(MARK, mark)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start kbench serve");
    let mut first = String::new();
    BufReader::new(service.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let url = first.trim().to_string();
    assert!(
        url.starts_with("http://127.0.0.1:"),
        "first line: {first:?}"
    );
    (Started(service), url)
}

#[test]
fn the_client_gets_each_submission_its_verdict_and_the_record_keeps_them() {
    let out = tempfile::tempdir().unwrap();
    let fixtures = root().join("tests/fixtures/cpu/level1/19_ReLU");
    let mark = out.path().display().to_string();
    let (mut service, url) = start_service(out.path(), &["--timeout-call", "10"], &mark);
    let url = url.as_str();

    // (fixture, verdict, class)
    let expected = [
        ("honest_torch.py", "no_kernel", "correct"),
        ("wrong_output.py", "incorrect", "failed"),
        ("cheat_exit_early.py", "crashed", "failed"),
        ("host_infinite_loop.py", "timeout", "failed"),
    ];
    let driver = Command::new(python())
        .args(["-c", DRIVER, url, "t0ken"])
        .arg(&fixtures)
        .args(expected.iter().map(|(name, _, _)| name))
        .env("PYTHONPATH", root().join("clients/python/src"))
        .output()
        .expect("run the client");
    let status = service.0.wait().expect("the service stops");
    assert!(
        driver.status.success(),
        "client: {}",
        String::from_utf8_lossy(&driver.stderr)
    );
    assert!(status.success(), "the service stopped with {status}");
    let got: serde_json::Value = serde_json::from_slice(&driver.stdout).unwrap();

    let results = out.path().join("results.json");
    for (name, verdict, class) in expected {
        let r = &got["results"][name];
        assert_eq!(r["verdict"], verdict, "{name}: {r}");
        assert_eq!(r["class"], class, "{name}: {r}");
        assert_eq!(r["record"], results.display().to_string(), "{name}");
        assert_eq!(
            r["speedup"].is_number(),
            verdict == "no_kernel",
            "{name}: {r}"
        );
    }
    assert_eq!(got["awaited"]["verdict"], "runtime_error");
    // Its own settings (one trial) make a run of their own, with its own record.
    let awaited_record = got["awaited"]["record"].as_str().unwrap();
    assert!(
        awaited_record.contains("variants/trials1-budget10-offline-kbench"),
        "{awaited_record}"
    );
    // The same request id again: its one result, replayed; the id for another source: refused.
    let first = &got["results"][expected[0].0];
    assert_eq!(got["again"]["replayed"], true, "{}", got["again"]);
    assert_eq!(got["again"]["file"], first["file"]);
    assert_eq!(got["again"]["verdict"], first["verdict"]);
    assert!(got["served"]["id"].is_string(), "{}", got["served"]);
    assert!(got["served"]["node"]
        .as_str()
        .is_some_and(|n| !n.is_empty()));
    assert_eq!(got["served"]["gpu"], serde_json::Value::Null);
    // Without the token, the health says readiness only (a probe's view).
    assert_eq!(
        got["health_no_token"],
        serde_json::json!({"status": "ready"})
    );
    for (refusal, code) in [
        ("reused_id", 409),
        ("no_token", 401),
        ("unknown_task", 404),
        ("outside", 404),
        ("bad_setting", 400),
    ] {
        assert_eq!(got[refusal], code, "{refusal}");
    }
    assert_eq!(got["tasks"], serde_json::json!(["1/19"]));

    // The record holds every result, each file in the mirrored layout beside it, and the stop
    // wrote the summary.
    let verdicts = record_verdicts(&results);
    for (name, verdict, _) in expected {
        let file = got["results"][name]["file"].as_str().unwrap();
        assert_eq!(
            verdicts.get(file).map(String::as_str),
            Some(verdict),
            "{file}"
        );
        let copy = out.path().join("submissions").join(file);
        assert_eq!(
            std::fs::read_to_string(copy).unwrap(),
            std::fs::read_to_string(fixtures.join(name)).unwrap()
        );
    }
    assert_eq!(verdicts.len(), expected.len());
    assert_eq!(record_verdicts(Path::new(awaited_record)).len(), 1);
    // Confined, a task's reference worker serves its next queued request (as in eval): the
    // evaluations' reference logs are then one file.
    let rows = record_rows(&results);
    if rows.values().all(|r| {
        r["sandbox"]
            .as_str()
            .is_some_and(|s| s.starts_with("namespaces"))
    }) {
        use std::os::unix::fs::MetadataExt;
        let inodes: std::collections::BTreeSet<u64> = rows
            .values()
            .flat_map(|r| r["logs"].as_array().unwrap().clone())
            .filter_map(|log| log.as_str().map(str::to_string))
            .filter(|log| log.ends_with(".reference.log"))
            .map(|log| std::fs::metadata(out.path().join(log)).unwrap().ino())
            .collect();
        assert!(
            inodes.len() < rows.len(),
            "no reference worker was reused: {inodes:?}"
        );
    }
    assert!(out.path().join("summary.json").exists());
}

/// Verdict by file of a results.json.
fn record_verdicts(results: &Path) -> std::collections::BTreeMap<String, String> {
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(results).unwrap()).unwrap();
    record["evaluations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["file"].as_str().unwrap().to_string(),
                e["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Sends each file named on its command line as a candidate of 1/19, the n-th after n times
/// DELAY seconds, all at once; prints each reply (status, and verdict or message) in order.
const SEND: &str = r#"
import json, sys, threading, time
from kbench_client import Client, ServiceError

url, token, delay, files = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:]
client = Client(url, token=token, retry_for=0)
replies = [None] * len(files)

def send(n, path):
    time.sleep(delay * n)
    try:
        r = client.evaluate("1/19", open(path).read())
        replies[n] = {"status": 200, "verdict": r.verdict, "reason": r.reason, "file": r.file}
    except ServiceError as e:
        replies[n] = {"status": e.status, "message": e.message}

threads = [threading.Thread(target=send, args=(n, f)) for n, f in enumerate(files)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(replies))
"#;

/// The client asks the service to stop.
const SHUT_DOWN: &str = r#"
import sys
from kbench_client import Client

Client(sys.argv[1], token="t0ken").shutdown()
"#;

/// A python running `script` with the client importable, and `args`.
fn client(script: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(python());
    cmd.args(["-c", script])
        .args(args)
        .env("PYTHONPATH", root().join("clients/python/src"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// `cmd`'s output once it has ended, within `within` (a hang guard: killed past it).
fn output_within(mut cmd: Command, within: Duration) -> Output {
    let mut child = cmd.spawn().expect("start the client");
    let status = exit_within(&mut child, within);
    let output = child.wait_with_output().unwrap();
    assert!(status.is_some(), "the client still waited after {within:?}");
    output
}

/// The replies `SEND` printed.
fn replies(output: &Output) -> Vec<serde_json::Value> {
    assert!(
        output.status.success(),
        "client: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Every evaluation of a results.json, by file.
fn record_rows(results: &Path) -> std::collections::BTreeMap<String, serde_json::Value> {
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(results).unwrap()).unwrap();
    record["evaluations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["file"].as_str().unwrap().to_string(), e.clone()))
        .collect()
}

/// A submission whose import makes its build folder's record file a FIFO (the compile pool
/// imports it: it names `load_inline`): a read or write of that file by kbench never ends.
/// `nonce` makes its source, so its build folder, new to the shared cache.
fn fifo_submission(nonce: &str) -> String {
    format!(
        r#"# load_inline
import os

NONCE = "{nonce}"
try:
    os.mkfifo(os.path.join(os.path.dirname(os.environ["TORCH_EXTENSIONS_DIR"]), "build.json"))
except OSError:
    pass

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"#
    )
}

/// Remove the FIFOs the submissions planted in their build folders in the shared cache (kbench
/// opens none of them; the cache of later tests keeps regular files only).
fn remove_fifos() {
    use std::os::unix::fs::FileTypeExt;
    let builds = cache().join("builds");
    for dir in std::fs::read_dir(builds).into_iter().flatten().flatten() {
        let record = dir.path().join("build.json");
        if std::fs::symlink_metadata(&record).is_ok_and(|m| m.file_type().is_fifo()) {
            let _ = std::fs::remove_file(record);
        }
    }
}

/// Red team: a build that never ends (kbench's own wait on a FIFO the submission planted) holds
/// one build thread of one, yet the honest request sent after it is answered and recorded, the
/// stuck one ends as a timeout of its build stage (or gets its verdict, where nothing blocks on
/// the FIFO any more), and the service still stops cleanly.
#[test]
fn a_build_that_never_ends_keeps_no_later_request_from_its_verdict() {
    let out = tempfile::tempdir().unwrap();
    let mark = out.path().display().to_string();
    let fifo = out.path().join("fifo.py");
    let nonce = format!("{}-{:?}", std::process::id(), Instant::now());
    std::fs::write(&fifo, fifo_submission(&nonce)).unwrap();
    let honest = root().join("tests/fixtures/cpu/level1/19_ReLU/honest_torch.py");
    // One build thread; a build's deadline is twice the compile timeout and 30 s.
    let flags = ["--jobs", "1", "--timeout-compile", "10"];
    let (mut service, url) = start_service(out.path(), &flags, &mark);
    let sent = output_within(
        client(
            SEND,
            &[
                &url,
                "t0ken",
                "3",
                &fifo.display().to_string(),
                &honest.display().to_string(),
            ],
        ),
        Duration::from_secs(240),
    );
    let stopped = output_within(client(SHUT_DOWN, &[&url]), Duration::from_secs(60));
    let status = exit_within(&mut service.0, Duration::from_secs(60));
    remove_fifos();
    let replies = replies(&sent);
    let (stuck, after) = (&replies[0], &replies[1]);
    assert_eq!(after["status"], 200, "{after}");
    assert_eq!(after["verdict"], "no_kernel", "{after}");
    assert_eq!(stuck["status"], 200, "{stuck}");
    let reason = stuck["reason"].as_str().unwrap_or_default();
    match stuck["verdict"].as_str() {
        // The stage's deadline, or the compile worker's own (an import slower than
        // --timeout-compile on a loaded machine).
        Some("timeout") => assert!(
            reason.starts_with("build: no result within 50 s")
                || reason.starts_with("build: no reply within 10 s"),
            "{reason}"
        ),
        other => assert_eq!(other, Some("no_kernel"), "{stuck}"),
    }
    let rows = record_rows(&out.path().join("results.json"));
    for reply in [stuck, after] {
        let file = reply["file"].as_str().unwrap();
        assert_eq!(rows[file]["verdict"], reply["verdict"], "{file}");
    }
    assert!(stopped.status.success());
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    assert!(out.path().join("summary.json").exists());
    assert_eq!(left_behind(&mark, Duration::from_secs(10)), Vec::new());
}

/// Red team: with a request evaluating a forward that does not return for ten minutes (and a
/// process it started), `POST /v1/shutdown` and SIGTERM (unconfined, where only kbench's kill
/// of the worker's group ends that process) each end the service well within a minute: exit
/// 0, the request's client told it did not finish (503), the record holding it as skipped, the
/// summary written, and no process of the service left.
#[test]
fn a_request_that_hangs_keeps_neither_shutdown_nor_sigterm_from_ending_the_service() {
    for (how, sandbox) in [("shutdown", "auto"), ("SIGTERM", "off")] {
        let out = tempfile::tempdir().unwrap();
        let mark = out.path().display().to_string();
        let hang = out.path().join("hang.py");
        std::fs::write(&hang, common::HANG_WITH_CHILD).unwrap();
        let flags = ["--timeout-call", "600", "--sandbox", sandbox];
        let (mut service, url) = start_service(out.path(), &flags, &mark);
        let sending = client(SEND, &[&url, "t0ken", "0", &hang.display().to_string()])
            .spawn()
            .expect("start the client");
        wait_for_marked(&mark, "sleep 600", Duration::from_secs(180));
        let asked = Instant::now();
        if how == "shutdown" {
            output_within(client(SHUT_DOWN, &[&url]), Duration::from_secs(60));
        } else {
            let pid = service.0.id().to_string();
            assert!(Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success());
        }
        let status = exit_within(&mut service.0, Duration::from_secs(90));
        let took = asked.elapsed();
        let mut sending = sending;
        let sent_status = exit_within(&mut sending, Duration::from_secs(30));
        let sent = sending.wait_with_output().unwrap();
        let left = left_behind(&mark, Duration::from_secs(10));
        assert!(
            status.is_some_and(|s| s.success()),
            "{how}: {status:?} after {took:?}"
        );
        assert!(
            sent_status.is_some(),
            "{how}: the client was never answered"
        );
        let reply = &replies(&sent)[0];
        assert_eq!(reply["status"], 503, "{how}: {reply}");
        let message = reply["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("not finished: the service stopped while it was being evaluated"),
            "{how}: {message}"
        );
        let rows = record_rows(&out.path().join("results.json"));
        assert_eq!(rows.len(), 1, "{how}");
        let row = rows.values().next().unwrap();
        assert_eq!(row["verdict"], "skipped", "{how}");
        assert!(out.path().join("summary.json").exists(), "{how}");
        assert_eq!(left, Vec::new(), "{how}: outlived the service");
    }
}
