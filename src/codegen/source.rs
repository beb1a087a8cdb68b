//! Generated code for one kernel: the kernel value (`kernel::Kernel`),
//! its WGSL text printed from it, and what the runtime needs besides.

use crate::kernel::changing::ChangingSizes;
use crate::kernel::generic::DynamicSizes;
use crate::kernel::{Binding, GuardList, Guards, Kernel, Precedents, Strategy, Sz, Target};

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
    /// Per node of the lowered graph: whether its last dimension is among
    /// the numbers that change at the trace site (`kernel::changing`: it
    /// differs from a graph the site compiled before, or is a multiple of
    /// a size the user marked dynamic, by value, so a product whose rows
    /// are as long as a marked batch is counted too). A choice that holds for some
    /// values of a size and not others (rows of a multiple of four stored
    /// four at a time) is not made on such a dimension, so that the
    /// kernels stay generic over it. Empty: none changes.
    pub changing_last_dims: &'a [bool],
    /// What lowering makes of the literals that are sizes: reads of the
    /// kernel's dynamic sizes where they read a number that changes at
    /// the trace site, else plain literals (`kernel::generic`).
    pub sizes: SizeLiterals<'a>,
}

/// What lowering makes of the literals that are sizes (`Expr::Sized`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum SizeLiterals<'a> {
    /// Those that read a number the set holds become reads of the
    /// kernel's dynamic sizes, the others plain literals
    /// (`kernel::generic::symbolize`), with which index arithmetic is
    /// simplified where the kernel is printed (`Kernel::simplified`). An
    /// empty set: every size is a literal (a site's first sizes).
    Symbolic(&'a ChangingSizes),
    /// They keep their provenance: what the tests of provenance and
    /// guards compare across sizes.
    #[cfg(test)]
    Kept,
}

/// The set with nothing changing: every size a literal.
#[cfg(test)]
pub(crate) static NO_CHANGING_SIZES: std::sync::LazyLock<ChangingSizes> =
    std::sync::LazyLock::new(ChangingSizes::none);

impl<'a> CodegenContext<'a> {
    /// Unannotated code for `target`.
    #[cfg(test)]
    pub fn plain(target: &'a Target) -> CodegenContext<'a> {
        CodegenContext {
            target,
            origins: None,
            precedents: None,
            changing_last_dims: &[],
            sizes: SizeLiterals::Symbolic(&NO_CHANGING_SIZES),
        }
    }

    /// The precedent of the kernel keyed by `node` (see `Precedents`).
    pub fn precedent(&self, node: usize) -> Option<Strategy> {
        self.precedents.and_then(|p| p.get(node))
    }

    /// Whether node `node`'s last dimension changes between the site's
    /// graphs (see `changing_last_dims`).
    pub fn last_dim_changes(&self, node: usize) -> bool {
        self.changing_last_dims.get(node).copied().unwrap_or(false)
    }

    /// Whether node `node`'s rows, `last` elements long, are whole groups
    /// of four at every size the site runs: a multiple of four now, and
    /// of a length that does not change between the site's graphs. The
    /// one guard of every choice to read or store a row four elements at
    /// a time (a matmul's outputs, a kernel that gathers lanes, a pack),
    /// so that such kernels stay generic over the sizes that change.
    /// The test of `last` is recorded in `guards`.
    pub fn rows_stay_in_fours(&self, node: usize, last: &Sz, guards: &mut Guards) -> bool {
        !self.last_dim_changes(node)
            && guards.multiple_of(last, 4, "rows read or stored four elements at a time")
    }
}

/// How a kernel is launched, as its builder decided (see
/// `Gen::kernel_source`).
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
    /// Its WGSL, empty until printed (`print_wgsl`): lowering builds the
    /// kernel value only, and a dispatch that lowers to a kernel its
    /// site bound before takes that kernel's text (shared, not copied)
    /// instead of printing.
    pub wgsl: std::sync::Arc<str>,
    /// The kernel IR it was printed from (`kernel::ir`), listed only when
    /// dumping (`CodegenContext::origins`), else empty.
    pub ir: String,
    /// Graph nodes read from memory, in binding order after `params`.
    pub reads: Vec<usize>,
    /// Graph nodes written, in binding order after the reads.
    pub writes: Vec<usize>,
    /// Workgroups to launch (the runtime spreads them over a 2-D grid; the
    /// kernel recombines the index).
    pub groups: usize,
    /// How the kernel computes its values.
    pub strategy: Strategy,
    /// `rgba32float` scratch texture arrays (width, height, layers) that
    /// this kernel and its `packs` share; the runtime creates them once
    /// per compiled graph.
    pub scratch: Vec<(u32, u32, u32)>,
    /// Kernels dispatched right before this one, writing its scratch
    /// textures (a matmul's operand packing).
    pub packs: Vec<KernelSource>,
    /// Of a packing kernel: the buffer-to-texture copy that does its
    /// work (its operand lies in memory as its texture holds it), which
    /// the runtime encodes instead of dispatching it. The kernel is there
    /// either way, so that a site's dispatches do not change with sizes
    /// where only some sizes can be copied.
    pub copy: Option<TextureCopy>,
    /// Of a packing kernel: the texture it fills, as sizes, from which a
    /// new size that binds it unlowered finds the texture's extent and
    /// whether a copy does its work there (`codegen::rebind`).
    pub packed: Option<super::lane_packs::Packing>,
    /// The sizes it reads from its sizes binding, bound last as a uniform
    /// `dyn_sizes`, and their values for this graph (none where no size it
    /// reads changes at its trace site; see `kernel::generic`).
    pub dynamic: DynamicSizes,
    /// The kernels that could have computed it, and whether each was
    /// valid at its sizes (empty where there was no choice to make).
    pub candidates: Vec<(String, bool)>,
    /// The tests of sizes its choices made (`kernel::sizes`), in order:
    /// at sizes where each comes out as it did, lowering makes the same
    /// choices.
    pub guards: GuardList,
    /// The kernel as a value, as lowered: `wgsl` was printed from it
    /// simplified (`Kernel::simplified`). Shared: a site's record keeps
    /// it to compare the next sizes with, which then neither simplify
    /// nor print.
    pub kernel: std::sync::Arc<Kernel>,
}

/// A matmul operand packed by a copy instead of a kernel: a stored value
/// lies in memory as the operand's texture holds it (row-major `f32`
/// rows of whole texels, a layer per column block and batch entry, no
/// padding), so the driver's copies write the texture, one per column
/// block. On lavapipe a texture store from a shader is a loop over the
/// lanes: a packing kernel wrote ~100 M texels a second, where a copy is
/// a `memcpy` per row (PERFORMANCE.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TextureCopy {
    /// The stored node copied from.
    pub node: usize,
    /// Its first element's byte offset in the node's buffer (a multiple
    /// of 16, one texel).
    pub offset_bytes: u64,
    /// Bytes from one row to the next (a multiple of 256, which copies
    /// require).
    pub bytes_per_row: u32,
    /// The scratch texture written: `slot` of the owning kernel's
    /// `scratch`.
    pub slot: usize,
    /// The texture's whole extent: (width, height, layers).
    pub size: (u32, u32, u32),
    /// Texel rows copied a layer: the texture's rows past them (a B
    /// whose K is not a multiple of four, padded to whole texels of A)
    /// are written with zeros.
    pub rows: u32,
}

impl TextureCopy {
    /// Column blocks each matrix row is cut into, `size.0` texels each
    /// (a row holds whole blocks, `lane_packs::copyable`): the layers of
    /// block `b` are `b * entries ..` (`Packing`'s layer order), filled
    /// by one copy.
    pub fn col_blocks(&self) -> u32 {
        self.bytes_per_row / (self.size.0 * 16)
    }
}

/// A scratch texture a kernel binds: entry `slot` of the owning kernel's
/// `scratch`, as a write-only storage texture or a sampled one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TextureUse {
    pub slot: usize,
    pub write: bool,
    /// The name the kernel reads or writes it by.
    pub name: &'static str,
}

impl KernelSource {
    /// Everything the kernel binds, in binding order: the kernel's
    /// bindings (`Kernel::bindings`, which the WGSL declares; a kernel
    /// made generic over its sizes binds them last). The runtime binds
    /// from this list; a unit test holds it and the WGSL together.
    /// An iterator, not a list: the runtime walks it for every dispatch
    /// of every run.
    pub fn bindings(&self) -> impl Iterator<Item = Binding> + '_ {
        self.kernel.binding_list()
    }

    /// The parameter buffer's uniform size, if bound as a uniform.
    #[cfg(test)]
    pub fn uniform_params(&self) -> Option<u64> {
        self.bindings().find_map(|b| match b {
            Binding::Params { uniform_bytes } => uniform_bytes,
            _ => None,
        })
    }

    /// Bindings per read (`write`: per write), in binding order.
    #[cfg(test)]
    pub fn parts(&self, write: bool) -> Vec<usize> {
        let mut parts: Vec<usize> = Vec::new();
        for b in self.bindings() {
            match (b, write) {
                (Binding::Read { part, .. }, false) | (Binding::Write { part, .. }, true) => {
                    if part == 0 {
                        parts.push(1);
                    } else if let Some(last) = parts.last_mut() {
                        *last += 1;
                    }
                }
                _ => {}
            }
        }
        parts
    }

    /// Storage and uniform bindings of this kernel alone (a buffer bound
    /// in parts counts once per part; textures are not buffers).
    pub fn buffer_bindings(&self) -> usize {
        self.bindings()
            .filter(|b| !matches!(b, Binding::Texture { .. }))
            .count()
    }

    /// Prints each of its dispatches not printed yet (`origins`: as
    /// `CodegenContext::origins`).
    pub fn print_wgsl(&mut self, origins: Option<&[String]>) {
        for pack in &mut self.packs {
            pack.print_wgsl(origins);
        }
        if self.wgsl.is_empty() {
            self.wgsl = super::render::kernel_wgsl(&self.kernel.simplified(), origins).into();
        }
    }

    /// What is dispatched for this kernel, in order: its packing kernels,
    /// then itself.
    pub fn dispatches(&self) -> impl Iterator<Item = &KernelSource> + '_ {
        self.packs.iter().chain(std::iter::once(self))
    }

    /// Nodes read from buffers by this kernel or its packing kernels.
    #[cfg(test)]
    pub fn all_reads(&self) -> impl Iterator<Item = usize> + '_ {
        self.dispatches().flat_map(|d| d.reads.iter().copied())
    }
}
