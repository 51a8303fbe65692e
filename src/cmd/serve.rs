//! `kbench serve`: set up once what `eval` sets up per run (tasks, probe, `Config`, GPUs, task
//! facts, confinement, backend), listen, and answer evaluation requests until a signal or
//! `POST /v1/shutdown`; then finish the requests admitted and write each run's summary.
//! The first line on stdout is the service's URL (the port chosen, with port 0).

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::cli::ServeArgs;
use crate::config::{self, Config};
use crate::cpus;
use crate::error::{Error, Result};
use crate::exit::Exit;
use crate::probe::Probe;
use crate::sandbox;
use crate::serve::{self, Service};
use crate::worker;

use super::tasks;
use crate::setup;

pub fn run(args: &ServeArgs) -> Result<Exit> {
    sandbox::protect_self();
    refuse_eval_only(args)?;
    let token = args
        .token
        .clone()
        .or_else(|| std::env::var("KBENCH_TOKEN").ok())
        .filter(|t| !t.is_empty());
    check_listen(args.listen, token.as_deref())?;
    let run = &args.run;
    let (root, mut tasks) = tasks::load(&run.source)?;
    if !run.only.is_empty() {
        tasks.retain(|t| run.only.contains(&t.id));
    }
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
    let confinement = setup::confine(&config, &worker_path)?;
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
    };
    let service = Service::start(shared, args.queue as usize, args.max_source_bytes)?;
    let server = tiny_http::Server::http(args.listen)
        .map_err(|e| Error::Usage(format!("listen on {}: {e}", args.listen)))?;
    let bound = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| Error::Other("read the address the service listens on".into()))?;
    println!("http://{bound}");
    let _ = std::io::stdout().flush();
    eprintln!(
        "kbench serve {}: {} task(s) on {} ({} slot(s)), queue {}, results in {}{}",
        env!("CARGO_PKG_VERSION"),
        service.tasks().len(),
        service.config().device.torch_name(),
        service.config().slots(),
        args.queue,
        service.config().out.display(),
        if token.is_some() {
            ", token required"
        } else {
            ""
        }
    );
    let stop = Arc::new(AtomicBool::new(false));
    let on_signal = Arc::clone(&stop);
    ctrlc::set_handler(move || on_signal.store(true, Ordering::SeqCst))
        .map_err(|e| Error::Other(format!("handle termination signals: {e}")))?;
    serve::http::serve(&server, &service, token.as_deref(), &stop);
    eprintln!("kbench serve: stopping: finishing the requests admitted");
    service.stop()?;
    Ok(Exit::gate(true))
}

/// Flags of `eval` that have no meaning for a service.
fn refuse_eval_only(args: &ServeArgs) -> Result<()> {
    let run = &args.run;
    for (flag, given) in [
        ("a submission path", run.path != std::path::Path::new(".")),
        ("--task", run.task.is_some()),
        ("--published", run.published.is_some()),
        ("--shard", run.shard.is_some()),
        ("--min-speedup", run.min_speedup.is_some()),
        ("--lock-clocks", run.lock_clocks.is_some()),
    ] {
        if given {
            return Err(Error::Usage(format!(
                "serve with {flag}: it is eval's (requests bring the submissions; lock clocks around the service instead)"
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
