//! Guards on how a program drives the lazy runtime, for the two mistakes
//! that lazy tensors make silent: a graph that keeps growing because no
//! step barrier cuts it (each read recompiles a larger graph and runs the
//! whole history again), and tensors kept alive across steps (memory that
//! grows until it runs out). Each warns once, in the log and in
//! [`MetricsSnapshot::warnings`](crate::MetricsSnapshot::warnings), with
//! the source lines to look at.

use std::collections::HashMap;
use std::panic::Location;
use std::sync::{Arc, Mutex};

use crate::graph::{GKind, Graph};
use crate::metrics::Metrics;
use crate::shape::numel;
use crate::tensor::Handle;

/// A graph is "much larger" than the last one with the same outputs when
/// it has this many times its nodes...
const GROWTH_FACTOR: f64 = 1.5;
/// ...and at least this many more (small graphs vary legitimately).
const GROWTH_MIN_NODES: usize = 64;
/// A graph past this many nodes is reported even without a predecessor.
const HUGE_GRAPH_NODES: usize = 50_000;
/// Consecutive steps over which the live tensors must grow to be a leak.
const LEAK_STEPS: usize = 8;
/// Trace sites remembered for the growth check.
const SITES_KEPT: usize = 1024;

/// A source line, as `file:line:column`.
type Line = &'static Location<'static>;

/// The live tensors created at one source line (see
/// [`Device::live_tensors`](crate::Device::live_tensors)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveTensorGroup {
    /// Where the tensors' current values were recorded (`file:line:col`).
    pub location: String,
    /// How many live tensors have it.
    pub count: usize,
    /// Bytes of their elements (views count their own elements).
    pub bytes: u64,
}

/// The guards' memory, one per device.
pub(crate) struct Guards {
    state: Mutex<GuardState>,
}

#[derive(Default)]
struct GuardState {
    /// Nodes of the last graph collected per set of output lines.
    /// Per site (a hash of its outputs' source locations), the node count
    /// of its last graph.
    last_nodes: HashMap<u64, usize>,
    /// Whether the growth or size warning was given (once per device).
    growth_warned: bool,
    huge_warned: bool,
    /// Live tensors and `bytes_live` after the last step, and for how
    /// many steps in a row either grew (and neither shrank).
    last_live: usize,
    last_bytes: u64,
    growth_streak: usize,
    leak_warned: bool,
}

impl Guards {
    pub fn new() -> Guards {
        Guards {
            state: Mutex::new(GuardState::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, GuardState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Checks a graph about to run against the last one with the same
    /// outputs' source lines: much larger (or past a size threshold) warns
    /// once, naming the line that recorded most of its ops.
    pub fn note_graph(&self, graph: &Graph, metrics: &Metrics) {
        let nodes = graph.key.nodes.len();
        // Every graph passes here, cache hits too: the site is hashed from
        // the locations' addresses (one static per call site), without
        // allocating or reading their file names.
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for &o in &graph.key.outputs {
            std::hash::Hash::hash(&std::ptr::from_ref(graph.locations[o]), &mut hasher);
        }
        let site = std::hash::Hasher::finish(&hasher);
        let mut state = self.state();
        if state.last_nodes.len() >= SITES_KEPT && !state.last_nodes.contains_key(&site) {
            state.last_nodes.clear();
        }
        let before = state.last_nodes.insert(site, nodes);
        let grew = before.is_some_and(|b| {
            nodes as f64 >= b as f64 * GROWTH_FACTOR && nodes >= b + GROWTH_MIN_NODES
        });
        let huge = nodes >= HUGE_GRAPH_NODES;
        if (grew && state.growth_warned) || (!grew && (!huge || state.huge_warned)) {
            return;
        }
        if grew {
            state.growth_warned = true;
        } else {
            state.huge_warned = true;
        }
        drop(state);
        metrics.add("graph_growth_warnings", 1);
        let first_output = graph.locations[graph.key.outputs.first().copied().unwrap_or(0)];
        let lines = busiest_lines(graph, 3);
        metrics.warn(match before {
            Some(b) if grew => format!(
                "the graph of outputs recorded at {first_output} has {nodes} nodes where the \
                 last one had {b}: it keeps growing, and every read recompiles and reruns all \
                 of it. The lines extending it most: {lines}; call `mark_step()` once per \
                 iteration (or read less often) to cut it"
            ),
            _ => format!(
                "the graph of outputs recorded at {first_output} has {nodes} nodes; if a loop \
                 builds it without `mark_step()`, each read recompiles and reruns all of it. \
                 The lines recording most of it: {lines}"
            ),
        });
    }

    /// After a step: the live tensors' count and the device's
    /// `bytes_live`; growth over `LEAK_STEPS` steps in a row warns once,
    /// with the lines that created most of the tensors.
    pub fn note_step(&self, live: &[Arc<Handle>], metrics: &Metrics) {
        let count = live.len();
        let bytes = metrics.value("bytes_live");
        let mut state = self.state();
        let grew = (count > state.last_live && bytes >= state.last_bytes)
            || (bytes > state.last_bytes && count >= state.last_live);
        state.growth_streak = if grew { state.growth_streak + 1 } else { 0 };
        state.last_live = count;
        state.last_bytes = bytes;
        if state.growth_streak < LEAK_STEPS || state.leak_warned {
            return;
        }
        state.leak_warned = true;
        drop(state);
        metrics.add("leak_warnings", 1);
        let groups = group_by_line(live);
        let top: Vec<String> = groups
            .iter()
            .take(3)
            .map(|g| format!("{} ({} tensors, {} bytes)", g.location, g.count, g.bytes))
            .collect();
        metrics.warn(format!(
            "the live tensors grew at each of the last {LEAK_STEPS} steps (now {count}, {} bytes \
             on the device): something keeps every step's tensors, most of them created at {}. \
             Keep plain numbers (`item()`) or drop them; `Device::live_tensors()` lists them all",
            metrics.value("bytes_live"),
            top.join("; ")
        ));
    }
}

/// The `count` source lines that recorded the most op nodes of `graph`,
/// with their counts.
fn busiest_lines(graph: &Graph, count: usize) -> String {
    let mut counts: HashMap<Line, usize> = HashMap::new();
    for (node, &line) in graph.key.nodes.iter().zip(&graph.locations) {
        if matches!(node.kind, GKind::Op { .. }) {
            *counts.entry(line).or_insert(0) += 1;
        }
    }
    let mut lines: Vec<(Line, usize)> = counts.into_iter().collect();
    lines.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.to_string().cmp(&b.0.to_string())));
    let named: Vec<String> = lines
        .iter()
        .take(count)
        .map(|(line, n)| format!("{line} ({n} ops)"))
        .collect();
    named.join(", ")
}

/// `live` grouped by the line that recorded each tensor's value, the
/// largest groups first (then by line).
pub(crate) fn group_by_line(live: &[Arc<Handle>]) -> Vec<LiveTensorGroup> {
    let mut groups: HashMap<Line, (usize, u64)> = HashMap::new();
    for handle in live {
        let entry = groups.entry(handle.node().location).or_insert((0, 0));
        entry.0 += 1;
        entry.1 += handle.dtype().words(numel(&handle.shape)) as u64 * 4;
    }
    let mut groups: Vec<LiveTensorGroup> = groups
        .into_iter()
        .map(|(line, (count, bytes))| LiveTensorGroup {
            location: line.to_string(),
            count,
            bytes,
        })
        .collect();
    groups.sort_by(|a, b| b.count.cmp(&a.count).then(a.location.cmp(&b.location)));
    groups
}
