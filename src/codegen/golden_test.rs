//! One golden kernel per template built as IR, in both printers: the
//! WGSL printer and the IR listing (`Kernel`'s `Display`), generated for
//! a hand-written `Target` without an adapter. The files live in
//! `src/codegen/golden/`; `LAZYWGPU_BLESS=1 cargo test --lib golden`
//! rewrites them after an intended change (review the diff).

use std::path::PathBuf;

use super::KernelSource;
use super::bindings_test::{kernels_checked, kernels_lowered, kernels_of};
use super::validate::validate_wgsl;
use crate::kernel::{MatmulKernel, ReduceStrategy, SoftmaxStrategy, Strategy, Target};
use crate::nn::functional::layer_norm;
use crate::{Device, DeviceConfig, Tensor};

/// Compares `text` with golden file `name`, or writes it when blessing.
fn golden(name: &str, text: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/codegen/golden")
        .join(name);
    if std::env::var("LAZYWGPU_BLESS").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("golden folder");
        std::fs::write(&path, text).expect("golden file written");
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (LAZYWGPU_BLESS=1 writes it)", path.display()));
    assert!(
        text == want,
        "{name} differs from its golden file (LAZYWGPU_BLESS=1 rewrites it):\n{text}"
    );
}

/// Both printings of `kernel`, checked against `name.wgsl` and
/// `name.ir.txt` (the WGSL valid for naga first).
fn golden_kernel(name: &str, kernel: &KernelSource) {
    golden_kernel_text(name, &kernel.wgsl, &kernel.kernel.simplified().to_string());
}

/// Checks that `wgsl` is valid for naga, then compares it and the IR
/// listing with golden files `name`.
pub(super) fn golden_kernel_text(name: &str, wgsl: &str, ir: &str) {
    if let Err(e) = validate_wgsl(wgsl) {
        panic!("{name} is not valid WGSL: {e}");
    }
    golden(&format!("{name}.wgsl"), wgsl);
    golden(&format!("{name}.ir.txt"), ir);
}

/// The one kernel of `t` with strategy `strategy`.
fn kernel_with(t: &Tensor, strategy: Strategy) -> KernelSource {
    kernel_on(t, strategy, &Target::lavapipe())
}

/// The one kernel of `t` with strategy `strategy`, generated for
/// `target`.
fn kernel_on(t: &Tensor, strategy: Strategy, target: &Target) -> KernelSource {
    let mut found: Vec<KernelSource> = kernels_of(&[t], target)
        .into_iter()
        .filter(|k| k.strategy == strategy)
        .collect();
    assert_eq!(found.len(), 1, "one {strategy:?} kernel");
    found.remove(0)
}

#[test]
fn golden_kernels_in_both_printers() {
    let dev = Device::cpu_with(DeviceConfig::default());
    let x = Tensor::from_vec(vec![0.5f32; 4 * 24], [4, 24], &dev).expect("x");
    golden_norm_scan_and_sort_kernels(&dev, &x);
    golden_softmax_kernels(&dev, &x);
    golden_reduce_kernels(&dev, &x);
    golden_attention_and_elementwise_kernels(&x);
}

/// Row norms (layer norm with its weight in the epilogue, its gradient,
/// RMS norm), a running product and a sort, all over rows of `x` (4x24).
fn golden_norm_scan_and_sort_kernels(dev: &Device, x: &Tensor) {
    let w = Tensor::from_vec(vec![2.0f32; 24], [24], dev).expect("w");
    // Layer norm with its weight in the epilogue.
    let y = layer_norm(x, &[24], Some(&w), None, 1e-5);
    golden_kernel(
        "row_norm",
        &kernel_with(&y, Strategy::RowNorm { vec4: true }),
    );
    // Its gradient with respect to x.
    let xg = x.detach();
    xg.requires_grad_(true);
    let loss = layer_norm(&xg, &[24], None, None, 1e-5).sum_all();
    loss.backward();
    let gx = xg.grad().expect("a gradient");
    golden_kernel(
        "row_norm_backward",
        &kernel_with(&gx, Strategy::RowNorm { vec4: true }),
    );
    // A running product over a strided axis, with an epilogue.
    golden_kernel(
        "scan_cumprod",
        &kernel_with(&(x.cumprod(0) * 2.0f32), Strategy::Scan),
    );
    // A descending sort of rows of 24 (a bitonic network over 32).
    golden_kernel(
        "sort_rows",
        &kernel_with(&x.argsort(1, true), Strategy::Sort),
    );
    // The radix select of a top-5 of rows of 1,500 (the indices it
    // picks, in index order; a sort of the five orders them).
    let long = Tensor::from_vec(vec![0.5f32; 2 * 1500], [2, 1500], dev).expect("long");
    golden_kernel(
        "topk_select",
        &kernel_with(&long.topk(5, -1, true).1, Strategy::Select),
    );
    // The second radix pass of a sort of rows of 2,048 (lavapipe's): its
    // blocks' digit counts and the order moved, both walking the first
    // pass's order.
    let rows = Tensor::from_vec(vec![0.5f32; 2 * 2048], [2, 2048], dev).expect("rows");
    let passes: Vec<KernelSource> =
        kernels_lowered(&[&rows.argsort(1, false)], &Target::lavapipe())
            .into_iter()
            .filter(|k| k.strategy == Strategy::Sort)
            .collect();
    assert_eq!(passes.len(), 16, "eight passes of two sorting kernels");
    golden_kernel("radix_count", &passes[2]);
    golden_kernel("radix_scatter", &passes[3]);
    // RMS norm, forward.
    golden_kernel(
        "row_rms_norm",
        &kernel_with(
            &crate::nn::functional::rms_norm(x, &[24], None, Some(1e-6)),
            Strategy::RowNorm { vec4: true },
        ),
    );
}

/// The softmax kernels: a row an invocation, read as vec4s, and a
/// workgroup a row.
fn golden_softmax_kernels(dev: &Device, x: &Tensor) {
    // A log-softmax over a strided axis, a row an invocation.
    let odd = Tensor::from_vec(vec![0.25f32; 7 * 9], [7, 9], dev).expect("odd");
    golden_kernel(
        "softmax_per_row",
        &kernel_with(
            &odd.log_softmax(0),
            Strategy::Softmax(SoftmaxStrategy::RowPerInvocation),
        ),
    );
    // A softmax over rows of 24 read as vec4s, and a log-softmax over
    // rows of 300, a workgroup a row.
    golden_kernel(
        "softmax_vec4",
        &kernel_with(
            &x.softmax(1),
            Strategy::Softmax(SoftmaxStrategy::RowPerInvocationVec4),
        ),
    );
    let wide = Tensor::from_vec(vec![0.5f32; 2 * 300], [2, 300], dev).expect("wide");
    golden_kernel(
        "softmax_per_workgroup",
        &kernel_with(
            &wide.log_softmax(1),
            Strategy::Softmax(SoftmaxStrategy::RowPerWorkgroup),
        ),
    );
}

/// The reduction kernels: an output an invocation, a workgroup tree an
/// output, and the first stage of a split sum read four at a time.
fn golden_reduce_kernels(dev: &Device, x: &Tensor) {
    // Row sums and a first-NaN argmax, an output an invocation.
    let per_invocation = Strategy::Reduce(ReduceStrategy::PerInvocation);
    golden_kernel(
        "reduce_sum",
        &kernel_with(&x.sum([1], false), per_invocation),
    );
    golden_kernel(
        "reduce_argmax",
        &kernel_with(&x.argmax(0, false), per_invocation),
    );
    // A first-NaN argmax over rows of 300, a workgroup tree an output
    // (by the GPU rule: lavapipe's takes a tree from 4,096 elements).
    let long = Tensor::from_vec(vec![1.0f32; 2 * 300], [2, 300], dev).expect("long");
    let gpu_rule = Target::lavapipe().with_reduce_rule(crate::kernel::ReduceRule::GPU);
    golden_kernel(
        "reduce_argmax_tree",
        &kernel_on(
            &long.argmax(1, false),
            Strategy::Reduce(ReduceStrategy::WorkgroupTree),
            &gpu_rule,
        ),
    );
    // The first stage of a split sum of 2^17 elements, read four at a time.
    let flat = Tensor::from_vec(vec![1.0f32; 1 << 17], [1 << 17], dev).expect("flat");
    golden_kernel(
        "reduce_sum_by_fours",
        &kernel_with(
            &flat.sum([0], false),
            Strategy::Reduce(ReduceStrategy::SumByFours),
        ),
    );
}

/// Fused attention (on its own device, with fused attention on) and the
/// elementwise kernels of `x`, checked and read as vec4s.
fn golden_attention_and_elementwise_kernels(x: &Tensor) {
    // Causal fused attention, a query row an invocation.
    let fused = Device::cpu_with(DeviceConfig {
        fused_attention: true,
        ..DeviceConfig::default()
    });
    let q = Tensor::from_vec(vec![0.5f32; 2 * 5 * 4], [2, 5, 4], &fused).expect("q");
    golden_kernel(
        "attention_causal",
        &kernel_with(
            &crate::nn::functional::scaled_dot_product_attention(&q, &q, &q, None, true),
            Strategy::Attention,
        ),
    );
    // The same chain in anomaly mode: its checks legalised into an `if`
    // around an atomic maximum of the flags.
    let checked = kernels_checked(&[&(x * 3.0).exp().log()], &Target::lavapipe(), true);
    let [kernel] = &checked[..] else {
        panic!("one checked kernel, got {}", checked.len())
    };
    golden_kernel("elementwise_checked", kernel);
    // An elementwise kernel, four elements an invocation.
    let e = (x * 3.0).exp();
    golden_kernel(
        "elementwise_vec4",
        &kernel_with(&e, Strategy::Elementwise { vec4: true }),
    );
    golden_slices_gradients(x);
    // Four at a time, with a transposed view, a column broadcast and a
    // causal mask of `arange`s each computed a lane at a time.
    let x4 = x.slice(1, 0, 4, 1);
    let col = x.slice(1, 0, 1, 1);
    let gathered = (&x4 + &x4.t() * &col).tril(1);
    golden_kernel(
        "elementwise_gathered",
        &kernel_with(&gathered, Strategy::Elementwise { vec4: true }),
    );
}

/// The gradient of three column slices of `x` (4x24; q, k and v taken
/// out of one projection): three strided scatters into zeros, summed.
/// Windows 7 columns wide over 3 rows: one element at a time, each
/// window read only inside it (an `if` around each load); windows 8
/// columns wide over 4 rows: four at a time, each group wholly inside a
/// window or outside it.
fn golden_slices_gradients(x: &Tensor) {
    let cases = [
        ("slices_gradient", 3, 7, false),
        ("slices_gradient_vec4", 4, 8, true),
    ];
    for (name, rows, width, vec4) in cases {
        let xg = x.slice(0, 0, rows, 1).slice(1, 0, 3 * width, 1).detach();
        xg.requires_grad_(true);
        let parts = [0, 1, 2].map(|p| xg.slice(1, p * width, (p + 1) * width, 1));
        let loss = (&parts[0] * 2.0 + &parts[1] * 3.0 + &parts[2] * 4.0)
            .exp()
            .sum_all();
        loss.backward();
        let grad = xg.grad().expect("a gradient");
        let kernel = kernel_with(&grad, Strategy::Elementwise { vec4 });
        let listing = kernel.kernel.simplified().to_string();
        if width % 4 != 0 {
            assert_window_reads_inside_ifs(&listing);
        }
        golden_kernel(name, &kernel);
    }
}

/// Checks that every load of `listing` (at least three) is inside an
/// `if` (indented).
fn assert_window_reads_inside_ifs(listing: &str) {
    let lines: Vec<&str> = listing.lines().collect();
    let loads: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains("= load in"))
        .collect();
    assert!(loads.len() >= 3, "{listing}");
    for &i in &loads {
        assert!(
            lines[i].starts_with("  "),
            "a load outside its window's if:\n{listing}"
        );
    }
}

/// The matmul kernels: a 5x24 by (transposed) 24x8 product with a bias
/// and relu in its epilogue (stored four columns at a time), by the
/// 256-invocation and the 64-invocation tiled kernels, and by the lane
/// kernel with its packing kernels (A's through a plain layout, B's
/// through the transpose).
#[test]
fn golden_matmul_kernels() {
    let dev = Device::cpu_with(DeviceConfig::default());
    let a = Tensor::from_vec(vec![0.5f32; 5 * 24], [5, 24], &dev).expect("a");
    let w = Tensor::from_vec(vec![0.25f32; 8 * 24], [8, 24], &dev).expect("w");
    let y = (a.matmul(&w.t()) + 1.0).relu();
    for (name, matmul) in [
        ("matmul_tiled", MatmulKernel::Tiled),
        ("matmul_blocked", MatmulKernel::Blocked),
    ] {
        let target = Target {
            matmul,
            ..Target::lavapipe()
        };
        let strategy = Strategy::Matmul {
            kernel: matmul,
            tile: None,
            vec4_out: true,
        };
        golden_kernel(name, &kernel_on(&y, strategy, &target));
    }
    let lavapipe = Target::lavapipe();
    let kernels = kernels_of(&[&y], &lavapipe);
    let [pack_a, pack_b, lanes] = &kernels[..] else {
        panic!("two packing kernels and the lane matmul")
    };
    assert_eq!(pack_a.strategy, Strategy::Pack);
    assert_eq!(pack_b.strategy, Strategy::Pack);
    assert!(matches!(lanes.strategy, Strategy::Matmul { .. }));
    golden_kernel("matmul_pack_a", pack_a);
    golden_kernel("matmul_pack_b", pack_b);
    golden_kernel("matmul_lanes", lanes);
    // Rows of six columns: the epilogue stored an element at a time.
    let w6 = Tensor::from_vec(vec![0.25f32; 6 * 24], [6, 24], &dev).expect("w6");
    let y6 = (a.matmul(&w6.t()) + 1.0).relu();
    let by_elements = kernels_of(&[&y6], &lavapipe)
        .pop()
        .expect("the lane matmul");
    assert!(matches!(
        by_elements.strategy,
        Strategy::Matmul {
            vec4_out: false,
            ..
        }
    ));
    golden_kernel("matmul_lanes_by_elements", &by_elements);
    let listed: Vec<(&str, bool)> = (lanes.candidates.iter())
        .map(|(name, valid)| (name.as_str(), *valid))
        .collect();
    assert_eq!(
        listed,
        [
            ("tiled", true),
            ("blocked", true),
            ("lanes", true),
            ("coop", false)
        ]
    );
}

/// The cooperative-matrix matmul on an `f16` product (its operands cast
/// from `f32` in its prologue, a bias and relu in its epilogue) for an
/// adapter of 32-lane subgroups: a workgroup of four subgroups, `f16`
/// tiles and an `f32` output tile in workgroup memory, valid for naga
/// with cooperative matrices; an `f32` product on the same target takes
/// the tiled kernel.
#[test]
fn golden_coop_matmul_kernel() {
    use crate::DType;
    use crate::kernel::CoopAdapter;
    let dev = Device::cpu_with(DeviceConfig::default());
    let a = Tensor::from_vec(vec![0.5f32; 5 * 24], [5, 24], &dev).expect("a");
    let w = Tensor::from_vec(vec![0.25f32; 6 * 24], [6, 24], &dev).expect("w");
    let product = |a: &Tensor, w: &Tensor| (a.matmul(&w.t()) + 1.0).relu();
    let half = product(&a.to_dtype(DType::F16), &w.to_dtype(DType::F16));
    let adapter = CoopAdapter { subgroup: 32 };
    let coop = MatmulKernel::Coop(adapter);
    let mut target = Target {
        matmul: coop,
        ..Target::lavapipe()
    };
    target.adapter_matmuls.coop = Some(adapter);
    let strategy = Strategy::Matmul {
        kernel: coop,
        tile: None,
        vec4_out: false,
    };
    let kernel = kernel_on(&half, strategy, &target);
    assert_eq!(kernel.kernel.entry.workgroup_size, 128);
    let bytes: usize = (kernel.kernel.entry.arrays.iter())
        .map(|a| a.len * if a.element.dtype == DType::F16 { 2 } else { 4 })
        .sum();
    assert_eq!(bytes, CoopAdapter::WORKGROUP_BYTES);
    assert!(kernel.kernel.helpers.cooperative_matrix && kernel.kernel.helpers.f16);
    golden_kernel("coop_matmul_f16", &kernel);
    let all_valid = ["tiled", "blocked", "lanes", "coop"].map(|k| (k.to_string(), true));
    assert_eq!(kernel.candidates, all_valid);
    // Rows of six columns: stored one element at a time.
    let tiled = Strategy::Matmul {
        kernel: MatmulKernel::Tiled,
        tile: None,
        vec4_out: false,
    };
    let f32_product = kernel_on(&product(&a, &w), tiled, &target);
    let coop_invalid = [("coop", false)].map(|(k, v)| (k.to_string(), v));
    assert_eq!(
        f32_product.candidates[3..],
        coop_invalid,
        "coop computes f16 only"
    );
}

/// Where K makes the K steps and their rows pass lavapipe's loop budget
/// (70,000: 4,375 steps of 16 rows), the rows of each step are unrolled
/// in pairs (a budget of 13 rows a step), in both tiled kernels.
#[test]
fn matmul_rows_of_a_k_step_unroll_past_the_loop_budget() {
    let dev = Device::cpu_with(DeviceConfig::default());
    let long = 70_000;
    let a = Tensor::from_vec(vec![0.5f32; 3 * long], [3, long], &dev).expect("a");
    let b = Tensor::from_vec(vec![0.5f32; long * 5], [long, 5], &dev).expect("b");
    let y = a.matmul(&b);
    for matmul in [MatmulKernel::Tiled, MatmulKernel::Blocked] {
        let target = Target {
            matmul,
            ..Target::lavapipe()
        };
        let strategy = Strategy::Matmul {
            kernel: matmul,
            tile: None,
            vec4_out: false,
        };
        let kernel = kernel_on(&y, strategy, &target);
        validate_wgsl(&kernel.wgsl).expect("valid WGSL");
        assert!(
            kernel.wgsl.contains("_run < 16u; ") && kernel.wgsl.contains("_run + 2u) {"),
            "{matmul:?}: the rows of a K step in pairs:\n{}",
            kernel.wgsl
        );
    }
}
