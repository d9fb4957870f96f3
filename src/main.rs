use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    llm_probe::app::run(llm_probe::cli::Cli::parse()).await
}
