//! `kbench serve` end to end on the CPU: the service started on a free loopback port with a
//! token, the Python client (clients/python) sending honest, wrong, crashing and hanging
//! submissions at once, and one awaited; each reply's verdict and class, the refusals (no token,
//! unknown task, a task file outside the tree), the run record holding every result, and a clean
//! stop. Needs the project venv (tests/setup-python.sh) or KBENCH_PYTHON.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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
    "no_token": status(lambda: Client(url).health()),
    "unknown_task": status(lambda: client.evaluate("1/999", "x")),
    "outside": status(lambda: client.evaluate("../../../../etc/passwd.py", "x")),
    "bad_setting": status(lambda: client.evaluate("1/19", "x", trials=0)),
    "tasks": [t["id"] for t in client.tasks()],
}
client.shutdown()
print(json.dumps(out))
"#;

#[test]
fn the_client_gets_each_submission_its_verdict_and_the_record_keeps_them() {
    let out = tempfile::tempdir().unwrap();
    let fixtures = root().join("tests/fixtures/cpu/level1/19_ReLU");
    let mut service = Command::new(env!("CARGO_BIN_EXE_kbench"))
        .args(["serve", "--listen", "127.0.0.1:0", "--token", "t0ken"])
        .args(["--device", "cpu", "--scale", "small", "--trials", "2"])
        .args([
            "--max-samples",
            "8",
            "--timeout-call",
            "10",
            "--only",
            "1/19",
        ])
        .arg("--python")
        .arg(python())
        .arg("--out")
        .arg(out.path())
        .env("KBENCH_CACHE", root().join("target/kbench-test-cache"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start kbench serve");
    let mut first = String::new();
    BufReader::new(service.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let url = first.trim();
    assert!(
        url.starts_with("http://127.0.0.1:"),
        "first line: {first:?}"
    );

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
    let status = service.wait().expect("the service stops");
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
    for (refusal, code) in [
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
