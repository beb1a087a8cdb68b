//! Lowering of one kernel of elementwise work (the runtime prints it).
//!
//! Each invocation owns one element index `gi` of the kernel's iteration
//! space. A node's value at an index is emitted once as a `let` (memoised by
//! node and index variable), so shared subexpressions are computed once and a
//! chain of a thousand ops is a thousand short lines, not one deep
//! expression. Movement ops become index arithmetic; stored data is read
//! through its layout (strides and offset). Scalars and other runtime values
//! are read from the `params` buffer, never written into the code.

use crate::graph::GraphKey;
use crate::kernel::ir::{Expr, Inst};
use crate::kernel::reads_output_elsewhere;
use crate::kernel::{Entry, Guards, Precedents, Strategy, Sz, choose_vec4};

use super::emit::Gen;
pub(crate) use super::source::{
    CodegenContext, KernelSource, Launch, SizeLiterals, TextureCopy, TextureUse,
};
use super::vectorize::lanes_gathered;

/// The most parameter bytes bound as a uniform buffer: WebGPU's minimum
/// for `max_uniform_buffer_binding_size`, so every adapter allows it.
pub(crate) const UNIFORM_PARAMS_BYTES: u64 = 64 << 10;

/// Invocations per workgroup for elementwise kernels.
pub(crate) const WORKGROUP_SIZE: u32 = crate::kernel::WORKGROUP_SIZE as u32;

/// An elementwise kernel lowered to the IR and not yet printed.
pub(crate) struct ElementwiseKernel<'a> {
    g: Gen<'a>,
    /// The stores, after the whole body (a donated input is read from its
    /// output's binding before any output is written).
    stores: Vec<Inst>,
    outputs: Vec<usize>,
    /// The elements of each output.
    elements: Sz,
    vec: bool,
}

/// Lowers the kernel that writes `outputs` (all of `numel` elements).
/// `stored(i)` says whether node `i` can be read from memory (a graph input
/// or the output of an earlier kernel) instead of being recomputed.
///
/// Where the elements count whole groups of four, it works on `vec4`s:
/// four elements per invocation, loaded and stored as one, which is worth
/// ~2.5x on lavapipe and saves loads everywhere. Reads that lie as aligned
/// groups of four (row-major, an attention head's view, a row broadcast)
/// load a `vec4`; the rest (a transposed view, a column broadcast, a mask
/// of `arange`s) are computed a lane at a time and gathered
/// (`vectorize::lanes_gathered`), where every output's rows are whole
/// groups of four that keep their length between the site's graphs. It
/// works one element at a time where a 16-bit float is on the vector
/// path, an op loops per element (scatter-adds and their sorted starts),
/// a value would be read both as vectors and by lanes, or the site's
/// earlier sizes did (`choose_vec4`).
///
/// `aliases` lists graph inputs whose buffer is donated to output `k` of
/// this kernel: they are read from `out{k}` (before it is written) instead
/// of a binding of their own.
pub(crate) fn lower_kernel<'a>(
    key: &'a GraphKey,
    outputs: &[usize],
    numel: usize,
    stored: &'a dyn Fn(usize) -> bool,
    aliases: &'a [(usize, usize)],
    cx: &CodegenContext<'a>,
) -> ElementwiseKernel<'a> {
    let aliased = |n: usize| aliases.iter().any(|&(a, _)| a == n);
    // A kernel that gathers lanes works on vectors only where every
    // output's rows are whole groups of four that keep their length
    // between the site's graphs, so that a batch that changes size (a
    // partial last batch of `[b, 10]` logits) never takes it across the
    // four-elements guard: such kernels kept one code at every size
    // before they gathered, and should stay so.
    let mut guards = Guards::default();
    let rows_in_fours = |o: usize, guards: &mut Guards| {
        cx.rows_stay_in_fours(o, &Sz::last_dim(o, &key.nodes[o].shape), guards)
    };
    let gathered = lanes_gathered(
        &key.nodes,
        (outputs, true),
        (stored, &aliased),
        (cx, &mut guards),
    );
    // Every output has `numel` elements (`schedule::KernelGroup`).
    let elements = (outputs.first()).map_or(Sz::constant(numel), |&o| {
        Sz::elements(o, &key.nodes[o].shape)
    });
    let can = gathered
        .as_ref()
        .is_some_and(|g| g.is_empty() || outputs.iter().all(|&o| rows_in_fours(o, &mut guards)))
        && guards.multiple_of(&elements, 4, "elements computed four at a time");
    let precedent = Precedents::elementwise_node(outputs).and_then(|o| cx.precedent(o));
    let vec = choose_vec4(can, precedent);
    let mut g = Gen::new(&key.nodes, stored, aliases, cx);
    g.guards = guards;
    g.set_checks(key.checked);
    let gathered = gathered.unwrap_or_default();
    g.candidates = vec![
        (vec4_candidate(&gathered), can),
        ("scalar".to_string(), true),
    ];
    if vec {
        g.gather_lanes_of(gathered);
    }
    let gi = Expr::Invocation;
    let mut stores = Vec::new();
    for (k, &o) in outputs.iter().enumerate() {
        // An output that is itself stored (a strided view being made
        // contiguous) is read through its layout, not recursed into.
        let value = g.value(o, &gi, true, vec);
        stores.push(g.store(k, o, &gi, value, vec));
    }
    ElementwiseKernel {
        g,
        stores,
        outputs: outputs.to_vec(),
        elements,
        vec,
    }
}

/// The vector candidate's name in a plan: `vec4`, and the nodes it reads
/// a lane at a time (`lanes_gathered`).
fn vec4_candidate(gathered: &[usize]) -> String {
    match gathered {
        [] => "vec4".to_string(),
        nodes => {
            let names: Vec<String> = nodes.iter().map(|n| format!("n{n}")).collect();
            format!("vec4 gathering {}", names.join(" "))
        }
    }
}

impl ElementwiseKernel<'_> {
    /// Whether a donated input is read anywhere but at the invocation's
    /// own element (which would race with other invocations' writes).
    pub fn reads_donated_elsewhere(&self) -> bool {
        reads_output_elsewhere(self.g.body(), &Expr::Invocation)
    }

    /// The kernel as a value, with what it binds (printed later:
    /// `KernelSource::print_wgsl`).
    pub fn render(self) -> KernelSource {
        let ElementwiseKernel {
            g,
            stores,
            outputs,
            elements,
            vec,
        } = self;
        let invocations = if vec { elements.div(4) } else { elements };
        let entry = Entry::per_invocation_of(&invocations);
        let body = g.body().iter().chain(&stores).cloned().collect();
        let launch = Launch {
            groups: Entry::groups_for(invocations.literal()),
            strategy: Strategy::Elementwise { vec4: vec },
            textures: Vec::new(),
        };
        g.kernel_source((outputs, vec), entry, body, launch)
    }
}

/// `lower_kernel`, assembled as a kernel value.
#[cfg(test)]
pub(crate) fn generate_kernel(
    key: &GraphKey,
    outputs: &[usize],
    numel: usize,
    stored: &dyn Fn(usize) -> bool,
    aliases: &[(usize, usize)],
    cx: &CodegenContext,
) -> KernelSource {
    lower_kernel(key, outputs, numel, stored, aliases, cx).render()
}

/// How many copies of a loop's body each iteration runs so that `trips`
/// iterations fit `budget`: 1 where they do, else a power of two. The
/// tests of `trips` are recorded in `guards`.
pub(crate) fn unroll_guarded(trips: &Sz, budget: Option<usize>, guards: &mut Guards) -> usize {
    let fits = "a loop within the loop budget";
    match budget {
        Some(budget) if !guards.at_most(trips, budget, fits) => {
            let share = trips.div_ceil(&Sz::constant(budget));
            guards.power_of_two_above(&share, "a loop's unroll")
        }
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::graph::op::{BinaryOp, Op};
    use crate::graph::{GKind, GNode};
    use crate::kernel::Target;
    use crate::shape::Layout;

    /// `x + s1 + s2 + ..` over 4 f32 with `scalars` scalar nodes, each its
    /// own parameter word.
    fn scalar_chain(scalars: usize) -> GraphKey {
        let mut nodes = vec![GNode {
            kind: GKind::Input {
                slot: 0,
                layout: Layout::contiguous(&[4]),
            },
            shape: vec![4],
            dtype: DType::F32,
            inputs: vec![],
        }];
        for p in 0..scalars {
            let prev = nodes.len() - 1;
            nodes.push(GNode {
                kind: GKind::Op {
                    op: Op::Scalar,
                    param_base: p,
                },
                shape: vec![],
                dtype: DType::F32,
                inputs: vec![],
            });
            nodes.push(GNode {
                kind: GKind::Op {
                    op: Op::Binary(BinaryOp::Add),
                    param_base: 0,
                },
                shape: vec![4],
                dtype: DType::F32,
                inputs: vec![prev, nodes.len() - 1],
            });
        }
        GraphKey {
            outputs: vec![nodes.len() - 1],
            nodes,
            fused: true,
            checked: false,
            donatable: vec![false],
            buffer_group: vec![0],
        }
    }

    fn kernel_of(key: &GraphKey) -> KernelSource {
        let mut source = generate_kernel(
            key,
            &key.outputs,
            4,
            &|i| i == 0,
            &[],
            &CodegenContext::plain(&Target::lavapipe()),
        );
        source.print_wgsl(None);
        source
    }

    #[test]
    fn parameters_are_a_uniform_buffer_up_to_64_kib() {
        let small = kernel_of(&scalar_chain(5));
        assert_eq!(small.uniform_params(), Some(32), "5 words: two vec4s");
        assert!(
            small
                .wgsl
                .contains("var<uniform> params: array<vec4<u32>, 2>")
        );
        let most = kernel_of(&scalar_chain(16_384));
        assert_eq!(most.uniform_params(), Some(64 << 10));
        let past = kernel_of(&scalar_chain(16_385));
        assert_eq!(past.uniform_params(), None);
        assert!(past.wgsl.contains("var<storage, read> params: array<u32>"));
    }

    /// A donated input bound in several parts (a buffer past one binding)
    /// is still read at the invocation's own element, so donation holds;
    /// read through a transposed view as well, it is not.
    #[test]
    fn donation_over_binding_parts_is_read_at_the_own_element() {
        // 4,096 f32 (16 KiB) in parts of 1 KiB.
        let target = Target {
            binding_part_bytes: 1024,
            ..Target::lavapipe()
        };
        let cx = CodegenContext::plain(&target);
        let node = |kind, inputs| GNode {
            kind,
            shape: vec![64, 64],
            dtype: DType::F32,
            inputs,
        };
        let add = |a, b| {
            let op = Op::Binary(BinaryOp::Add);
            node(GKind::Op { op, param_base: 0 }, vec![a, b])
        };
        let input = node(
            GKind::Input {
                slot: 0,
                layout: Layout::contiguous(&[64, 64]),
            },
            vec![],
        );
        let key = |nodes: Vec<GNode>| GraphKey {
            outputs: vec![nodes.len() - 1],
            nodes,
            fused: true,
            checked: false,
            donatable: vec![true],
            buffer_group: vec![0],
        };
        let stored = |i: usize| i == 0;
        // x + x: read at the own element only.
        let own = key(vec![input.clone(), add(0, 0)]);
        let lowered = lower_kernel(&own, &[1], 4096, &stored, &[(0, 0)], &cx);
        assert!(!lowered.reads_donated_elsewhere());
        let mut source = lowered.render();
        source.print_wgsl(None);
        assert_eq!(source.parts(true), vec![16]);
        assert!(source.wgsl.contains("out0_p15"), "{}", source.wgsl);
        // x + x.t(): also read at the transposed element.
        let transpose = Op::AsStrided(Layout {
            offset: 0,
            strides: vec![1, 64],
        });
        let t = node(
            GKind::Op {
                op: transpose,
                param_base: 0,
            },
            vec![0],
        );
        let elsewhere = key(vec![input, t, add(0, 1)]);
        let lowered = lower_kernel(&elsewhere, &[2], 4096, &stored, &[(0, 0)], &cx);
        assert!(lowered.reads_donated_elsewhere());
    }

    /// Generating the code of a 20,000-op chain recurses that deep: on a
    /// thread with 256 KiB of stack it must grow the stack, not overflow.
    #[test]
    fn deep_chains_generate_on_a_small_stack() {
        let key = scalar_chain(20_000);
        let source = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || kernel_of(&key))
            .expect("spawn")
            .join()
            .expect("code generation overflowed");
        assert!(source.wgsl.lines().count() > 20_000);
        validate_wgsl_for_test(&source.wgsl);
    }

    fn validate_wgsl_for_test(source: &str) {
        if let Err(e) = crate::codegen::validate_wgsl(source) {
            panic!("{e}");
        }
    }
}
