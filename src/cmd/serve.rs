//! `kbench serve`: set up once what `eval` sets up per run (tasks, probe, `Config`, GPUs, task
//! facts, confinement, backend), listen, and answer evaluation requests until a signal or
//! `POST /v1/shutdown`; then drain: refuse new requests (503), give those admitted a grace
//! period, record those left as not finished, write each run's summary and end every worker
//! (`shut_down`). A second signal ends it at once (`signals`). The first line on stdout is the
//! service's URL (the port chosen, with port 0); `--announce` writes it (with the host clients
//! reach) to a file until the drain, for clients of several instances (`--instance`).

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::cli::ServeArgs;
use crate::config::{self, Config};
use crate::cpus;
use crate::error::{Error, Result};
use crate::exit::Exit;
use crate::host_memory;
use crate::probe::Probe;
use crate::sandbox;
use crate::scale;
use crate::serve::{self, Service};
use crate::signals;
use crate::worker;

use super::tasks;
use crate::setup;

/// How long a stopping service waits for its replies to leave (a client may read slowly).
const REPLY_WAIT: Duration = Duration::from_secs(5);

/// The token requests must carry: `--token`, else `KBENCH_TOKEN`; none when empty.
fn token(args: &ServeArgs) -> Option<String> {
    args.token
        .clone()
        .or_else(|| std::env::var("KBENCH_TOKEN").ok())
        .filter(|t| !t.is_empty())
}

/// The service's line on stderr once it listens.
fn announce(service: &Service, queue: u32, token: bool) {
    eprintln!(
        "kbench serve {}: {} task(s) on {} ({} slot(s)), queue {queue}, results in {}{}",
        env!("CARGO_PKG_VERSION"),
        service.tasks().len(),
        service.config().device.torch_name(),
        service.config().slots(),
        service.config().out.display(),
        if token { ", token required" } else { "" }
    );
}

pub fn run(args: &ServeArgs) -> Result<Exit> {
    sandbox::protect_self();
    refuse_eval_only(args)?;
    let token = token(args);
    check_listen(args.listen, token.as_deref())?;
    // Before any worker starts: a signal during the set-up stops the service as it opens.
    let stop = Arc::new(AtomicBool::new(false));
    signals::stop_on_signal(
        Arc::clone(&stop),
        "requests in flight were not recorded".into(),
    )
    .map_err(Error::Other)?;
    let shared = set_up(args)?;
    let service = Service::start(shared, args.queue as usize, args.max_source_bytes)?;
    let server = tiny_http::Server::http(args.listen)
        .map_err(|e| Error::Usage(format!("listen on {}: {e}", args.listen)))?;
    let bound = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| Error::Other("read the address the service listens on".into()))?;
    println!("http://{bound}");
    let _ = std::io::stdout().flush();
    let announced = args
        .announce
        .as_ref()
        .map(|file| {
            announce_at(
                file,
                &url(bound, args.advertise.as_deref(), service.place()),
            )
        })
        .transpose()?;
    announce(&service, args.queue, token.is_some());
    let service = Arc::new(service);
    let answering = Arc::new(serve::http::Answering::default());
    let closed = AtomicBool::new(false);
    // Requests are answered until the end, while draining too: a 503 that says so, not a
    // connection left hanging.
    std::thread::scope(|scope| {
        scope.spawn(|| {
            serve::http::serve(
                &server,
                &service,
                token.as_deref(),
                &stop,
                &closed,
                &answering,
            )
        });
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(100));
        }
        if let Some(file) = &announced {
            let _ = std::fs::remove_file(file);
        }
        let stopped = shut_down(&service, &answering);
        closed.store(true, Ordering::SeqCst);
        stopped
    })?;
    Ok(Exit::gate(true))
}

/// Everything the service's backends share, set up as `eval` sets up a run: the tasks, the
/// probe, the resolved config, the task facts, the confinement and the instance's place.
fn set_up(args: &ServeArgs) -> Result<serve::Shared> {
    let run = &args.run;
    if args.instance.is_some() && run.seed.is_none() && run.seed_file.is_none() {
        return Err(Error::Usage(
            "serve --instance: the instances of one run share a seed (--seed-file FILE, the \
             same for each), or their records do not merge"
                .into(),
        ));
    }
    let (root, mut tasks) = tasks::load(&run.source)?;
    if !run.only.is_empty() {
        tasks.retain(|t| run.only.contains(&t.id));
    }
    scale::check(run.scale.as_deref(), &tasks)?;
    let python = config::python(run.python.python.as_deref());
    let cache = config::cache_dir();
    let worker_path = worker::python::worker_path(&cache)?;
    let probe = Probe::run(&python, &worker_path, &cache.join("probe"))?;
    let config = Config::resolve(run, root.clone(), python.clone(), &probe)?;
    // Before any thread or process that should keep off the timing CPUs starts.
    let timing_cpus = cpus::reserve(config.slots());
    if config.device == config::Device::Cuda {
        setup::check_dedicated(&config)?;
    }
    let ceilings = setup::speed_of_light(&config, &worker_path, &probe);
    let facts = setup::task_facts(&config, &worker_path, &cache, tasks.clone())?;
    if let Some(warning) = host_memory::warning(&config, &tasks, &facts, host_memory::available()) {
        eprintln!("kbench serve: warning: {warning}");
    }
    let confinement = setup::confine(&config, &worker_path)?;
    let place = serve::Place::new(args.instance.as_deref(), &config.out)?;
    let shared = serve::Shared {
        // Every run of the service under the same folder, whatever the clock says later.
        args: crate::cli::EvalArgs {
            out: Some(config.out.clone()),
            ..run.clone()
        },
        root,
        tasks,
        python,
        worker_path,
        probe,
        // Kept for the life of the process, as the backends that read it.
        facts: Box::leak(Box::new(facts)),
        confinement,
        timing_cpus,
        ceilings,
        place,
    };
    Ok(shared)
}

/// The service's URL for clients on other hosts: `--advertise`'s host, else the node's name in
/// place of an unspecified address (`0.0.0.0`, `::`).
fn url(bound: SocketAddr, advertise: Option<&str>, place: &serve::Place) -> String {
    match advertise {
        Some(host) if host.contains(':') => format!("http://[{host}]:{}", bound.port()),
        Some(host) => format!("http://{host}:{}", bound.port()),
        None if bound.ip().is_unspecified() => format!("http://{}:{}", place.node, bound.port()),
        None => format!("http://{bound}"),
    }
}

/// Write `url` to `file` (`--announce`), whole; the file written.
fn announce_at(file: &std::path::Path, url: &str) -> Result<std::path::PathBuf> {
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::write(dir, e))?;
    }
    crate::atomic_file::write(file, format!("{url}\n").as_bytes())?;
    Ok(file.to_path_buf())
}

/// Stop: the requests admitted get `serve::GRACE` to finish, those left are recorded as not
/// finished, their replies get `REPLY_WAIT` to leave, then each run's summary is written and
/// every worker still alive is killed (a stage given up on may hold some).
fn shut_down(service: &Service, answering: &serve::http::Answering) -> Result<()> {
    eprintln!(
        "kbench serve: draining: the requests admitted get {} s to finish, new ones a 503",
        serve::GRACE.as_secs()
    );
    let left = service.close();
    if left > 0 {
        eprintln!("kbench serve: {left} request(s) not finished: recorded as skipped");
    }
    let unanswered = answering.wait(REPLY_WAIT);
    if unanswered > 0 {
        eprintln!("kbench serve: {unanswered} client(s) not answered: their connections close");
    }
    let stopped = service.stop();
    worker::live::end_all();
    stopped
}

/// eval's flags (`cli::EVAL_ONLY`, hidden from `serve --help`): requests bring the
/// submissions, and no gate judges the service's run.
fn refuse_eval_only(args: &ServeArgs) -> Result<()> {
    let run = &args.run;
    let gate = &run.gate;
    for (flag, given) in [
        ("a submission path", run.path != std::path::Path::new(".")),
        ("--task", run.task.is_some()),
        ("--published", run.published.is_some()),
        ("--shard", run.shard.is_some()),
        ("--lock-clocks", run.lock_clocks.is_some()),
        ("--min-speedup", gate.min_speedup.is_some()),
        ("--require-kernel", gate.require_kernel),
        ("--allow-empty", gate.allow_empty),
        ("--allow-unmatched", gate.allow_unmatched),
    ] {
        if given {
            return Err(Error::Usage(format!(
                "serve with {flag}: it is eval's (requests bring the submissions, each reply's \
                 class says how the gate treats it; lock clocks around the service instead)"
            )));
        }
    }
    Ok(())
}

/// Loopback unless told otherwise, and then only with a token.
fn check_listen(listen: SocketAddr, token: Option<&str>) -> Result<()> {
    if !listen.ip().is_loopback() && token.is_none() {
        return Err(Error::Usage(format!(
            "listen on {listen}: off loopback the service needs a token (--token or KBENCH_TOKEN)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_hidden_from_serve_s_help_is_refused() {
        use clap::Parser;
        for (id, given) in [
            ("path", vec!["submissions"]),
            ("task", vec!["--task", "1/19"]),
            ("published", vec!["--published", "published.csv"]),
            ("shard", vec!["--shard", "0/2"]),
            ("lock_clocks", vec!["--lock-clocks", "base", "--dedicated"]),
            ("min_speedup", vec!["--min-speedup", "1.5"]),
            ("require_kernel", vec!["--require-kernel"]),
            ("allow_empty", vec!["--allow-empty"]),
            ("allow_unmatched", vec!["--allow-unmatched"]),
        ] {
            assert!(crate::cli::EVAL_ONLY.contains(&id), "{id}");
            let cli = crate::cli::Cli::try_parse_from(
                ["kbench", "serve"].into_iter().chain(given.iter().copied()),
            )
            .unwrap();
            let crate::cli::Command::Serve(args) = cli.command else {
                panic!("serve")
            };
            assert!(refuse_eval_only(&args).is_err(), "{id}");
        }
        assert_eq!(crate::cli::EVAL_ONLY.len(), 9);
    }

    #[test]
    fn the_announced_url_is_one_other_hosts_reach() {
        let place = serve::Place {
            instance: None,
            node: "node7".into(),
            siblings: None,
        };
        for (bound, advertise, expected) in [
            ("127.0.0.1:8470", None, "http://127.0.0.1:8470"),
            ("0.0.0.0:8470", None, "http://node7:8470"),
            ("[::]:8470", None, "http://node7:8470"),
            ("0.0.0.0:8470", Some("10.1.2.3"), "http://10.1.2.3:8470"),
            ("0.0.0.0:8470", Some("fd00::5"), "http://[fd00::5]:8470"),
        ] {
            let bound: SocketAddr = bound.parse().unwrap();
            assert_eq!(url(bound, advertise, &place), expected, "{bound}");
        }
    }

    #[test]
    fn off_loopback_needs_a_token() {
        for (listen, token, ok) in [
            ("127.0.0.1:0", None, true),
            ("[::1]:8470", None, true),
            ("0.0.0.0:8470", None, false),
            ("0.0.0.0:8470", Some("t"), true),
            ("10.0.0.5:8470", None, false),
        ] {
            let listen: SocketAddr = listen.parse().unwrap();
            assert_eq!(check_listen(listen, token).is_ok(), ok, "{listen}");
        }
    }
}
