//! Autotuning: kernel variants timed on the adapter the program runs on,
//! the winners cached per adapter so that later runs read them and never
//! time again (runs stay reproducible).
//!
//! Two decisions are tuned: the matmul kernel of a GPU device (tiled,
//! blocked or the lane kernel), timed on a few shapes of the sizes
//! training steps use (`matmul`), and the rule by which a reduction's
//! sizes pick its kernel (`reduce`: from how many elements a workgroup
//! tree, whether sums read by fours), timed on reductions from rows of
//! 32 elements to a whole tensor. The parts are separate so that more
//! kinds can follow: the choice rule over timings (`choice`, pure and
//! tested with fake timings), the cache of winners (`cache`, keyed by
//! everything that could change a winner or make it invalid), the
//! driver every kind shares (`tuned`: memo, cache, timing, record), and
//! the timing of one kind's candidates (`matmul`, `reduce`).

pub(crate) mod cache;
pub(crate) mod choice;
pub(crate) mod classes;
pub(crate) mod matmul;
pub(crate) mod pinned;
pub(crate) mod reduce;

use std::collections::HashMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::Device;
use crate::config::{Autotune, DeviceConfig};
use crate::kernel::Target;
use crate::runtime::gpu::GpuContext;
use cache::{Record, TuneKey};

/// One candidate's median time on each tuning workload (`None` where it
/// failed) and the first failure's description.
pub(crate) struct Measured {
    pub times: Vec<Option<f64>>,
    pub failure: Option<String>,
}

/// A candidate's work on one workload, set up and its values checked,
/// ready to run once (its device waited for) each time it is called.
pub(crate) type Trial<'a> = Box<dyn FnMut() -> crate::Result<()> + 'a>;

/// Times each of `candidates` on each of `workloads` (`trial(c, w)` sets
/// one up and checks its values, `Err` naming what failed) `runs` times,
/// interleaved: per workload, each round runs every candidate once, so a
/// machine whose speed drifts over seconds (lavapipe on a 2-core VM ran
/// one kernel 1.5x slower a few seconds later) slows every candidate
/// alike, where timing the candidates one after another would credit the
/// drift to whichever ran in the fast stretch; each round starts with
/// the next candidate. A panic is a failure.
pub(crate) fn interleaved<'a>(
    (candidates, workloads, runs): (usize, usize, usize),
    trial: &mut dyn FnMut(usize, usize) -> Result<Trial<'a>, String>,
) -> Vec<Measured> {
    let mut measured: Vec<Measured> = (0..candidates)
        .map(|_| Measured {
            times: Vec::with_capacity(workloads),
            failure: None,
        })
        .collect();
    for w in 0..workloads {
        let mut trials: Vec<Option<Trial<'a>>> = (0..candidates)
            .map(|c| {
                let set_up = catch_unwind(AssertUnwindSafe(|| trial(c, w)))
                    .unwrap_or_else(|_| Err(format!("workload {w}: panicked")));
                set_up
                    .map_err(|why| measured[c].failure.get_or_insert(why).clone())
                    .ok()
            })
            .collect();
        let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(runs); candidates];
        for round in 0..runs {
            // Each round starts one candidate further on: none always
            // runs first (after another kernel, or after the set-up).
            for i in 0..candidates {
                let c = (round + i) % candidates;
                let slot = &mut trials[c];
                let Some(run) = slot else { continue };
                let start = Instant::now();
                let outcome = catch_unwind(AssertUnwindSafe(run))
                    .map_err(|_| format!("workload {w}: panicked"))
                    .and_then(|r| r.map_err(|e| format!("workload {w}: {e}")));
                match outcome {
                    Ok(()) => times[c].push(start.elapsed().as_secs_f64()),
                    Err(why) => {
                        measured[c].failure.get_or_insert(why);
                        *slot = None;
                    }
                }
            }
        }
        for (c, mut t) in times.into_iter().enumerate() {
            t.sort_by(f64::total_cmp);
            let ok = trials[c].is_some() && !t.is_empty();
            measured[c].times.push(ok.then(|| t[t.len() / 2]));
        }
    }
    measured
}

/// The tuning mode for `config` on `ctx`'s adapter: the config's, else
/// `fast` on GPUs and `off` on CPU adapters (lavapipe's built-in choices
/// were measured by hand, PERFORMANCE.md, and the test suite runs there).
pub(crate) fn mode(ctx: &GpuContext, config: &DeviceConfig) -> Autotune {
    config
        .autotune
        .unwrap_or(if ctx.info.device_type == wgpu::DeviceType::Cpu {
            Autotune::Off
        } else {
            Autotune::Fast
        })
}

/// Timed runs of each candidate on each workload after its checked run.
fn runs(mode: Autotune) -> usize {
    if mode == Autotune::Full { 7 } else { 3 }
}

/// A deterministic operand in [-1, 1) (no RNG of the device: the checks
/// recompute it on the host).
pub(crate) fn operand(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Tunes `kind` on `ctx`'s adapter: each of `candidates` (a name and the
/// target it generates for, the built-in first) set up by `trial` on each
/// of `workloads` and timed (`interleaved`), read from or written to the
/// cache under a key of the adapter's facts, the names, the workloads and
/// the runs (`tuned`). Every trial gets a fresh device: a device keeps a
/// trace site's first strategies at its later sizes (lane tiles, a
/// reduction's kernel), so one device per candidate would time the first
/// workload's choices on every workload.
pub(crate) fn tune_targets<W: Copy + fmt::Debug>(
    ctx: &Arc<GpuContext>,
    kind_mode: (&str, Autotune),
    candidates: &[(String, Target)],
    workloads: &[W],
    trial: fn(Device, W) -> Result<Trial<'static>, String>,
) -> Tuning {
    tune_targets_if(ctx, kind_mode, candidates, workloads, trial, &|| true)
        .unwrap_or_else(|| unreachable!("timing was allowed"))
}

/// `tune_targets`, timing only where `may_time()` says so when neither
/// this process nor the cache directory has the tuning (`None` then).
/// The trials run outside any autocast scope of the calling thread (a
/// graph compiled inside `autocast` would otherwise time f16 products
/// for an f32 class).
pub(crate) fn tune_targets_if<W: Copy + fmt::Debug>(
    ctx: &Arc<GpuContext>,
    (kind, mode): (&str, Autotune),
    candidates: &[(String, Target)],
    workloads: &[W],
    trial: fn(Device, W) -> Result<Trial<'static>, String>,
    may_time: &dyn Fn() -> bool,
) -> Option<Tuning> {
    let names: Vec<&str> = candidates.iter().map(|(n, _)| n.as_str()).collect();
    let runs = runs(mode);
    let text = format!("{workloads:?} x{runs}");
    let key = TuneKey::new(kind, &cache::adapter_facts(ctx), &names, &text);
    let off = DeviceConfig {
        autotune: Some(Autotune::Off),
        ..DeviceConfig::default()
    };
    let mut measure = || {
        let _plain = crate::amp::AutocastGuard::new(None);
        interleaved((candidates.len(), workloads.len(), runs), &mut |c, w| {
            let dev = Device::on_target(ctx.clone(), candidates[c].1.clone(), off.clone());
            trial(dev, workloads[w])
        })
    };
    tuned(&key, &names, (&mut measure, may_time))
}

/// This process's tunings by key (see `tuned`).
static TUNED: Mutex<Option<HashMap<String, Tuning>>> = Mutex::new(None);

/// The tuning for `key` over the candidates `names` (the built-in first):
/// this process's earlier one; else read from the cache directory; else,
/// where `may_measure()`, every candidate measured now (`measure`, in
/// `names`' order), the winner chosen (`choice::winner`) and written to
/// the cache directory (`None` where it may not). One tuning per key and
/// process, whatever the cache directory: two devices made at once wait
/// for one timing instead of timing against each other (and without a
/// writable cache, later devices reuse it).
pub(crate) fn tuned(
    key: &TuneKey,
    names: &[&str],
    (measure, may_measure): (&mut dyn FnMut() -> Vec<Measured>, &dyn Fn() -> bool),
) -> Option<Tuning> {
    let mut memo = TUNED.lock().unwrap_or_else(|e| e.into_inner());
    let memo = memo.get_or_insert_with(HashMap::new);
    if let Some(done) = memo.get(key.described()) {
        return Some(Tuning {
            from_cache: true,
            seconds: 0.0,
            ..done.clone()
        });
    }
    let tuning = match read(key, names) {
        Some(read) => read,
        None if may_measure() => measure_now(key, names, measure),
        None => return None,
    };
    memo.insert(key.described().to_string(), tuning.clone());
    Some(tuning)
}

/// The cache directory's record for `key`, where it has one.
fn read(key: &TuneKey, names: &[&str]) -> Option<Tuning> {
    let dir = crate::runtime::gpu::disk_cache::cache_dir()?;
    let record = cache::read(&dir, key, names)?;
    Some(Tuning {
        kind: key.kind().to_string(),
        class: None,
        winner: record.winner,
        builtin: names[0].to_string(),
        timings: record.timings,
        from_cache: true,
        seconds: 0.0,
    })
}

/// Every candidate measured now, the winner chosen and written to the
/// cache directory (where there is one).
fn measure_now(
    key: &TuneKey,
    names: &[&str],
    measure: &mut dyn FnMut() -> Vec<Measured>,
) -> Tuning {
    let kind = key.kind().to_string();
    let builtin = names[0].to_string();
    let dir = crate::runtime::gpu::disk_cache::cache_dir();
    let start = Instant::now();
    let (timings, failures): (choice::Timings, Vec<Option<String>>) =
        measure().into_iter().map(|m| (m.times, m.failure)).unzip();
    let relative = choice::relative_times(&timings);
    let record = Record {
        winner: names[choice::winner(&relative)].to_string(),
        timings: names
            .iter()
            .zip(relative.iter().zip(failures))
            .map(|(n, (&r, f))| CandidateTiming {
                name: n.to_string(),
                relative: r,
                failure: r
                    .is_none()
                    .then(|| f.unwrap_or_else(|| "the built-in choice failed".to_string())),
            })
            .collect(),
    };
    if let Some(d) = &dir
        && let Err(e) = cache::write(d, key, &record)
    {
        log::warn!(
            "autotune: could not write the winners to {}: {e}",
            d.display()
        );
    }
    Tuning {
        kind,
        class: None,
        winner: record.winner,
        builtin,
        timings: record.timings,
        from_cache: false,
        seconds: start.elapsed().as_secs_f64(),
    }
}

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
    /// The kind of kernel tuned (`matmul`, `reduce`).
    pub kind: String,
    /// The class of sizes a per-class tuning timed and chose for
    /// (`f32 1 x 17..64 x 257..1024 x 65..256`: dtype, then batch, rows,
    /// contraction and columns as the ranges the class holds); `None`
    /// for the adapter-wide tunings made with the device.
    pub class: Option<String>,
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
            "{}{}: {} (built-in {}; {}):",
            self.kind,
            self.class
                .as_ref()
                .map_or(String::new(), |c| format!(" [{c}]")),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn candidates_run_in_rounds_and_failures_are_kept() {
        // Three candidates, two workloads, two rounds (the second starting
        // with the next candidate): candidate 1 fails to set up workload
        // 1, candidate 2 panics in its second run of workload 0.
        let order = RefCell::new(Vec::new());
        let runs_of_2 = RefCell::new(0);
        let measured = interleaved((3, 2, 2), &mut |c, w| {
            if (c, w) == (1, 1) {
                return Err("no kernel".to_string());
            }
            let (order, runs_of_2) = (&order, &runs_of_2);
            Ok(Box::new(move || {
                order.borrow_mut().push((c, w));
                if (c, w) == (2, 0) {
                    *runs_of_2.borrow_mut() += 1;
                    assert!(*runs_of_2.borrow() < 2, "a failing kernel");
                }
                Ok(())
            }))
        });
        assert_eq!(
            *order.borrow(),
            vec![
                (0, 0),
                (1, 0),
                (2, 0),
                (1, 0),
                (2, 0),
                (0, 0),
                (0, 1),
                (2, 1),
                (2, 1),
                (0, 1)
            ]
        );
        let ok = |m: &Measured| m.times.iter().map(Option::is_some).collect::<Vec<_>>();
        assert_eq!(ok(&measured[0]), vec![true, true]);
        assert_eq!(ok(&measured[1]), vec![true, false]);
        assert_eq!(measured[1].failure.as_deref(), Some("no kernel"));
        assert_eq!(ok(&measured[2]), vec![false, true]);
        assert_eq!(measured[2].failure.as_deref(), Some("workload 0: panicked"));
    }
}
