//! The error type for everything a device or outside data can get wrong.
//!
//! Misuse while tracing (shapes that do not broadcast, a bad axis) panics at
//! the caller's line instead; see the crate docs.

use crate::dtype::DType;

/// Errors returned by device work, readback and data constructors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No GPU adapter matched the request (or none exists).
    #[error("no GPU adapter: {0}")]
    NoAdapter(String),
    /// The adapter refused to create a logical device.
    #[error("requesting a wgpu device failed: {0}")]
    RequestDevice(String),
    /// Host data does not have as many elements as the shape needs.
    #[error("{op}: shape {shape:?} needs {expected} elements, got {got}")]
    DataLength {
        /// The constructor that received the data.
        op: &'static str,
        /// The shape asked for.
        shape: Vec<usize>,
        /// `shape.iter().product()`.
        expected: usize,
        /// The number of elements given.
        got: usize,
    },
    /// Host data holds a value its dtype cannot store (an `i64` outside
    /// the `i32` range that `I64` tensors are stored in).
    #[error(
        "{op}: element {index} ({value}) does not fit {dtype}, which is stored in 32 bits (i32's range)"
    )]
    OutOfRange {
        /// The constructor that received the data.
        op: &'static str,
        /// The dtype of the data.
        dtype: DType,
        /// The element's position in the data.
        index: usize,
        /// The element, printed.
        value: String,
    },
    /// A readback asked for a different element type than the tensor holds.
    #[error("{op}: tensor holds {actual}, asked for {requested}")]
    DTypeMismatch {
        /// The readback call.
        op: &'static str,
        /// The dtype of the tensor.
        actual: DType,
        /// The dtype of the requested element type.
        requested: DType,
    },
    /// Device memory ran out: an allocation would pass the device's
    /// memory limit ([`crate::DeviceConfig::memory_limit`]) even with the
    /// pool's idle buffers released, or the driver refused it.
    #[error(
        "out of device memory: {what} needs {requested} bytes with {live} bytes live (peak {peak}); {cause}; largest buffers: {largest}"
    )]
    OutOfMemory {
        /// What was being allocated (the value and its source line).
        what: String,
        /// Bytes asked for.
        requested: u64,
        /// Bytes the device's buffers held when it was asked.
        live: u64,
        /// The most the device's buffers have held at once.
        peak: u64,
        /// The limit passed, or the driver's message.
        cause: String,
        /// The largest buffers live, with the source line that recorded
        /// each value: where the failing graph ran, its own buffers at the
        /// kernel that failed (its inputs, intermediates and outputs), then
        /// the tensors the program holds (see
        /// [`crate::Device::live_tensors`]).
        largest: String,
    },
    /// A tensor or buffer is larger than the adapter allows.
    #[error("{what}: {bytes} bytes exceeds the adapter's limit of {limit} bytes")]
    TooLarge {
        /// What was being allocated or bound.
        what: String,
        /// The size asked for.
        bytes: u64,
        /// The adapter's limit.
        limit: u64,
    },
    /// Generated WGSL failed naga validation or pipeline creation.
    #[error(
        "kernel {kernel} of graph {graph_hash:016x} failed to compile: {message}\n--- WGSL ---\n{source_code}"
    )]
    Compile {
        /// Structural hash of the graph being compiled.
        graph_hash: u64,
        /// Index of the kernel within the graph's schedule.
        kernel: usize,
        /// What naga or wgpu said.
        message: String,
        /// The generated WGSL.
        source_code: String,
    },
    /// A trace site recompiled more often than
    /// [`Device::set_recompile_budget`](crate::Device::set_recompile_budget)
    /// allows.
    #[error(
        "recompile budget of {budget} exceeded: the graph of outputs recorded at {site} was compiled again ({count} recompiles) because {change}, recorded at {location}"
    )]
    RecompileBudget {
        /// The source lines of the graph's outputs.
        site: String,
        /// Recompiles of this site so far, this one included.
        count: usize,
        /// The budget that was set.
        budget: usize,
        /// What changed since the last graph of this site.
        change: String,
        /// The source line of the node that changed.
        location: String,
    },
    /// Anomaly mode ([`Device::set_checks`](crate::Device::set_checks)):
    /// an op produced NaN or infinity from finite values (or a kernel
    /// root, such as a reduction or matmul, produced NaN).
    #[error("anomaly: {op} recorded at {location} produced {what}")]
    NonFinite {
        /// The op (`log`, `div`, `matmul`, ...).
        op: &'static str,
        /// Where the user's code recorded it.
        location: String,
        /// What it produced (`NaN or infinity`, or a value on the CPU).
        what: String,
    },
    /// Anomaly mode: an indexing op (`index_select`, `gather`,
    /// `embedding`, `scatter_add`) read an index outside its axis.
    #[error("anomaly: {op} recorded at {location} read an index out of range: {detail}")]
    IndexOutOfRange {
        /// The op (`gather` for every read by index, `scatter_add`).
        op: &'static str,
        /// Where the user's code recorded it.
        location: String,
        /// The index and the axis length where known.
        detail: String,
    },
    /// The device reported an error while running or reading back.
    #[error("device error during {during}: {message}")]
    Device {
        /// The operation that was under way.
        during: String,
        /// What wgpu said.
        message: String,
    },
    /// `LAZYWGPU_VERIFY`: a GPU result differs from the CPU reference.
    #[error(
        "verify: graph {graph_hash:016x}: the GPU result of {op} (recorded at {location}) differs from the CPU reference: max abs error {max_abs:e}, max rel error {max_rel:e}"
    )]
    VerifyMismatch {
        /// Structural hash of the graph.
        graph_hash: u64,
        /// The op of the first mismatching output.
        op: &'static str,
        /// Where the user's code recorded it.
        location: String,
        /// Largest absolute difference.
        max_abs: f64,
        /// Largest relative difference.
        max_rel: f64,
    },
    /// A file could not be read or written.
    #[error("{op}: {path}: {source}")]
    Io {
        /// What was being done (e.g. `load_safetensors`).
        op: &'static str,
        /// The file.
        path: String,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A file's contents are not what the reader expects (a wrong magic
    /// number, a missing tensor, a shape that does not match).
    #[error("{op}: {path}: {message}")]
    Format {
        /// What was being read.
        op: &'static str,
        /// The file (or the name of the entry in it).
        path: String,
        /// What was expected and what came.
        message: String,
    },
    /// A dataset gave a batch that cannot be assembled (examples of
    /// different shapes, pixels that do not fill their shape), or the
    /// thread of a [`DataLoader`](crate::data::DataLoader) panicked or
    /// ended early.
    #[error("{op}: {message}")]
    Data {
        /// What was being done (`DataLoader`, `Dataset::get`).
        op: &'static str,
        /// What went wrong, naming the example where one is at fault.
        message: String,
    },
    /// A [`KvCache`](crate::nn::KvCache) was asked to hold more positions
    /// than its capacity: generation stops there (reset the cache, or make
    /// one with a larger capacity).
    #[error(
        "KvCache: {len} positions held and {adding} more asked for, past its capacity of {capacity}"
    )]
    CacheFull {
        /// Positions already held.
        len: usize,
        /// Positions being appended.
        adding: usize,
        /// The cache's capacity.
        capacity: usize,
    },
    /// Saved optimiser state does not fit the optimiser it is loaded into
    /// (a missing entry, a shape that differs).
    #[error("optimiser state: {0}")]
    State(String),
    /// The adapter lacks a feature a value needs (f16 needs `SHADER_F16`;
    /// bf16 needs nothing).
    #[error(
        "{what} needs the adapter feature {feature}, which this adapter lacks; compute in f32 or bf16 instead"
    )]
    Unsupported {
        /// The value and where it was recorded.
        what: String,
        /// The wgpu feature missing.
        feature: &'static str,
    },
    /// A collective call of a process group failed: a peer left, timed
    /// out, or called a different collective.
    #[error("{op} on rank {rank}: {message}")]
    Collective {
        /// The collective (`all_reduce`, `broadcast`, `barrier`, `init`).
        op: &'static str,
        /// The rank that reports the failure.
        rank: usize,
        /// What went wrong.
        message: String,
    },
    /// A scalar was requested from a tensor that does not hold exactly one element.
    #[error("item: tensor of shape {0:?} does not hold exactly one element")]
    NotScalar(Vec<usize>),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An [`Error::OutOfMemory`] with its `largest` buffers rewritten by
    /// `f` (given the current text); any other error unchanged. The run
    /// names its graph's buffers, the device then adds the tensors held.
    pub(crate) fn with_largest(self, f: impl FnOnce(String) -> String) -> Error {
        match self {
            Error::OutOfMemory {
                what,
                requested,
                live,
                peak,
                cause,
                largest,
            } => Error::OutOfMemory {
                what,
                requested,
                live,
                peak,
                cause,
                largest: f(largest),
            },
            other => other,
        }
    }
}
