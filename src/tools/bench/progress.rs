//! Progress of a sweep on stderr: an `indicatif` bar on a terminal, plain lines otherwise.

use std::io::IsTerminal;
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Progress output, cheap to clone (shared by every request task of a level).
#[derive(Clone, Default)]
pub struct Progress {
    bar: Option<Arc<ProgressBar>>,
    quiet: bool,
}

impl Progress {
    /// A bar when stderr is a terminal, plain lines otherwise; nothing at all when `quiet`.
    pub fn new(quiet: bool) -> Self {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template(
                    "{prefix:>22} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            Arc::new(b)
        });
        Progress { bar, quiet }
    }

    /// A line on stderr (above the bar, if any).
    pub fn line(&self, text: &str) {
        match &self.bar {
            Some(b) => b.println(text),
            None if !self.quiet => crate::logging::stderr_line(text),
            None => {}
        }
    }

    /// A level starts; `total` is its request count when known.
    pub fn level_start(&self, label: &str, total: Option<u64>) {
        match &self.bar {
            Some(b) => {
                b.reset();
                b.set_length(total.unwrap_or(0));
                b.set_prefix(label.to_string());
                b.set_message("");
            }
            None => self.line(&format!("{label}: started")),
        }
    }

    /// One request ended.
    pub fn request_done(&self, ok: bool) {
        if let Some(b) = &self.bar {
            if b.length().is_none_or(|l| l <= b.position()) {
                b.inc_length(1);
            }
            b.inc(1);
            if !ok {
                b.set_message("(failures)");
            }
        }
    }

    /// The sweep ended: removes the bar.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
