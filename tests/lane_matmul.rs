//! The lane matmul reading its left operand in place (lavapipe's matmul),
//! four K values a load where A lies row-major in memory: values against
//! f64 loops written here (`common::matmul_f64`), and which read each
//! product's kernel made, from its dumped plan.

mod common;

use lazywgpu::{Device, DeviceConfig, MatmulChoice, Tensor};

/// A device that uses the lane matmul and dumps its kernels into a
/// directory of its own (`None`: no GPU adapter; `common::gpu` fails the
/// test instead under `LAZYWGPU_REQUIRE_GPU=1`).
fn lane_device(tag: &str) -> Option<(Device, std::path::PathBuf)> {
    common::gpu()?;
    // Tests run in parallel and some share tags: each device dumps into
    // a directory of its own, or one test reads another's plans.
    static DEVICES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = DEVICES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("lazywgpu-lane-{tag}-{pid}-{n}"));
    std::fs::remove_dir_all(&dir).ok();
    let config = DeviceConfig {
        matmul: Some(MatmulChoice::Lanes),
        dump_dir: Some(dir.clone()),
        ..DeviceConfig::default()
    };
    Some((Device::gpu_with(config).expect("a GPU device"), dir))
}

/// How the dumped lane matmul read A, which these sizes make it read in
/// place: `Some(true)` four K values a load, `Some(false)` one at a time;
/// `None` where the lane kernel cannot run (an adapter without one fixed
/// subgroup size computes with another kernel).
fn a_read_four_at_a_time(dir: &std::path::Path) -> Option<bool> {
    let plans = common::dumped_plans(dir);
    let plan = plans.iter().find(|p| p.contains("kernel: Lanes"))?;
    assert!(plan.contains("a_in_place: true"), "A was packed:\n{plan}");
    Some(plan.lines().any(|l| l.contains(": f32x4 = read n")))
}

/// Checks the product `got` of `a` ([bsz, m, k] as the product reads it)
/// and `b` ([k, n], or [bsz, k, n] where `b_batched`) against f64 loops.
fn check(got: &[f32], a: &[f32], b: &[f32], dims: (usize, usize, usize, usize), b_batched: bool) {
    let (bsz, m, k, n) = dims;
    let want: Vec<f32> = if b_batched {
        (0..bsz)
            .flat_map(|i| {
                let a = &a[i * m * k..(i + 1) * m * k];
                common::matmul_f64(a, &b[i * k * n..(i + 1) * k * n], (1, m, k, n))
            })
            .collect()
    } else {
        common::matmul_f64(a, b, dims)
    };
    common::assert_close(got, &want, 1e-4, 1e-4, "lane matmul, A in place");
}

/// A row-major window of a stored matrix (offset 4 rows of 1024), large
/// enough to be read in place: four K values a load.
#[test]
fn a_window_of_a_stored_matrix_is_read_four_values_a_load() {
    let Some((dev, dir)) = lane_device("window") else {
        return;
    };
    let (m, k, n) = (1024, 1024, 20);
    let whole = common::data((m + 6) * k, 1);
    let b = common::data(k * n, 2);
    let a = Tensor::from_vec(whole.clone(), [m + 6, k], &dev).unwrap();
    let a = a.slice(0, 4, 4 + m, 1);
    let got = a.matmul(&Tensor::from_vec(b.clone(), [k, n], &dev).unwrap());
    let got = got.to_vec::<f32>().unwrap();
    check(&got, &whole[4 * k..(4 + m) * k], &b, (1, m, k, n), false);
    if let Some(vec4) = a_read_four_at_a_time(&dir) {
        assert!(vec4, "A was read one value a load");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// One matrix broadcast over a batch (read once per entry) is read four
/// values a load, and so is a batch of stored matrices whose rows start
/// groups of four (a convolution's weight gradient reads the output
/// gradient so); where the contraction is a size marked dynamic (often
/// a sequence length, whose remainder by four changes between steps),
/// one value a load, so that the kernel stays one over lengths.
#[test]
fn broadcast_and_fixed_batched_operands_are_read_four_values_a_load() {
    let cases = [
        ("batched", false, false),
        ("broadcast", true, false),
        ("batched-dynamic-k", false, true),
    ];
    for (tag, broadcast, dynamic_k) in cases {
        let Some((dev, dir)) = lane_device(tag) else {
            return;
        };
        // One matrix read by every entry is read in place from 4 MiB, a
        // batch of them from 256 KiB (`kernel::lane_packing`).
        let m = if broadcast { 1025 } else { 97 };
        let (bsz, k, n) = (3, 1024, 12);
        let a_rows = if broadcast { m } else { bsz * m };
        let a_data = common::data(a_rows * k, 3);
        let b = common::data(bsz * k * n, 4);
        let a = if broadcast {
            let a = Tensor::from_vec(a_data.clone(), [m, k], &dev).unwrap();
            a.unsqueeze(0).expand([bsz, m, k])
        } else {
            Tensor::from_vec(a_data.clone(), [bsz, m, k], &dev).unwrap()
        };
        let a = if dynamic_k { a.mark_dynamic(2) } else { a };
        let got = a.matmul(&Tensor::from_vec(b.clone(), [bsz, k, n], &dev).unwrap());
        let got = got.to_vec::<f32>().unwrap();
        let a_full: Vec<f32> = if broadcast {
            a_data.repeat(bsz)
        } else {
            a_data
        };
        check(&got, &a_full, &b, (bsz, m, k, n), true);
        if let Some(vec4) = a_read_four_at_a_time(&dir) {
            assert_eq!(vec4, !dynamic_k, "{tag}: A read four values a load");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// A computed earlier in the step (a softmax, stored by its own kernel),
/// and a K that is not a multiple of four (rows do not start groups of
/// four: read one value a load).
#[test]
fn stored_results_and_odd_contractions_read_in_place() {
    let Some((dev, dir)) = lane_device("softmax") else {
        return;
    };
    let (m, k, n) = (1024, 1024, 8);
    let x = common::data(m * k, 5);
    let b = common::data(k * n, 6);
    let a = Tensor::from_vec(x, [m, k], &dev).unwrap().softmax(-1);
    // Read after the product, which reads the softmax from where its own
    // kernel stored it in the same step.
    let got = a.matmul(&Tensor::from_vec(b.clone(), [k, n], &dev).unwrap());
    let got = got.to_vec::<f32>().unwrap();
    check(&got, &a.to_vec::<f32>().unwrap(), &b, (1, m, k, n), false);
    if let Some(vec4) = a_read_four_at_a_time(&dir) {
        assert!(vec4, "a stored softmax was read one value a load");
    }
    std::fs::remove_dir_all(&dir).ok();

    let Some((dev, dir)) = lane_device("odd-k") else {
        return;
    };
    let (m, k, n) = (1024, 1027, 8);
    let a = common::data(m * k, 7);
    let b = common::data(k * n, 8);
    let got = Tensor::from_vec(a.clone(), [m, k], &dev)
        .unwrap()
        .matmul(&Tensor::from_vec(b.clone(), [k, n], &dev).unwrap());
    let got = got.to_vec::<f32>().unwrap();
    check(&got, &a, &b, (1, m, k, n), false);
    if let Some(vec4) = a_read_four_at_a_time(&dir) {
        assert!(!vec4, "K = 1027 was read four values a load");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Operands that must be read one value a load: a matrix shared by the
/// batch that is a reshape of a column window (its rows are not the
/// window's rows), a window starting off a group of four, and a value B
/// reads in place as well (`x @ x.T`: one way of reading it, the bindings
/// the plan counted).
#[test]
fn operands_not_laid_out_in_groups_of_four_are_read_one_value_a_load() {
    let Some((dev, dir)) = lane_device("reshaped-window") else {
        return;
    };
    // [2048, 1024] stored, its first 512 columns as a [1024, 1024] matrix
    // shared by a batch of 3.
    let (bsz, m, k, n) = (3, 1024, 1024, 8);
    let whole = common::data(2048 * 1024, 9);
    let b = common::data(bsz * k * n, 10);
    let x = Tensor::from_vec(whole.clone(), [2048, 1024], &dev).unwrap();
    let a = x.slice(1, 0, 512, 1).reshape([m, k]);
    let got = a.matmul(&Tensor::from_vec(b.clone(), [bsz, k, n], &dev).unwrap());
    let got = got.to_vec::<f32>().unwrap();
    let window: Vec<f32> = (0..2048)
        .flat_map(|r| whole[r * 1024..r * 1024 + 512].to_vec())
        .collect();
    check(&got, &window.repeat(bsz), &b, (bsz, m, k, n), true);
    if let Some(vec4) = a_read_four_at_a_time(&dir) {
        assert!(
            !vec4,
            "a reshaped column window was read four values a load"
        );
    }
    std::fs::remove_dir_all(&dir).ok();

    // Offset 2: rows start two elements past a group of four.
    let Some((dev, dir)) = lane_device("offset-2") else {
        return;
    };
    let (m, k, n) = (1024, 1024, 8);
    let flat = common::data(m * k + 2, 11);
    let b = common::data(k * n, 12);
    let a = Tensor::from_vec(flat.clone(), [m * k + 2], &dev).unwrap();
    let a = a.narrow(0, 2, m * k).reshape([m, k]);
    let got = a.matmul(&Tensor::from_vec(b.clone(), [k, n], &dev).unwrap());
    let got = got.to_vec::<f32>().unwrap();
    check(&got, &flat[2..], &b, (1, m, k, n), false);
    if let Some(vec4) = a_read_four_at_a_time(&dir) {
        assert!(!vec4, "rows at offset 2 were read four values a load");
    }
    std::fs::remove_dir_all(&dir).ok();

    // x @ x.T with few rows, x computed in the step (a softmax): B, a
    // view of the same value, is read in place too.
    let Some((dev, dir)) = lane_device("x-xt") else {
        return;
    };
    let (m, k) = (16, 65_536);
    let y = Tensor::from_vec(common::data(m * k, 13), [m, k], &dev).unwrap();
    let x = y.softmax(-1) * 1000.0;
    let got = x.matmul(&x.t()).to_vec::<f32>().unwrap();
    let xs = x.to_vec::<f32>().unwrap();
    let xt: Vec<f32> = (0..k * m).map(|e| xs[(e % m) * k + e / m]).collect();
    check(&got, &xs, &xt, (1, m, k, m), false);
    let plans = common::dumped_plans(&dir);
    if let Some(plan) = plans.iter().find(|p| p.contains("kernel: Lanes")) {
        let b_in_place = plan.contains("b_in_place: true");
        let vec4 = plan.contains(": f32x4 = read n");
        assert!(b_in_place && !vec4, "x read two ways, or B packed:\n{plan}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The lane matmul's plan, and how many of its packing kernels were
/// done by copies and how many were dispatched (`None` where the lane
/// kernel did not run).
fn packing(dir: &std::path::Path) -> Option<(String, usize, usize)> {
    let plans = common::dumped_plans(dir);
    let plan = plans.iter().find(|p| p.contains("kernel: Lanes"))?;
    let packs: Vec<&String> = plans
        .iter()
        .filter(|p| p.contains("strategy: Pack"))
        .collect();
    let copies = packs
        .iter()
        .filter(|p| p.contains("done by a copy"))
        .count();
    Some((plan.clone(), copies, packs.len() - copies))
}

/// The shape of `bsz` matrices of `r` x `c`: without a batch dim for one.
fn batched_shape(bsz: usize, (r, c): (usize, usize)) -> Vec<usize> {
    if bsz == 1 {
        vec![r, c]
    } else {
        vec![bsz, r, c]
    }
}

/// How a case lays out A: row-major, a window of a larger stored
/// matrix (rows 3..), or a view of its stored transpose.
#[derive(Clone, Copy, Debug)]
enum ALaid {
    RowMajor,
    Window,
    Transposed,
}

/// Operands that lie in memory as their packed textures hold them are
/// packed by buffer-to-texture copies (row-major f32 rows of a multiple
/// of 64 elements), the others by their kernels; a view of a stored
/// transpose is packed as that transpose lies (its texels then hold four
/// rows at one K, or four K values of a column), by a copy where its
/// rows allow. Values against f64 loops, with a NaN in A and an infinity
/// in B.
#[test]
fn operands_lying_as_their_textures_hold_them_are_packed_by_copies() {
    use ALaid::*;
    // (tag, batch, m, k, n, A, B a view of its transpose, copies and
    // packing kernels, A and B read from copies of their transposes).
    #[rustfmt::skip]
    let cases = [
        ("window", 1, 96, 128, 64, Window, false, (2, 0), (false, false)),
        ("batched", 3, 40, 64, 128, RowMajor, false, (2, 0), (false, false)),
        ("n-100", 1, 96, 128, 100, RowMajor, false, (1, 1), (false, false)),
        ("a-t", 1, 128, 128, 64, Transposed, false, (2, 0), (true, false)),
        ("a-t-batched", 2, 64, 96, 64, Transposed, false, (2, 0), (true, false)),
        ("a-t-m-96", 1, 96, 128, 64, Transposed, false, (1, 1), (true, false)),
        ("a-t-k-66", 1, 64, 66, 64, Transposed, false, (2, 0), (true, false)),
        ("a-t-m-30", 1, 30, 66, 64, Transposed, false, (1, 1), (true, false)),
        ("b-t", 1, 96, 128, 36, RowMajor, true, (2, 0), (false, true)),
        ("b-t-batched", 2, 40, 64, 20, RowMajor, true, (2, 0), (false, true)),
        ("b-t-k-30", 1, 40, 30, 36, RowMajor, true, (0, 2), (false, true)),
        ("both-t", 1, 64, 128, 40, Transposed, true, (2, 0), (true, true)),
    ];
    for (tag, bsz, m, k, n, a_laid, b_t, counts, transposed) in cases {
        let Some((dev, dir)) = lane_device(tag) else {
            return;
        };
        let mut a_data = common::data(bsz * m * k, 13);
        a_data[5 * k + 3] = f32::NAN;
        let mut b_data = common::data(bsz * k * n, 14);
        b_data[2 * n + 7] = f32::INFINITY;
        // Each entry's matrix transposed, entry after entry.
        let transpose = |x: &[f32], (r, c): (usize, usize)| -> Vec<f32> {
            (0..bsz * r * c)
                .map(|e| {
                    let (b, j, i) = (e / (r * c), e / r % c, e % r);
                    x[b * r * c + i * c + j]
                })
                .collect()
        };
        let shape = |r: usize, c: usize| batched_shape(bsz, (r, c));
        let a = match a_laid {
            RowMajor => Tensor::from_vec(a_data.clone(), shape(m, k), &dev).unwrap(),
            Window => {
                let mut whole = common::data(3 * k, 15);
                whole.extend_from_slice(&a_data);
                let x = Tensor::from_vec(whole, [m + 3, k], &dev).unwrap();
                x.slice(0, 3, m + 3, 1)
            }
            Transposed => {
                let x = Tensor::from_vec(transpose(&a_data, (m, k)), shape(k, m), &dev).unwrap();
                x.transpose(-2, -1)
            }
        };
        let b = if b_t {
            let w = Tensor::from_vec(transpose(&b_data, (k, n)), shape(n, k), &dev).unwrap();
            w.transpose(-2, -1)
        } else {
            Tensor::from_vec(b_data.clone(), shape(k, n), &dev).unwrap()
        };
        let got = a.matmul(&b).to_vec::<f32>().unwrap();
        check(&got, &a_data, &b_data, (bsz, m, k, n), true);
        if let Some((plan, copies, packs)) = packing(&dir) {
            assert_eq!(
                (copies, packs),
                counts,
                "{tag}: copies and packing kernels\n{plan}"
            );
            let flags = (
                plan.contains("a_transposed: true"),
                plan.contains("b_transposed: true"),
            );
            assert_eq!(
                flags, transposed,
                "{tag}: operands read from transposes\n{plan}"
            );
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// B's texture holds its columns in blocks of 16 texels, a layer each,
/// where that takes at most 64 layers (a subgroup's columns then lie in
/// one 256-byte stream down K), else blocks as wide as the texture
/// allows; a B lying row-major in memory is copied a block at a time,
/// its rows past K (padding to whole texels of A) zeroed, and one that
/// does not (N not a multiple of 64) packed by a kernel into the same
/// blocks, the last one partial. Values against f64 loops, with a NaN in
/// A and an infinity in B.
#[test]
fn b_is_packed_in_narrow_column_blocks_where_their_layers_are_few() {
    // (tag, batch, m, k, n, B's texture (width, height, layers), B by a
    // copy).
    #[rustfmt::skip]
    let cases = [
        ("n-1024", 1, 40, 64, 1024, (16, 64, 16), true),
        ("batched-k-66", 3, 40, 66, 128, (16, 68, 6), true),
        ("wide", 5, 24, 8, 1024, (256, 8, 5), true),
        ("n-1000", 1, 40, 64, 1000, (16, 64, 16), false),
    ];
    for (tag, bsz, m, k, n, texture, copied) in cases {
        let Some((dev, dir)) = lane_device(&format!("blocks-{tag}")) else {
            return;
        };
        // First a product whose B fills a texture of the same size with
        // NaNs (K padded to whole texels): the pool hands that texture
        // on, so rows past K that the copy did not zero would reach the
        // product below.
        let k_padded = usize::div_ceil(k, 4) * 4;
        let dirty_a = Tensor::ones(batched_shape(bsz, (m, k_padded)), &dev);
        let dirty_b = Tensor::full(batched_shape(bsz, (k_padded, n)), f32::NAN, &dev);
        dirty_a.matmul(&dirty_b).to_vec::<f32>().unwrap();
        std::fs::remove_dir_all(&dir).ok();
        let mut a_data = common::data(bsz * m * k, 21);
        a_data[3 * k + 1] = f32::NAN;
        let mut b_data = common::data(bsz * k * n, 22);
        b_data[n + 700 % n] = f32::INFINITY;
        let shape = |r: usize, c: usize| batched_shape(bsz, (r, c));
        let a = Tensor::from_vec(a_data.clone(), shape(m, k), &dev).unwrap();
        let b = Tensor::from_vec(b_data.clone(), shape(k, n), &dev).unwrap();
        let got = a.matmul(&b).to_vec::<f32>().unwrap();
        check(&got, &a_data, &b_data, (bsz, m, k, n), true);
        if let Some((plan, _, _)) = packing(&dir) {
            let (w, h, l) = texture;
            assert!(
                plan.contains(&format!("({w}, {h}, {l})]")),
                "{tag}: B's texture is not {texture:?}\n{plan}"
            );
            assert!(
                plan.contains("b_in_place: false"),
                "{tag}: B read in place\n{plan}"
            );
            let blocks = n.div_ceil(4).div_ceil(w);
            let copy = format!("({w}, {h}, {l}), {k} rows a layer");
            let b_copy = common::dumped_plans(&dir)
                .into_iter()
                .find(|p| p.contains(&copy));
            assert_eq!(b_copy.is_some(), copied, "{tag}: B copied\n{plan}");
            if let Some(p) = b_copy {
                let line = format!("{} bytes a row, {blocks} column blocks a matrix", n * 4);
                assert!(p.contains(&line), "{tag}: B's copy\n{p}");
            }
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// The texels of columns a lane computes in the dumped lane matmul
/// (`None` where the lane kernel did not run).
fn texels_a_lane(dir: &std::path::Path) -> Option<String> {
    let plans = common::dumped_plans(dir);
    let plan = plans.iter().find(|p| p.contains("kernel: Lanes"))?;
    let at = plan.find("texels: ")? + "texels: ".len();
    Some(
        plan[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect(),
    )
}

/// Products over a packed B take wide tiles (32 rows, two texels of
/// columns a lane, side by side), at sizes wide for subgroups of 8 to 32
/// lanes: lanes whose second texel, or both, lie past N (250 texels in
/// tiles of 128 for 998 columns; 127 texels for 506 columns, the last
/// lane's first texel inside N and its second past it), columns not a
/// multiple of four (stored an element at a time), A computed (packed),
/// A and B as their stored transposes lie (read through transposed
/// texels), a batch with an epilogue; against f64 loops.
#[test]
fn products_over_a_packed_b_compute_two_texels_a_lane() {
    let cases = [
        "ragged-n",
        "odd-texels",
        "computed-a",
        "transposed-a",
        "transposed-b",
        "batched",
    ];
    for tag in cases {
        let Some((dev, dir)) = lane_device(tag) else {
            return;
        };
        let (bsz, m, k, n) = match tag {
            "ragged-n" => (1, 1024, 256, 998),
            "odd-texels" => (1, 512, 100, 506),
            "batched" => (4, 256, 128, 254),
            _ => (1, 512, 200, 510),
        };
        let a_data = common::data(bsz * m * k, 5);
        let b_data = common::data(bsz * k * n, 6);
        let a_shape: Vec<usize> = if bsz > 1 { vec![bsz, m, k] } else { vec![m, k] };
        let b_shape: Vec<usize> = if bsz > 1 { vec![bsz, k, n] } else { vec![k, n] };
        let a = match tag {
            // A stored as its transpose: [k, m] holding A^T.
            "transposed-a" => {
                let t: Vec<f32> = (0..k * m).map(|i| a_data[(i % m) * k + i / m]).collect();
                Tensor::from_vec(t, [k, m], &dev).unwrap().t()
            }
            _ => Tensor::from_vec(a_data.clone(), a_shape.as_slice(), &dev).unwrap(),
        };
        let a = if tag == "computed-a" { a.relu() } else { a };
        let b = match tag {
            "transposed-b" => {
                let t: Vec<f32> = (0..n * k).map(|i| b_data[(i % k) * n + i / k]).collect();
                Tensor::from_vec(t, [n, k], &dev).unwrap().t()
            }
            _ => Tensor::from_vec(b_data.clone(), b_shape.as_slice(), &dev).unwrap(),
        };
        let product = a.matmul(&b);
        let got = match tag {
            "batched" => (product * 0.5 + 1.0).relu(),
            _ => product,
        };
        let got = got.to_vec::<f32>().unwrap();
        let a_used: Vec<f32> = match tag {
            "computed-a" => a_data.iter().map(|v| v.max(0.0)).collect(),
            _ => a_data,
        };
        let mut want = Vec::new();
        for i in 0..bsz {
            let a = &a_used[i * m * k..(i + 1) * m * k];
            let b = &b_data[i * k * n..(i + 1) * k * n];
            want.extend(common::matmul_f64(a, b, (1, m, k, n)));
        }
        if tag == "batched" {
            want.iter_mut().for_each(|v| *v = (*v * 0.5 + 1.0).max(0.0));
        }
        common::assert_close(&got, &want, 1e-4, 1e-4, tag);
        if let Some(texels) = texels_a_lane(&dir) {
            assert_eq!(texels, "2", "{tag}: texels a lane");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
