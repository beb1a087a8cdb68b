//! The guards kernels record (`kernel::sizes`), as data, for a
//! hand-written `Target` without an adapter: what a row sum's, a
//! softmax's and an elementwise kernel's code depends on among their
//! sizes, and, over sizes around every threshold, that two sizes where
//! one's guards all hold at the other get kernels of the same strategies.

use super::bindings_test::kernels_of;
use super::{CodegenContext, KernelSource, SizeLiterals, generate};
use crate::graph::{Graph, GraphKey};
use crate::kernel::Target;
pub(super) use crate::kernel::changing::number_of;
use crate::kernel::generic::structural_difference;
use crate::kernel::sizes::{Guard, Leaf, Test};
use crate::schedule::{lower_for_gpu, plan};
use crate::{Device, DeviceConfig, Tensor};

/// A `[rows, len]` input on the CPU device (nothing runs: kernels are
/// only lowered).
fn input(rows: usize, len: usize) -> Tensor {
    let dev = Device::cpu_with(DeviceConfig::default());
    Tensor::from_vec(vec![0.25f32; rows * len], [rows, len], &dev).expect("input")
}

/// The conditions of `kernel`'s guards, in order.
fn conditions(kernel: &KernelSource) -> Vec<String> {
    kernel.guards.iter().map(Guard::condition).collect()
}

/// Whether every guard of `kernels` holds where each number of the graph
/// is `at(leaf)`.
pub(super) fn all_hold(kernels: &[KernelSource], at: &dyn Fn(Leaf) -> usize) -> bool {
    (kernels.iter().flat_map(|k| k.guards.iter()))
        .all(|g| g.test.passes(g.size.eval(at)) == g.passed)
}

/// The conditions of `kernel`'s guards that decided `what`.
fn deciding(kernel: &KernelSource, what: &[&str]) -> Vec<String> {
    (kernel.guards.iter())
        .filter(|g| what.iter().any(|w| g.decides.contains(w)))
        .map(Guard::condition)
        .collect()
}

#[test]
fn a_row_sum_depends_on_its_length_through_three_guards_and_its_bindings() {
    let budget = Target::lavapipe()
        .loop_budget(1)
        .expect("lavapipe's budget");
    let sum = input(300, 1000).sum([1], false);
    let kernels = kernels_of(&[&sum], &Target::lavapipe());
    assert_eq!(kernels.len(), 1);
    // Read four at a time in place (more than one element, its layout
    // row-major from an offset that is a multiple of four, and rows of a
    // multiple of four), one invocation a row (below the tree's 4,096
    // elements), within the loop budget, the input from its first
    // element; the input and the output each in one binding (of 128 MiB);
    // its loop over groups of four not unrolled (within the budget).
    let want = [
        "(n0[0] * n0[1]) != 1".to_string(),
        "stride(n0)[0] == max(n0[1], 1)".to_string(),
        "stride(n0)[1] == 1".to_string(),
        "offset(n0) % 4 == 0".to_string(),
        "n0[1] % 4 == 0".to_string(),
        "max(n0[1], 1) < 4096".to_string(),
        format!("max(n0[1], 1) <= {budget}"),
        "offset(n0) == 0".to_string(),
        "((extent(n0) /^ 4) * 16) <= 134217728".to_string(),
        format!("(n0[1] / 4) <= {budget}"),
        "(n2[0] * 4) <= 134217728".to_string(),
    ];
    // Tests against one, of dimensions.
    let of_one = |g: &&Guard| g.test == Test::AtMost(1);
    let listed: Vec<String> = (kernels[0].guards.iter())
        .filter(|g| !of_one(g))
        .map(Guard::condition)
        .collect();
    assert_eq!(listed, want);
    // Sizes of one stay specialised: each dimension the kernel reads or
    // writes is tested against one.
    let ones: Vec<String> = (kernels[0].guards.iter().filter(of_one))
        .map(Guard::condition)
        .collect();
    for dim in ["n0[0] > 1", "n0[1] > 1", "n1[1] <= 1"] {
        assert!(ones.contains(&dim.to_string()), "{dim}: {ones:?}");
    }
    // In parts of 64 KiB the input (1.2 MB) takes 19.
    let small = Target::lavapipe().with_max_binding(Some(64 << 10), 256);
    let kernels = kernels_of(&[&sum], &small);
    let parts = deciding(&kernels[0], &["binding"]);
    assert_eq!(
        parts,
        [
            "(((extent(n0) /^ 4) * 16) /^ 65536) == 19",
            "(n2[0] * 4) <= 65536"
        ]
    );
    // A row of 70,001 elements: past the budget, a workgroup tree.
    let long = input(300, 70_001).sum([1], false);
    let kernels = kernels_of(&[&long], &Target::lavapipe());
    let listed = conditions(&kernels[0]);
    assert!(
        listed.contains(&"max(n0[1], 1) >= 4096".to_string()),
        "{listed:?}"
    );
}

#[test]
fn softmax_and_elementwise_kernels_list_the_tests_of_their_sizes() {
    let x = input(2000, 12);
    let kernels = kernels_of(&[&x.softmax(1)], &Target::lavapipe());
    let listed = conditions(&kernels[0]);
    for want in ["n0[0] >= 1024", "n0[1] % 4 == 0"] {
        assert!(listed.contains(&want.to_string()), "{want}: {listed:?}");
    }
    // 21 elements: not four at a time.
    let odd = input(7, 3).exp();
    let kernels = kernels_of(&[&odd], &Target::lavapipe());
    assert_eq!(
        deciding(&kernels[0], &["four at a time"]),
        ["(n1[0] * n1[1]) % 4 != 0"],
        "{}",
        kernels[0].kernel
    );
}

/// Over row lengths around the thresholds (the tree's 4,096, the loop
/// budget, blocks of long norm rows, multiples of four), a row sum, a
/// softmax, an elementwise kernel and a layer norm with its gradient
/// lowered at one length and at another where every guard holds get the
/// same strategies and the same structure.
#[test]
fn kernels_whose_guards_hold_at_another_size_choose_as_they_do() {
    use crate::nn::functional::layer_norm;
    let lengths = [1usize, 3, 4, 12, 255, 256, 1000, 4095, 4096, 5000, 70_001];
    let programs: [Program<'_>; 4] = [
        &|x| vec![x.sum([1], false)],
        &|x| vec![x.softmax(1)],
        &|x| vec![x * 2.0],
        &|x| {
            x.requires_grad_(true);
            let y = layer_norm(x, &[x.shape()[1]], None, None, 1e-5);
            (&y * &y).sum_all().backward();
            vec![y, x.grad().expect("a gradient")]
        },
    ];
    for (p, program) in programs.iter().enumerate() {
        let lowered: Vec<Lowered> = (lengths.iter())
            .map(|&len| {
                let outputs = program(&input(3, len));
                lowered_with_key(&outputs.iter().collect::<Vec<_>>(), &Target::lavapipe())
            })
            .collect();
        let mut compared = 0;
        for (a, (_, ka)) in lengths.iter().zip(&lowered) {
            for (b, (key_b, kb)) in lengths.iter().zip(&lowered) {
                if ka.len() != kb.len() || !all_hold(ka, &|leaf| number_of(key_b, leaf)) {
                    continue;
                }
                compared += 1;
                let strategies =
                    |k: &[KernelSource]| k.iter().map(|s| s.strategy).collect::<Vec<_>>();
                assert_eq!(
                    strategies(ka),
                    strategies(kb),
                    "program {p}: length {a}, then {b}"
                );
            }
        }
        assert!(
            compared > lengths.len(),
            "program {p}: {compared} pairs compared"
        );
        let (_, differ) = unguarded_changes(&lowered);
        assert!(differ.is_empty(), "program {p}: {differ:#?}");
    }
}

/// Outputs computed from an input, to lower.
pub(super) type Program<'a> = &'a dyn Fn(&Tensor) -> Vec<Tensor>;

/// The kernels of `outputs` after the whole lowering for `target`, with
/// the lowered graph whose dimensions their guards read.
fn lowered_with_key(outputs: &[&Tensor], target: &Target) -> Lowered {
    let nodes: Vec<_> = outputs.iter().map(|t| t.node()).collect();
    let graph = Graph::collect_with(&nodes, true, false);
    let key = lower_for_gpu(&graph.key, target).key;
    let mut plan = plan(&key, target);
    let mut out = Vec::new();
    // Literals keep their provenance, so that kernels at two sizes are
    // compared before any is made generic.
    let cx = CodegenContext {
        sizes: SizeLiterals::Kept,
        ..CodegenContext::plain(target)
    };
    for source in generate(&key, &cx, &mut plan) {
        out.extend(source.packs.iter().cloned());
        out.push(source);
    }
    (key, out)
}

/// Over every pair of `lowered` graphs of one structure, the kernels whose
/// guards all hold at the other graph's dimensions, as (kernels of the
/// same structure, descriptions of those that differ: strategy and the
/// first line that differs).
fn unguarded_changes(lowered: &[Lowered]) -> (usize, Vec<String>) {
    let (mut same, mut differ) = (0, Vec::new());
    guarded_pairs(
        lowered,
        &mut |x, y, _| match structural_difference(&x.kernel, &y.kernel) {
            None => same += 1,
            Some(d) => differ.push(format!("{:?}: {d}", x.strategy)),
        },
    );
    (same, differ)
}

/// What `guarded_pairs` calls on each pair: its two kernels and their
/// graphs.
pub(super) type PairVisitor<'a> =
    dyn FnMut(&KernelSource, &KernelSource, (&GraphKey, &GraphKey)) + 'a;

/// Calls `each(x, y, (ka, kb))` for every pair of kernels `x` of one of
/// `lowered`'s graphs (`ka`) and `y` of another (`kb`, whose numbers a
/// caller may read with `number_of`) where the two graphs have one structure but
/// for sizes, as a site compares them, and `x`'s guards all hold at
/// `kb`'s numbers.
pub(super) fn guarded_pairs(lowered: &[Lowered], each: &mut PairVisitor<'_>) {
    for (ka, sa) in lowered {
        for (kb, sb) in lowered {
            if ka.size_free_hash() != kb.size_free_hash() || sa.len() != sb.len() {
                continue;
            }
            let at = |leaf: Leaf| number_of(kb, leaf);
            for (x, y) in sa.iter().zip(sb) {
                if all_hold(std::slice::from_ref(x), &at) {
                    each(x, y, (ka, kb));
                }
            }
        }
    }
}

/// Each of `programs`, lowered over `[3, len]` inputs of each of
/// `lengths`: wherever one length's guards hold at another's numbers,
/// its kernels keep their structure; and more than `pairs_per_length`
/// times as many pairs as lengths are compared (the guards hold often
/// enough for the test to say something).
fn alike_wherever_guards_hold(
    programs: &[(&str, Program<'_>)],
    lengths: &[usize],
    pairs_per_length: usize,
) {
    for (name, program) in programs {
        let lowered = lowered_over(*program, lengths);
        let (same, differ) = unguarded_changes(&lowered);
        assert!(differ.is_empty(), "{name}: {differ:#?}");
        let enough = pairs_per_length * lengths.len();
        assert!(same > enough, "{name}: {same} pairs compared");
    }
}

/// `program`, lowered for lavapipe over `[3, len]` inputs of each of
/// `lengths`.
pub(super) fn lowered_over(program: Program<'_>, lengths: &[usize]) -> Vec<Lowered> {
    (lengths.iter())
        .map(|&len| {
            let outputs = program(&input(3, len));
            lowered_with_key(&outputs.iter().collect::<Vec<_>>(), &Target::lavapipe())
        })
        .collect()
}

/// The parameters of three training steps, made once so that every
/// size's graph reads the same ones: an MLP's, an attention block's, a
/// convolution's.
pub(super) struct Steps {
    dev: Device,
    mlp: [Tensor; 2],
    block: [Tensor; 2],
    conv: Tensor,
}

impl Steps {
    pub fn new() -> Steps {
        let dev = Device::cpu_with(DeviceConfig::default());
        dev.manual_seed(1);
        let param = |shape: &[usize]| {
            let w = Tensor::randn(shape, &dev);
            w.requires_grad_(true);
            w
        };
        Steps {
            mlp: [param(&[784, 128]), param(&[128, 10])],
            block: [param(&[64, 192]), param(&[64, 64])],
            conv: param(&[8, 3, 3, 3]),
            dev,
        }
    }

    /// The loss and the gradients of `params`, lowered for `target`.
    fn lowered(&self, loss: Tensor, params: &[&Tensor], target: &Target) -> Lowered {
        loss.backward();
        let grads: Vec<Tensor> = (params.iter())
            .map(|w| w.grad().expect("a gradient"))
            .collect();
        params.iter().for_each(|w| w.zero_grad());
        let mut outputs = vec![&loss];
        outputs.extend(&grads);
        lowered_with_key(&outputs, target)
    }

    /// The 784-128-10 MLP's step with cross-entropy at `batch`.
    pub fn mlp(&self, batch: usize, target: &Target) -> Lowered {
        let [w1, w2] = &self.mlp;
        let x = Tensor::randn([batch, 784], &self.dev);
        let labels = Tensor::rand([batch], &self.dev) * 10.0;
        let y = labels.floor().cast(crate::DType::I32);
        let logits = x.matmul(w1).relu().matmul(w2);
        let loss = crate::nn::functional::cross_entropy(&logits, &y);
        self.lowered(loss, &[w1, w2], target)
    }

    /// A causal attention block (layer norm, four heads, GELU) over
    /// sequences of `t`.
    pub fn block(&self, t: usize, target: &Target) -> Lowered {
        use crate::nn::functional as F;
        let [wq, wo] = &self.block;
        let x = Tensor::randn([2, t, 64], &self.dev);
        let qkv = F::layer_norm(&x, &[64], None, None, 1e-5).matmul(wq);
        let head = |i: usize| {
            let part = qkv.slice(2, i * 64, (i + 1) * 64, 1);
            part.reshape([2, t, 4, 16]).transpose(1, 2)
        };
        let a = F::scaled_dot_product_attention(&head(0), &head(1), &head(2), None, true);
        let y = a.transpose(1, 2).reshape([2, t, 64]).matmul(wo).gelu();
        self.lowered((&y * &y).mean_all(), &[wq, wo], target)
    }

    /// A convolution, max pooling and a softmax over a batch of `batch`.
    pub fn cnn(&self, batch: usize, target: &Target) -> Lowered {
        use crate::nn::functional as F;
        let x = Tensor::randn([batch, 3, 12, 12], &self.dev);
        let c = F::conv2d(&x, &self.conv, None, (1, 1), (1, 1), (1, 1), 1).relu();
        let p = F::max_pool2d(&c, (2, 2), (2, 2), (0, 0));
        self.lowered(p.softmax(1).sum_all(), &[&self.conv], target)
    }
}

/// A lowered graph and its kernels (`lowered_with_key`).
pub(super) type Lowered = (GraphKey, Vec<KernelSource>);

/// The three training steps of `Steps`, each lowered at nine sizes (batch
/// sizes, sequence lengths) for three targets (lavapipe's, with binding
/// parts of 64 KiB so that sizes cross binding parts, and with a GPU's
/// choices), as a site's later sizes are lowered (with provenance kept, `SizeLiterals::Kept`):
/// wherever a kernel's guards all hold at another size's numbers, that
/// size's kernel has the same structure (`generic::structural_difference`
/// finds nothing but literals). The guards are all the kernels' code
/// depends on among the sizes: strategies, binding parts, the lane
/// matmul's tiles and packings.
#[test]
fn kernels_keep_their_structure_wherever_their_guards_hold() {
    let steps = Steps::new();
    let targets = [
        Target::lavapipe(),
        Target::lavapipe().with_max_binding(Some(64 << 10), 256),
        Target::lavapipe().with_gpu_choices(),
    ];
    let sizes = [64usize, 50, 33, 17, 9, 96, 100, 7, 2];
    for (t, target) in targets.iter().enumerate() {
        let programs: [(&str, &dyn Fn(usize) -> Lowered); 3] = [
            ("mlp", &|b| steps.mlp(b, target)),
            ("block", &|b| steps.block(b, target)),
            ("cnn", &|b| steps.cnn(b, target)),
        ];
        for (name, program) in programs {
            let lowered: Vec<_> = sizes.iter().map(|&b| program(b)).collect();
            let (same, differ) = unguarded_changes(&lowered);
            eprintln!("target {t}, {name}: {same} pairs of kernels alike where guards hold");
            assert!(differ.is_empty(), "target {t}, {name}: {differ:#?}");
            assert!(same > 30 * sizes.len(), "{name}: {same} pairs compared");
        }
    }
}

/// Scans, sorts, top-k, flips, padding, transposes, concatenation,
/// index selects, a gather's gradient (a scatter-add), a log-softmax's
/// gradient, max and mean, each over rows of 1 to 70,001: wherever one
/// length's guards hold at another's numbers, its kernels keep their
/// structure (strided views: `strided_views_keep_their_structure_...`).
#[test]
fn ops_over_row_lengths_keep_their_structure_wherever_their_guards_hold() {
    ops_over_rows(&mut |programs, lengths| alike_wherever_guards_hold(programs, lengths, 4));
}

/// Checks programs over the lengths they run at.
pub(super) type Check<'c> = &'c mut dyn FnMut(&[(&str, Program<'_>)], &[usize]);

/// Scans, sorts, top-k, flips, padding, transposes, concatenation, index
/// selects, a gather's gradient, a log-softmax's gradient, max and mean
/// (the programs `ops_over_row_lengths_...` lowers), and the lengths of
/// rows they run at, given to `check`.
pub(super) fn ops_over_rows(check: Check<'_>) {
    let lengths = [
        1usize, 2, 3, 4, 7, 64, 100, 255, 256, 1000, 4096, 5000, 70_001,
    ];
    fn ids(x: &Tensor, n: usize, len: usize) -> Tensor {
        let v: Vec<i32> = (0..n).map(|i| ((i * 7919) % len) as i32).collect();
        Tensor::from_vec(v, [n], x.device()).expect("ids")
    }
    let programs: Vec<(&str, Program<'_>)> = vec![
        ("cumsum1", &|x| vec![x.cumsum(1)]),
        ("cumsum0", &|x| vec![x.cumsum(0)]),
        ("sort", &|x| {
            let (v, i) = x.sort(1, false);
            vec![v, i]
        }),
        ("topk", &|x| {
            let (v, i) = x.topk(1, 1, true);
            vec![v, i]
        }),
        ("flip", &|x| vec![x.flip([1])]),
        ("pad", &|x| vec![x.pad(&[(0, 0), (1, 2)], 0.0f32)]),
        ("transpose", &|x| vec![&x.t() * 2.0]),
        ("cat", &|x| vec![Tensor::cat(&[x, x], 1)]),
        ("index_select", &|x| {
            vec![x.index_select(1, &ids(x, 5, x.shape()[1]))]
        }),
        ("gather_bwd", &|x| {
            x.requires_grad_(true);
            let n = x.shape()[1];
            let idx = ids(x, 3 * n, n).reshape([3, n]);
            let y = x.gather(1, &idx);
            (&y * &y).sum_all().backward();
            vec![y, x.grad().expect("g")]
        }),
        ("softmax_bwd", &|x| {
            x.requires_grad_(true);
            let y = x.log_softmax(1);
            (&y * &y).sum_all().backward();
            vec![y, x.grad().expect("g")]
        }),
        ("max_mean", &|x| vec![x.max([1], false), x.mean([0], false)]),
    ];
    check(&programs, &lengths);
}

/// Strided views whose strides and offsets change with a row's length:
/// narrowed, stepped, selected and transposed windows, a broadcast of a
/// column, a window written in place and a window's gradient, each over
/// rows of 1 to 5,000. Row-major or not, an offset of zero or not, a
/// stride of zero, four at a time: each of these decisions on a layout
/// is a guard on its strides and offset, so wherever one length's guards
/// hold at another's numbers, its kernels keep their structure.
#[test]
fn strided_views_keep_their_structure_wherever_their_guards_hold() {
    strided_views(&mut |programs, lengths| alike_wherever_guards_hold(programs, lengths, 2));
}

/// The strided views `strided_views_keep_their_structure_...` lowers, and
/// the lengths of rows they run at, given to `check`.
pub(super) fn strided_views(check: Check<'_>) {
    let lengths = [1usize, 2, 3, 4, 7, 8, 12, 16, 64, 100, 255, 256, 5000];
    let programs: Vec<(&str, Program<'_>)> = vec![
        ("narrow8", &|x| {
            vec![&x.narrow(1, 0, x.shape()[1].min(8)) * 2.0]
        }),
        ("step2", &|x| vec![&x.slice(1, 1, x.shape()[1], 2) * 2.0]),
        ("select_last", &|x| {
            vec![&x.select(1, x.shape()[1] - 1) * 2.0]
        }),
        ("middle_third", &|x| {
            let n = x.shape()[1];
            vec![&x.narrow(1, n / 3, n / 3) * 2.0]
        }),
        ("transposed_half", &|x| {
            let n = x.shape()[1];
            vec![&x.t().narrow(0, n / 2, n - n / 2) * 2.0]
        }),
        ("column_broadcast", &|x| {
            let n = x.shape()[1];
            vec![&x.narrow(1, n - 1, 1).expand([3, 8]) * 2.0]
        }),
        ("window_written", &|x| {
            let n = x.shape()[1];
            let y = x * 1.0;
            y.slice_assign(&[0..3, n / 2..n], 0.5f32);
            vec![y]
        }),
        ("narrowed_matmul", &|x| {
            let k = x.shape()[1].min(8);
            let w = Tensor::from_vec(vec![0.5f32; k * 12], [k, 12], x.device()).expect("w");
            vec![x.narrow(1, 0, k).matmul(&w)]
        }),
        ("transposed_matmul", &|x| {
            let w = Tensor::from_vec(vec![0.5f32; 3 * 8], [3, 8], x.device()).expect("w");
            vec![x.t().matmul(&w)]
        }),
        ("window_gradient", &|x| {
            x.requires_grad_(true);
            let n = x.shape()[1];
            let y = x.narrow(1, n / 4, n - n / 4);
            (&y * &y).sum_all().backward();
            vec![y, x.grad().expect("g")]
        }),
    ];
    check(&programs, &lengths);
}
