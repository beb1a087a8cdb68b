//! How the lane matmul's operands reach their textures (`matmul_lanes`):
//! the texture layout of a packed operand (`Packing`), the packing
//! kernels that write them, and the copies that do a packing kernel's
//! work where a stored value lies as the texture holds it.

use super::emit::Gen;
use super::lane_operands::lies_in_memory;
use super::lane_tile::{b_block_width, block};
use super::matmul::{
    MatmulDims, MatmulSizes, VEC4, add, below, both, modulo, over, plus, tile_load, times,
};
use super::vectorize::lanes_gathered;
use super::wgsl::{CodegenContext, KernelSource, Launch, TextureCopy, TextureUse};
use crate::graph::GraphKey;
use crate::kernel::ir::{Expr, Inst, Ty};
use crate::kernel::sizes::Leaf;
use crate::kernel::{Entry, Guards, LaneAdapter, Strategy, Sz};

/// How one operand lies in its texture array: per batch entry a `rows` x
/// `cols` matrix, four columns a texel, cut into blocks of `height` rows
/// and `width` texels, one layer each (layer = (column block * batch +
/// entry) * row blocks + row block), so that matrices taller or wider
/// than a texture still fit. A column block's layers are one run over
/// the batch, which one copy fills (`operand_copy`).
#[derive(Clone, Debug)]
pub(crate) struct Packing {
    /// The operand packed.
    pub node: usize,
    /// Matrices (batch entries) packed.
    pub batch: Sz,
    /// Each matrix's rows and columns as the texture holds them.
    pub rows: Sz,
    pub cols: Sz,
    /// A block's width in texels and height in rows.
    pub width: Sz,
    pub height: Sz,
    /// Blocks per matrix down and across.
    pub row_blocks: Sz,
    pub col_blocks: Sz,
    /// Whether the texture holds the operand's transpose (its matrices'
    /// columns along texel rows: `transposed_packing`).
    pub transposed: bool,
}

impl Packing {
    /// The same packing at a graph whose numbers are `at`.
    pub fn at(&self, at: &dyn Fn(Leaf) -> usize) -> Packing {
        Packing {
            node: self.node,
            batch: self.batch.at(at),
            rows: self.rows.at(at),
            cols: self.cols.at(at),
            width: self.width.at(at),
            height: self.height.at(at),
            row_blocks: self.row_blocks.at(at),
            col_blocks: self.col_blocks.at(at),
            transposed: self.transposed,
        }
    }

    /// A's texture (`batch` matrices of `m` x `k`): K along texel rows,
    /// in blocks of `height` rows (whole workgroup row tiles).
    pub fn rows_of_a(node: usize, batch: Sz, (m, k): (&Sz, &Sz), height: Sz) -> Packing {
        Packing {
            node,
            batch,
            rows: m.clone(),
            cols: k.clone(),
            width: k.div_ceil(&Sz::constant(4)),
            row_blocks: m.div_ceil(&height),
            height,
            col_blocks: Sz::constant(1),
            transposed: false,
        }
    }

    /// B's texture (`batch` matrices of `k` x `n`, K padded to whole
    /// texels of A): columns along texel rows, in blocks of `width`
    /// texels (`lane_tile::b_block_width`).
    pub fn rows_of_b(node: usize, batch: Sz, (k, n): (&Sz, &Sz), width: Sz) -> Packing {
        let four = Sz::constant(4);
        Packing {
            node,
            batch,
            rows: k.clone(),
            cols: n.clone(),
            col_blocks: n.div_ceil(&four).div_ceil(&width),
            width,
            height: k.div_ceil(&four).times(4),
            row_blocks: Sz::constant(1),
            transposed: false,
        }
    }

    /// Layers of the texture array.
    pub fn layers(&self) -> Sz {
        self.batch.mul(&self.row_blocks).mul(&self.col_blocks)
    }

    /// The texture array's size in texels: width, height, layers.
    pub fn texture_size(&self) -> (u32, u32, u32) {
        let texels = |s: &Sz| s.literal() as u32;
        (
            texels(&self.width),
            texels(&self.height),
            texels(&self.layers()),
        )
    }
}

/// Whether one texture holds the transposes of `layers` matrices of
/// `rows` x `cols` (`transposed_packing`) within the adapter's limits.
pub(super) fn fits_transposed(
    (rows, cols, layers): (&Sz, &Sz, &Sz),
    adapter: LaneAdapter,
    guards: &mut Guards,
) -> bool {
    let fits = "a transposed texture within the adapter's limits";
    let texels = rows.div_ceil(&Sz::constant(4));
    guards.at_most(&texels, adapter.max_texture, fits)
        && guards.at_most(cols, adapter.max_texture, fits)
        && guards.at_most(layers, adapter.max_layers, fits)
}

/// The texture of operand `node` (`batch` matrices of `rows` x `cols`)
/// holding each matrix's transpose: per entry `cols` rows of `rows / 4`
/// texels (rounded up, zero past the matrix), as a stored transpose lies.
pub(super) fn transposed_packing(node: usize, batch: &Sz, (rows, cols): (&Sz, &Sz)) -> Packing {
    Packing {
        node,
        batch: batch.clone(),
        rows: cols.clone(),
        cols: rows.clone(),
        width: rows.div_ceil(&Sz::constant(4)),
        height: cols.clone(),
        row_blocks: Sz::constant(1),
        col_blocks: Sz::constant(1),
        transposed: true,
    }
}

/// The textures of A and B (`Packing`), each with its layers as a size,
/// for a tile of `rows` rows and `tile_texels` texels of columns; `None`
/// where a K step would pass a texture's width, or a block would hold no
/// row or column.
pub(super) fn packings(
    (d, sizes, a_node): (&MatmulDims, &MatmulSizes, usize),
    (batch, a_batch, tile_texels, rows): (usize, usize, usize, usize),
    ((a_transposed, b_transposed), (a_in_place, b_in_place)): ((bool, bool), (bool, bool)),
    (adapter, guards): (LaneAdapter, &mut Guards),
) -> Option<((Packing, Sz), (Packing, Sz))> {
    let (all, m, k, n) = sizes;
    let max = adapter.max_texture;
    let (k4, n4) = (k.div_ceil(&Sz::constant(4)), n.div_ceil(&Sz::constant(4)));
    let fits = "a K step within a texture's width";
    // K steps stay within a texture's width, packed or not: the loop
    // over them must stay far below the adapter's loop limit (lavapipe
    // ends a loop after 65,535 iterations).
    if !guards.at_most(&k4, max, fits) {
        return None;
    }
    let some = "a texture block holding a row or a column";
    let a = match a_transposed {
        true => (transposed_packing(d.a, all, (m, k)), all.clone()),
        false => {
            // A's row blocks hold whole workgroup row tiles: a workgroup
            // reads one layer of A.
            let height = block(m, (max, rows), guards);
            if !a_in_place && !guards.at_least(&height, 1, some) {
                return None;
            }
            let entries = match a_batch == batch {
                true => all.clone(),
                false => Sz::constant(a_batch),
            };
            let layers = entries.mul(&m.div_ceil(&height));
            (Packing::rows_of_a(a_node, entries, (m, k), height), layers)
        }
    };
    let b = match b_transposed {
        true => (transposed_packing(d.b, all, (k, n)), all.clone()),
        false => {
            // B's column blocks are narrow (`b_block_width`).
            let width = b_block_width((&n4, all), (max, tile_texels), guards);
            let blocks =
                |g: &mut Guards| g.at_most(&k4.times(4), max, fits) && g.at_least(&width, 1, some);
            if !b_in_place && !blocks(guards) {
                return None;
            }
            let layers = all.mul(&n4.div_ceil(&width));
            (Packing::rows_of_b(d.b, all.clone(), (k, n), width), layers)
        }
    };
    Some((a, b))
}

/// The packing kernels of the operands not read in place, each with the
/// copy that does its work where one can (`operand_copy`), and their
/// scratch textures with the names the kernel reads them by.
pub(super) struct PackedOperands {
    pub packs: Vec<KernelSource>,
    pub scratch: Vec<ScratchOperand>,
}

/// The packing of the lane matmul's operands A and B, each its texture
/// and whether it is packed (not read in place).
pub(super) fn packed_operands(
    key: &GraphKey,
    stored: &dyn Fn(usize) -> bool,
    cx: &CodegenContext,
    operands: [(&Packing, bool); 2],
) -> PackedOperands {
    let packed = (operands.into_iter().zip(LANE_OPERANDS))
        .filter(|((_, packs), _)| *packs)
        .map(|((p, _), name)| (p, name));
    let mut out = PackedOperands {
        packs: Vec::new(),
        scratch: Vec::new(),
    };
    for (slot, (p, name)) in packed.enumerate() {
        let copy = operand_copy(key, stored, p, slot);
        let kernel = pack(key, stored, cx, p, slot);
        out.packs.push(KernelSource {
            copy,
            packed: Some(p.clone()),
            ..kernel
        });
        out.scratch.push((p.texture_size(), name));
    }
    out
}

/// Whether a copy can fill `p`'s texture from rows lying as its texel
/// rows do: no padding texel (every column block whole), rows a multiple
/// of 256 bytes (copies' alignment), one row block per matrix, rows past
/// the matrix (B's, up to three: K padded to whole texels of A) zeroed
/// after the copy. Each column block is a copy of its own.
fn copyable(p: &Packing) -> bool {
    let [width, height, rows, cols, row_blocks, col_blocks] = [
        &p.width,
        &p.height,
        &p.rows,
        &p.cols,
        &p.row_blocks,
        &p.col_blocks,
    ]
    .map(Sz::literal);
    let unpadded = width * 4 * col_blocks == cols && (rows..rows + 4).contains(&height);
    unpadded && row_blocks == 1 && (cols * 4).is_multiple_of(COPY_ROW_ALIGNMENT)
}

/// The names the lane matmul reads its packed operands by (scratch
/// textures 0 and 1).
pub(super) const LANE_OPERANDS: [&str; 2] = ["ta", "tb"];

/// A packed operand's scratch texture array: (width, height, layers) in
/// texels, and the name the kernel reads it by.
pub(super) type ScratchOperand = ((u32, u32, u32), &'static str);

/// The kernel writing an operand into scratch texture `slot` as `p` says,
/// zero past the matrix (partial texels and blocks): an invocation a
/// texel.
fn pack(
    key: &GraphKey,
    stored: &dyn Fn(usize) -> bool,
    cx: &CodegenContext,
    p: &Packing,
    slot: usize,
) -> KernelSource {
    let mut g = Gen::new(&key.nodes, stored, &[], cx);
    let (width, height) = (&p.width, &p.height);
    let texels = width.mul(height).mul(&p.layers());
    let x = g.emit("x", Ty::U32, modulo(Expr::Invocation, width));
    let y = g.emit("y", Ty::U32, modulo(over(Expr::Invocation, width), height));
    let layer = g.emit("layer", Ty::U32, over(Expr::Invocation, &width.mul(height)));
    let bi = g.emit(
        "bi",
        Ty::U32,
        modulo(over(layer.clone(), &p.row_blocks), &p.batch),
    );
    let row_block = modulo(layer.clone(), &p.row_blocks);
    let r = g.emit("r", Ty::U32, add(times(row_block, height), y.clone()));
    let col_block = over(layer.clone(), &p.row_blocks.mul(&p.batch));
    let c = times(add(times(col_block, width), x.clone()), 4);
    let c = g.emit("c", Ty::U32, c);
    let gathered = packs_in_fours(key, stored, (cx, p), &mut g.guards);
    let in_fours = gathered.is_some();
    g.candidates = vec![
        ("vec4 reads".to_string(), in_fours),
        ("element reads".to_string(), true),
    ];
    let matrix = times(bi.clone(), &p.rows.mul(&p.cols));
    let texel = texel_of(&mut g, p, (&matrix, &r, &c), gathered);
    let texel = g.emit("texel", VEC4, texel);
    g.push(Inst::TextureStore {
        texture: "dst",
        x,
        y,
        layer,
        value: texel,
    });
    let entry = Entry::per_invocation_of(&texels);
    let launch = Launch {
        groups: Entry::groups_for(texels.literal()),
        strategy: Strategy::Pack,
        textures: vec![TextureUse {
            slot,
            write: true,
            name: "dst",
        }],
    };
    let body = g.take_body();
    g.kernel_source((Vec::new(), false), entry, body, launch)
}

/// The texel at row `r`, columns `c` .. `c + 3` of the texture's matrix
/// starting at element `matrix`: of the operand's matrix, those elements,
/// or (c + q, r) where the texture holds its transpose; zero past the
/// matrix. One group of four where `packs_in_fours` found one (with the
/// nodes it gathers), else four scalar loads.
fn texel_of(
    g: &mut Gen,
    p: &Packing,
    (matrix, r, c): (&Expr, &Expr, &Expr),
    gathered: Option<Vec<usize>>,
) -> Expr {
    let (rows, cols) = (&p.rows, &p.cols);
    let Some(gathered) = gathered else {
        return tile_load(
            g,
            p.node,
            |q| both(below(r.clone(), rows), below(plus(c.clone(), q), cols)),
            |q| match p.transposed {
                false => plus(
                    add(add(matrix.clone(), times(r.clone(), cols)), c.clone()),
                    q,
                ),
                true => add(
                    add(matrix.clone(), times(plus(c.clone(), q), rows)),
                    r.clone(),
                ),
            },
        );
    };
    g.gather_lanes_of(gathered);
    let ok = g.emit(
        "ok",
        Ty::BOOL,
        both(below(r.clone(), rows), below(c.clone(), cols)),
    );
    let first = add(add(matrix.clone(), times(r.clone(), cols)), c.clone());
    let group = Expr::select(ok.clone(), over(first, 4), Expr::U32(0));
    let group = g.emit("i", Ty::U32, group);
    let value = g.value(p.node, &group, false, true);
    let zero = Expr::Construct {
        ty: VEC4,
        x: Box::new(Expr::F32(0)),
    };
    Expr::select(ok, value, zero)
}

/// Whether the pack of `p` reads each texel's four elements as one group
/// of four of its operand, and the nodes it then computes a lane at a
/// time (`lanes_gathered`): where a texel is four adjacent elements of
/// one of the operand's rows (not a transpose's), rows are whole groups
/// of four long, the operand can be computed four at a time with some
/// reads gathered (an attention head's view of a stored projection; the
/// probabilities' gradient with its causal mask and broadcast row sums),
/// and its rows' length does not change between the site's graphs
/// (where it does, elements, so that the site's pack keeps one code at
/// every length).
fn packs_in_fours(
    key: &GraphKey,
    stored: &dyn Fn(usize) -> bool,
    (cx, p): (&CodegenContext, &Packing),
    guards: &mut Guards,
) -> Option<Vec<usize>> {
    let cols = Sz::last_dim_or(p.node, &key.nodes[p.node].shape, p.cols.literal());
    if p.transposed || !cx.rows_stay_in_fours(p.node, &cols, guards) {
        return None;
    }
    lanes_gathered(
        &key.nodes,
        (&[p.node], false),
        (stored, &|_| false),
        (cx, guards),
    )
}

/// Bytes a row of a buffer-to-texture copy is a multiple of (wgpu's
/// `COPY_BYTES_PER_ROW_ALIGNMENT`).
const COPY_ROW_ALIGNMENT: usize = 256;

/// The copy packing `p` into scratch texture `slot`, where a stored
/// value holds the texture's matrices row-major (`lies_in_memory`: the
/// operand's, or their transposes where `p.transposed`) and `p`'s
/// texture can be copied (`copyable`). (A B whose K is not a multiple of
/// four is copied, its padding rows zeroed: whether B is copied then
/// does not change with a length that is a weight gradient's K.)
pub(super) fn operand_copy(
    key: &GraphKey,
    stored: &dyn Fn(usize) -> bool,
    p: &Packing,
    slot: usize,
) -> Option<TextureCopy> {
    if !copyable(p) {
        return None;
    }
    // The operand's own matrices: the texture's, or their transposes.
    // Whether a copy does the packing kernel's work is no part of any
    // kernel's code (the packing kernel is there either way): its tests
    // are not kept.
    let matrix = match p.transposed {
        false => (&p.batch, &p.rows, &p.cols),
        true => (&p.batch, &p.cols, &p.rows),
    };
    let (node, start) = lies_in_memory(
        key,
        stored,
        p.node,
        (matrix, p.transposed),
        &mut Guards::default(),
    )?;
    Some(TextureCopy {
        node,
        offset_bytes: start as u64 * 4,
        bytes_per_row: (p.cols.literal() * 4) as u32,
        slot,
        size: p.texture_size(),
        rows: p.rows.literal() as u32,
    })
}
