//! Generated code for one kernel as a value: its WGSL text and what it
//! binds, in binding order.

use crate::kernel::{Binding, Precedents, Strategy, Target};

/// What code generation is given besides the graph: the target, and
/// (for dumps) a label per graph node, written as a comment on each line
/// that computes or stores that node.
#[derive(Clone, Copy)]
pub(crate) struct CodegenContext<'a> {
    /// The adapter's description.
    pub target: &'a Target,
    /// Per graph node: `op file:line`, or `None` for unannotated code
    /// (the default: annotations tie the text, and with it the pipeline
    /// cache, to one graph's call sites).
    pub origins: Option<&'a [String]>,
    /// The strategies of the trace site's last compile, for a compile
    /// with other sizes (see `kernel::strategy`).
    pub precedents: Option<&'a Precedents>,
}

impl<'a> CodegenContext<'a> {
    /// Unannotated code for `target`.
    #[cfg(test)]
    pub fn plain(target: &'a Target) -> CodegenContext<'a> {
        CodegenContext {
            target,
            origins: None,
            precedents: None,
        }
    }

    /// The precedent of the kernel keyed by `node` (see `Precedents`).
    pub fn precedent(&self, node: usize) -> Option<Strategy> {
        self.precedents.and_then(|p| p.get(node))
    }
}

/// How a kernel is launched, as its template decided (see `Gen::source`).
pub(crate) struct Launch {
    /// Workgroups to launch.
    pub groups: usize,
    pub strategy: Strategy,
    /// Scratch textures bound after the buffers.
    pub textures: Vec<TextureUse>,
}

/// Generated code for one kernel and what it binds.
#[derive(Clone, Debug)]
pub(crate) struct KernelSource {
    pub wgsl: String,
    /// The kernel IR it was printed from (`kernel::ir`), listed only when
    /// dumping (`CodegenContext::origins`), else empty.
    pub ir: String,
    /// Whether binding 0 is the parameter buffer.
    pub uses_params: bool,
    /// `Some(bytes)`: the parameter buffer is bound as a uniform buffer of
    /// that many bytes (its first words); `None`: as a storage buffer.
    pub uniform_params: Option<u64>,
    /// Graph nodes read from memory, in binding order after `params`.
    pub reads: Vec<usize>,
    /// Graph nodes written, in binding order after the reads.
    pub writes: Vec<usize>,
    /// Bindings per read and per write: a buffer larger than one storage
    /// binding may hold is bound as consecutive parts of
    /// `Target::binding_part_bytes` each (see `Gen::split_access`).
    pub read_parts: Vec<usize>,
    /// See `read_parts`.
    pub write_parts: Vec<usize>,
    /// Workgroups to launch (the runtime spreads them over a 2-D grid; the
    /// kernel recombines the index).
    pub groups: usize,
    /// How the kernel computes its values.
    pub strategy: Strategy,
    /// Scratch textures bound after the buffers, in this order.
    pub textures: Vec<TextureUse>,
    /// `rgba32float` scratch texture arrays (width, height, layers) that
    /// this kernel and its `packs` share; the runtime creates them once
    /// per compiled graph.
    pub scratch: Vec<(u32, u32, u32)>,
    /// Kernels dispatched right before this one, writing its scratch
    /// textures (a matmul's operand packing).
    pub packs: Vec<KernelSource>,
    /// Anomaly mode: the kernel binds the run's `checks` flags last.
    pub checks: bool,
    /// A kernel generic over sizes that change between steps: the values
    /// of its dynamic literals for this graph, bound last as a uniform
    /// `dyn_sizes` (see `runtime::gpu::generalize`).
    pub dyn_sizes: Option<Vec<u32>>,
}

/// A scratch texture a kernel binds: entry `slot` of the owning kernel's
/// `scratch`, as a write-only storage texture or a sampled one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TextureUse {
    pub slot: usize,
    pub write: bool,
}

impl KernelSource {
    /// Everything the kernel binds, in binding order: the parameters
    /// (when read), each read in its parts, each write in its parts, then
    /// the scratch textures. The WGSL declares its bindings in this order
    /// (`Gen::header`, the textures after it), and the runtime binds from
    /// this list; a unit test holds the two together.
    /// An iterator, not a list: the runtime walks it for every dispatch
    /// of every run.
    pub fn bindings(&self) -> impl Iterator<Item = Binding> + '_ {
        let params = self.uses_params.then_some(Binding::Params {
            uniform_bytes: self.uniform_params,
        });
        let reads = self
            .reads
            .iter()
            .zip(&self.read_parts)
            .flat_map(|(&node, &parts)| (0..parts).map(move |part| Binding::Read { node, part }));
        let writes = self
            .writes
            .iter()
            .zip(&self.write_parts)
            .flat_map(|(&node, &parts)| (0..parts).map(move |part| Binding::Write { node, part }));
        let textures = self.textures.iter().map(|t| Binding::Texture {
            slot: t.slot,
            write: t.write,
        });
        params
            .into_iter()
            .chain(reads)
            .chain(writes)
            .chain(textures)
            .chain(self.checks.then_some(Binding::Checks))
            .chain(self.dyn_sizes.as_ref().map(|_| Binding::Sizes))
    }

    /// Marks the kernel as checking (anomaly mode) and declares its
    /// `checks` binding after every other.
    pub fn declare_checks(mut self, on: bool) -> KernelSource {
        if on {
            let binding = self.bindings().count();
            self.wgsl.push_str(&format!(
                "@group(0) @binding({binding}) var<storage, read_write> checks: array<atomic<u32>, 2>;\n"
            ));
            self.checks = true;
        }
        self
    }

    /// Storage and uniform bindings of this kernel alone (a buffer bound
    /// in parts counts once per part; textures are not buffers).
    pub fn buffer_bindings(&self) -> usize {
        self.bindings()
            .filter(|b| !matches!(b, Binding::Texture { .. }))
            .count()
    }

    /// What is dispatched for this kernel, in order: its packing kernels,
    /// then itself.
    pub fn dispatches(&self) -> impl Iterator<Item = &KernelSource> + '_ {
        self.packs.iter().chain(std::iter::once(self))
    }

    /// Nodes read from buffers by this kernel or its packing kernels.
    pub fn all_reads(&self) -> impl Iterator<Item = usize> + '_ {
        self.dispatches().flat_map(|d| d.reads.iter().copied())
    }
}
