//! Where a step's device memory goes: the report of the graph run whose
//! peak was the device's highest since its metrics were last reset, with
//! the largest buffers live at that moment and the source line of the
//! value each holds ([`crate::Device::memory_report`]).
//!
//! It is built from the run's plan, not by walking the live buffers at
//! every kernel: while a run is encoded only the device's live level is
//! read after each kernel's allocations (one number per kernel); the
//! buffers live at the highest level are then found from when each was
//! allocated and released, in one pass over the graph.

use std::fmt;

/// What a buffer live at a graph's peak holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferRole {
    /// A value the graph reads and did not compute (a parameter, a batch,
    /// an optimiser's state before its update).
    Input,
    /// A value computed and released within the graph.
    Intermediate,
    /// A value the graph hands back (a new parameter, a gradient, a loss).
    Output,
    /// A matmul operand's scratch texture, taken from the pool for one kernel.
    Scratch,
}

impl fmt::Display for BufferRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BufferRole::Input => "input",
            BufferRole::Intermediate => "intermediate",
            BufferRole::Output => "output",
            BufferRole::Scratch => "scratch",
        })
    }
}

/// One buffer live at a graph's peak.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportedBuffer {
    /// Its size in bytes, as allocated (the pool rounds up to a quarter of
    /// a power of two).
    pub bytes: u64,
    /// What it holds.
    pub role: BufferRole,
    /// The op that computed its value, as the user called it (`input`
    /// for data made outside the graph).
    pub op: String,
    /// The value's shape.
    pub shape: Vec<usize>,
    /// The source line that recorded the value.
    pub location: String,
}

/// The memory of the graph run whose peak was the device's highest since
/// its metrics were last reset: what was live at that peak, and the
/// largest of this graph's buffers then.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryReport {
    /// The graph's structural hash (as `LAZYWGPU_DUMP` names its files).
    pub graph: u64,
    /// Bytes live on the device at the graph's peak: everything, buffers
    /// of other tensors and scratch textures included.
    pub peak_bytes: u64,
    /// Of those, the bytes of this graph's own buffers (its inputs, the
    /// values it had written and not yet released, its scratch).
    pub graph_bytes: u64,
    /// The kernel (in launch order) while whose allocations the peak was
    /// reached.
    pub kernel: usize,
    /// The graph's kernels.
    pub kernels: usize,
    /// What that kernel computes: its first output's op, shape and source
    /// line.
    pub at: String,
    /// This graph's buffers live at the peak, largest first (at most
    /// [`MemoryReport::LISTED`]).
    pub buffers: Vec<ReportedBuffer>,
}

impl MemoryReport {
    /// Buffers a report lists at most.
    pub const LISTED: usize = 12;
}

impl fmt::Display for MemoryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mb = |b: u64| b as f64 / 1e6;
        writeln!(
            f,
            "graph {:016x}: peak {:.1} MB live at kernel {} of {} ({}); {:.1} MB of it in this graph's buffers, the largest:",
            self.graph,
            mb(self.peak_bytes),
            self.kernel,
            self.kernels,
            self.at,
            mb(self.graph_bytes)
        )?;
        for b in &self.buffers {
            writeln!(
                f,
                "  {:>9.2} MB  {:<12} {} {:?} @ {}",
                mb(b.bytes),
                b.role.to_string(),
                b.op,
                b.shape,
                b.location
            )?;
        }
        Ok(())
    }
}

/// A buffer of a run as its plan places it: allocated before kernel
/// `from` is encoded (0 for those bound or allocated when the run starts)
/// and released after kernel `to` (`None`: held past the run).
#[derive(Clone, Debug)]
pub(crate) struct PlannedBuffer {
    /// Tells buffers apart where two nodes share one (a view of an input,
    /// an output written into a donated input).
    pub id: usize,
    pub from: usize,
    pub to: Option<usize>,
    pub buffer: ReportedBuffer,
}

/// The buffers of `planned` live while kernel `kernel` runs, each shared
/// buffer once, in plan order.
pub(crate) fn live_at(planned: Vec<PlannedBuffer>, kernel: usize) -> Vec<ReportedBuffer> {
    let mut seen = std::collections::HashSet::new();
    planned
        .into_iter()
        .filter(|p| p.from <= kernel && p.to.is_none_or(|to| to >= kernel))
        .filter(|p| seen.insert(p.id))
        .map(|p| p.buffer)
        .collect()
}

/// `buffers`' largest `count`, largest first, as an error lists them:
/// `bytes (role op [shape] at line)`.
pub(crate) fn largest_listed(mut buffers: Vec<ReportedBuffer>, count: usize) -> String {
    buffers.sort_by_key(|b| std::cmp::Reverse(b.bytes));
    buffers
        .iter()
        .take(count)
        .map(|b| {
            format!(
                "{} bytes ({} {} {:?} at {})",
                b.bytes, b.role, b.op, b.shape, b.location
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The report of a run of `kernels` kernels from the device's live level
/// after each kernel's allocations (`levels`, one per kernel), the
/// buffers its plan places (`planned`) and each kernel's scratch texture
/// bytes (`scratch`). `None` for a run without kernels. Linear in its
/// inputs.
pub(crate) fn report_of(
    (graph, at): (u64, &dyn Fn(usize) -> String),
    levels: &[u64],
    planned: Vec<PlannedBuffer>,
    scratch: &[u64],
) -> Option<MemoryReport> {
    let (kernel, &peak_bytes) = levels
        .iter()
        .enumerate()
        .max_by_key(|&(k, &level)| (level, std::cmp::Reverse(k)))?;
    let mut buffers = live_at(planned, kernel);
    if let Some(&bytes) = scratch.get(kernel).filter(|&&b| b > 0) {
        buffers.push(ReportedBuffer {
            bytes,
            role: BufferRole::Scratch,
            op: "matmul operand".to_string(),
            shape: Vec::new(),
            location: at(kernel),
        });
    }
    let graph_bytes = buffers.iter().map(|b| b.bytes).sum();
    buffers.sort_by_key(|b| std::cmp::Reverse(b.bytes));
    buffers.truncate(MemoryReport::LISTED);
    Some(MemoryReport {
        graph,
        peak_bytes,
        graph_bytes,
        kernel,
        kernels: levels.len(),
        at: at(kernel),
        buffers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(id: usize, (from, to): (usize, Option<usize>), bytes: u64) -> PlannedBuffer {
        PlannedBuffer {
            id,
            from,
            to,
            buffer: ReportedBuffer {
                bytes,
                role: BufferRole::Intermediate,
                op: format!("op{id}"),
                shape: vec![bytes as usize / 4],
                location: format!("line {id}"),
            },
        }
    }

    /// The peak is the first kernel at the highest level; the buffers
    /// listed are those allocated by then and not yet released, each
    /// shared buffer once, largest first, with that kernel's scratch.
    #[test]
    fn lists_what_the_plan_holds_at_the_highest_level() {
        let planned = vec![
            buffer(0, (0, None), 100),     // an input, held throughout
            buffer(1, (0, Some(0)), 500),  // released after kernel 0
            buffer(2, (1, Some(2)), 300),  // live at kernel 1 and 2
            buffer(2, (1, Some(2)), 300),  // the same buffer again (a view)
            buffer(3, (2, None), 200),     // an output from kernel 2
            buffer(4, (3, Some(3)), 1000), // after the peak
        ];
        let at = |k: usize| format!("kernel {k}");
        let report = report_of((7, &at), &[600, 400, 900, 900], planned, &[0, 0, 64, 0])
            .expect("a run with kernels");
        assert_eq!((report.kernel, report.peak_bytes), (2, 900));
        let listed: Vec<(u64, BufferRole)> =
            report.buffers.iter().map(|b| (b.bytes, b.role)).collect();
        assert_eq!(
            listed,
            [
                (300, BufferRole::Intermediate),
                (200, BufferRole::Intermediate),
                (100, BufferRole::Intermediate),
                (64, BufferRole::Scratch)
            ]
        );
        assert_eq!(report.graph_bytes, 664);
        let text = report.to_string();
        assert!(
            text.contains("peak 0.0 MB live at kernel 2 of 4 (kernel 2)"),
            "{text}"
        );
        assert!(report_of((7, &at), &[], Vec::new(), &[]).is_none());
    }
}
