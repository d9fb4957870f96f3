use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = llm_probe::cli::Cli::parse();
    // tokio's default runtime, with the park hook of `llm-probe run`'s wake-up coalescing
    // (it does nothing until `run` sets a wait).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(llm_probe::probe::coalesce::on_park)
        .build();
    match runtime {
        Ok(rt) => rt.block_on(llm_probe::app::run(cli)),
        Err(e) => {
            eprintln!("llm-probe: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}
