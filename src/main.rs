//! The `aocheck` binary: parse, run, exit with a documented code (see `aocheck::exit`).

use clap::Parser;

fn main() -> std::process::ExitCode {
    // The judged implementation runs as this user's processes: not dumpable, aocheck's memory,
    // environment and maps under /proc are closed to them (the ledgers and credentials it holds
    // stay the judge's; issue 37). A process the implementation execs is dumpable again.
    #[cfg(target_os = "linux")]
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    let cli = match aocheck::cli::Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() {
                aocheck::exit::INVALID_INPUT
            } else {
                aocheck::exit::OK
            };
            let _ = e.print();
            return std::process::ExitCode::from(code);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::from(aocheck::exit::UNREACHABLE);
        }
    };
    std::process::ExitCode::from(rt.block_on(aocheck::cli::run(cli)))
}
