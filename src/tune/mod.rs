//! Autotuning: kernel variants timed on the adapter the program runs on,
//! the winners cached per adapter so that later runs read them and never
//! time again (runs stay reproducible).
//!
//! Today one decision is tuned: the matmul kernel of a GPU device (tiled,
//! blocked or the lane kernel), timed on a few shapes of the sizes
//! training steps use (`matmul`). The parts are separate so that more
//! kinds can follow: the choice rule over timings (`choice`, pure and
//! tested with fake timings), the cache of winners (`cache`, keyed by
//! everything that could change a winner or make it invalid), and the
//! timing of one kind's candidates (`matmul`).

pub(crate) mod cache;
pub(crate) mod choice;
pub(crate) mod matmul;

use std::fmt;

/// One candidate's timing in a tuning run.
#[derive(Clone, Debug, PartialEq)]
pub struct CandidateTiming {
    /// The candidate's name (`tiled`, `blocked`, `lanes`).
    pub name: String,
    /// Its time relative to the built-in choice's (geometric mean over
    /// the tuning shapes; 1.0 for the built-in choice itself), or `None`
    /// where it failed to compile, run or validate.
    pub relative: Option<f64>,
    /// Why it was not a candidate, where it failed.
    pub failure: Option<String>,
}

/// The outcome of tuning one kind of kernel on a device's adapter (see
/// [`crate::AdapterReport::tuning`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Tuning {
    /// The kind of kernel tuned (`matmul`).
    pub kind: String,
    /// The candidate chosen.
    pub winner: String,
    /// The adapter's built-in choice, which a candidate must beat by more
    /// than the noise margin to win.
    pub builtin: String,
    /// Each candidate's timing (read back from the cache, where it was).
    pub timings: Vec<CandidateTiming>,
    /// Whether the winner was read from the cache (no timing this run).
    pub from_cache: bool,
    /// Seconds spent timing in this process (0 when read from the cache).
    pub seconds: f64,
}

impl fmt::Display for Tuning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} (built-in {}; {}):",
            self.kind,
            self.winner,
            self.builtin,
            if self.from_cache {
                "read from the tuning cache".to_string()
            } else {
                format!("timed in {:.2} s", self.seconds)
            }
        )?;
        for t in &self.timings {
            match (t.relative, &t.failure) {
                (Some(r), _) => write!(f, " {} {:.3}x", t.name, r)?,
                (None, Some(why)) => write!(f, " {} failed ({why})", t.name)?,
                (None, None) => write!(f, " {} not timed", t.name)?,
            }
        }
        Ok(())
    }
}
