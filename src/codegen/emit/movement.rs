//! Lowering of the ops that move elements: padding, flips, gathers,
//! scatter-adds (in `scatter.rs`) and strided views (their scatter back into a base), as
//! index arithmetic in the kernel IR.

use crate::graph::GKind;
use crate::graph::op::Op;
use crate::kernel::Sz;
use crate::kernel::ir::{Arith, Check, Expr, Inst, Ty};
use crate::kernel::layouts::{self, SzLayout, SzSteps, elements};
use crate::shape::{Layout, numel};

use super::Gen;

impl Gen<'_> {
    /// Node `n`'s value at `idx` for an op that reads its inputs
    /// elsewhere (views, padding, flips, gathers) or at several places
    /// (scatter-add): index arithmetic, then its inputs' values.
    pub(super) fn moved_value(
        &mut self,
        n: usize,
        op: &Op,
        base: usize,
        idx: &Expr,
        vec: bool,
    ) -> Expr {
        match op {
            Op::Reshape => self.value(self.nodes[n].inputs[0], idx, false, vec),
            Op::AsStrided(layout) => self.as_strided_value(n, layout, idx, vec),
            Op::StridedScatter(layout) => self.strided_scatter_value(n, layout, idx, vec),
            Op::Pad(pads) => self.pad_value(n, pads, base, idx, vec),
            Op::Flip(axes) => self.flip_value(n, axes, idx, vec),
            Op::Gather(axis) => self.gather_value(n, *axis, idx, vec),
            Op::ScatterAdd(axis) => self.scatter_add_value(n, *axis, idx),
            Op::SortedScatterAdd(axis) => self.sorted_scatter_add_value(n, *axis, idx),
            Op::SortedStarts => self.sorted_starts_value(n, idx),
            Op::Expand => self.expand_value(n, idx, vec),
            other => unreachable!("{} is not a movement op (node {n})", other.name()),
        }
    }

    /// An `AsStrided` view of node `n`'s input at `idx`: a single value
    /// splatted, a scatter's source read where the scatter found it, or
    /// the element the layout names (through the views it folds).
    fn as_strided_value(&mut self, n: usize, layout: &Layout, idx: &Expr, vec: bool) -> Expr {
        let node = &self.nodes[n];
        let (input, shape, ty) = (node.inputs[0], node.shape.clone(), Ty::of(node.dtype, vec));
        if vec && numel(&self.nodes[input].shape) == 1 {
            // A single value viewed everywhere.
            return self.splat_single(input, ty);
        }
        // Only a scatter's source index has an entry (the key is built
        // only when there is one to find).
        let base_idx = (!vec && !self.window_inverse.is_empty())
            .then(|| {
                let window = (idx.clone(), shape.clone(), layout.clone());
                self.window_inverse.get(&window).cloned()
            })
            .flatten();
        let sizes = Sz::shape(n, &shape);
        let (source, j) = match base_idx {
            Some(base_idx) => (input, base_idx),
            // Groups of four lying as aligned groups of the input's (see
            // `vectorize::op_vectorizable`): read by group, not folded.
            None if vec => {
                let layout = SzLayout::of(n, layout);
                (input, self.group_position(&sizes, &layout, idx))
            }
            None => {
                let (source, layout) = self.view_source(n, layout);
                (source, self.index_var(&sizes, &layout, idx))
            }
        };
        self.value(source, &j, false, vec)
    }

    /// `StridedScatter`: the view's new value inside its window, the
    /// base's value outside it.
    fn strided_scatter_value(&mut self, n: usize, layout: &Layout, idx: &Expr, vec: bool) -> Expr {
        let node = &self.nodes[n];
        let (inputs, ty) = (node.inputs.clone(), Ty::of(node.dtype, vec));
        let view_shape = self.nodes[inputs[1]].shape.clone();
        // Four at a time, the group's first element decides for the
        // group, which lies wholly inside the window or outside it (see
        // `vectorize::op_vectorizable`), and its source element starts
        // the view's group.
        let first = match vec {
            true => self.first_of_group(idx),
            false => idx.clone(),
        };
        let view = Sz::shape(inputs[1], &view_shape);
        let (hit, src_idx) = self.scatter_source(&view, &SzLayout::of(n, layout), &first);
        // Inside the window the view at `src_idx` is the base at `idx`.
        if !self.checks && !vec {
            self.window_inverse.insert(
                (src_idx.clone(), view_shape.clone(), layout.clone()),
                idx.clone(),
            );
        }
        let old = self.value(inputs[0], idx, false, vec);
        // The new value is read (and its chain computed) only inside the
        // window, four at a time as one element at a time (a group is
        // wholly inside or outside): a gradient of slices (the GPT's q, k
        // and v out of one projection) sums three scatters into zeros, of
        // which each element reads one; and anomaly mode checks only
        // values the program computes.
        let v = self.variable_of("v", ty, old);
        let body = self.block(|g| {
            let new = match vec {
                true => {
                    let group = Expr::arith(Arith::Div, src_idx, Expr::U32(4));
                    let group = g.emit("g", Ty::U32, group);
                    g.value(inputs[1], &group, false, true)
                }
                false => g.value(inputs[1], &src_idx, false, false),
            };
            g.assign(&v, new);
        });
        self.push(Inst::If { cond: hit, body });
        v
    }

    /// `Expand` at `idx`: the input's element there; four at a time, a
    /// single value splatted or the input's group of four where rows are
    /// broadcast along leading dims (see `vectorize::op_vectorizable`).
    fn expand_value(&mut self, n: usize, idx: &Expr, vec: bool) -> Expr {
        let node = &self.nodes[n];
        let (input, shape, ty) = (node.inputs[0], node.shape.clone(), Ty::of(node.dtype, vec));
        let src_shape = self.nodes[input].shape.clone();
        if vec && numel(&src_shape) == 1 {
            return self.splat_single(input, ty);
        }
        let (src, sizes) = (Sz::shape(input, &src_shape), Sz::shape(n, &shape));
        let layout = SzLayout::contiguous(&src).expand(&src, &sizes, &mut self.guards);
        if vec {
            let j = self.group_position(&sizes, &layout, idx);
            return self.value(input, &j, false, true);
        }
        let j = self.index_var(&sizes, &layout, idx);
        self.value(input, &j, false, false)
    }

    /// The single value of node `n` in every lane of a vector of `ty`.
    pub(super) fn splat_single(&mut self, n: usize, ty: Ty) -> Expr {
        let x = Box::new(self.value(n, &Expr::U32(0), false, false));
        self.emit("v", ty, Expr::Construct { ty, x })
    }

    /// `Pad`: the source element where `idx` falls inside it, else the
    /// fill value (parameter `base`).
    fn pad_value(
        &mut self,
        n: usize,
        pads: &[(usize, usize)],
        base: usize,
        idx: &Expr,
        vec: bool,
    ) -> Expr {
        let node = &self.nodes[n];
        let (input, dtype) = (node.inputs[0], node.dtype);
        let shape = Sz::shape(n, &node.shape);
        let src_shape = Sz::shape(input, &self.nodes[input].shape);
        let coords = self.coords(&shape, idx);
        let mut conds = Vec::new();
        let mut moved = Vec::new();
        for (d, &(before, _)) in pads.iter().enumerate() {
            let c = coords[d].clone();
            let before = Sz::pad(n, (d, false), before);
            let padded = !self.guards.equals(&before, 0, "no padding before");
            if padded {
                conds.push(Expr::arith(Arith::Ge, c.clone(), Expr::size_u32(&before)));
            }
            let end = Expr::size_u32(&src_shape[d].add(&before));
            conds.push(Expr::arith(Arith::Lt, c.clone(), end));
            moved.push(match padded {
                true => Expr::arith(Arith::Sub, c, Expr::size_u32(&before)),
                false => Expr::arith(Arith::Sub, c, Expr::U32(0)),
            });
        }
        let inside = self.emit("h", Ty::BOOL, Expr::all(conds));
        let j = Self::ravel(&src_shape, moved);
        let j = self.emit("j", Ty::U32, Expr::select(inside.clone(), j, Expr::U32(0)));
        let v = self.value(input, &j, false, vec);
        let fill = self.param(base, dtype);
        self.emit("v", Ty::of(dtype, vec), Expr::select(inside, v, fill))
    }

    /// `Flip`: the source element with the flipped coordinates reversed.
    fn flip_value(&mut self, n: usize, axes: &[usize], idx: &Expr, vec: bool) -> Expr {
        let input = self.nodes[n].inputs[0];
        let shape = Sz::shape(n, &self.nodes[n].shape);
        let coords = self.coords(&shape, idx);
        let flipped: Vec<Expr> = coords
            .into_iter()
            .enumerate()
            .map(|(d, c)| {
                if axes.contains(&d) {
                    let last = Expr::size_u32(&shape[d].sub(&Sz::constant(1)));
                    Expr::arith(Arith::Sub, last, c)
                } else {
                    c
                }
            })
            .collect();
        let j = Self::ravel(&shape, flipped);
        let j = self.emit("j", Ty::U32, j);
        self.value(input, &j, false, vec)
    }

    /// `Gather`: the source element whose `axis` coordinate is the index
    /// read at `idx` (clamped into range).
    fn gather_value(&mut self, n: usize, axis: usize, idx: &Expr, vec: bool) -> Expr {
        let node = &self.nodes[n];
        let (x, index) = (node.inputs[0], node.inputs[1]);
        let shape = Sz::shape(n, &node.shape);
        let x_shape = Sz::shape(x, &self.nodes[x].shape);
        let mut coords = self.coords(&shape, idx);
        let k = self.value(index, idx, false, false);
        let size = self.indexed_axis(n);
        self.check(
            Check::Index {
                index: k.clone(),
                size: Expr::size_i32(&size),
            },
            n,
        );
        let top = size.max(&Sz::constant(1)).sub(&Sz::constant(1));
        coords[axis] = Expr::ClampIndex {
            k: Box::new(k),
            top: Box::new(Expr::size_i32(&top)),
        };
        let j = Self::ravel(&x_shape, coords);
        let j = self.emit("j", Ty::U32, j);
        self.value(x, &j, false, vec)
    }

    /// `x * by` (`x` itself where `by` is 1, a guard).
    fn times(&mut self, x: Expr, by: &Sz) -> Expr {
        match self.guards.equals(by, 1, "a stride of one") {
            true => x,
            false => Expr::arith(Arith::Mul, x, Expr::size_u32(by)),
        }
    }

    /// The length of the axis gather or scatter-add `n` indexes (as
    /// `graph::semantics::indexed_axis_len` reads it), as a size: a
    /// gather's source's, a scatter-add's own.
    pub(super) fn indexed_axis(&self, n: usize) -> Sz {
        let dim = |node: usize, axis: usize| Sz::dim(node, axis, self.nodes[node].shape[axis]);
        match &self.nodes[n].kind {
            GKind::Op {
                op: Op::Gather(axis),
                ..
            } => dim(self.nodes[n].inputs[0], *axis),
            GKind::Op {
                op: Op::ScatterAdd(axis),
                ..
            } => dim(n, *axis),
            other => unreachable!("{other:?} indexes no axis"),
        }
    }

    /// Coordinates of row-major element `idx` of `shape`. Dimensions of
    /// one are left out (`guard_size_one` tests them, for every node a
    /// kernel reads or computes).
    pub(super) fn coords(&mut self, shape: &[Sz], idx: &Expr) -> Vec<Expr> {
        let strides = layouts::contiguous_strides(shape);
        shape
            .iter()
            .zip(&strides)
            .enumerate()
            .map(|(d, (size, stride))| {
                let outer = Expr::arith(Arith::Div, idx.clone(), Expr::size_u32(stride));
                if size.literal() <= 1 {
                    Expr::U32(0)
                } else if d == 0 {
                    self.emit("c", Ty::U32, outer)
                } else {
                    let c = Expr::arith(Arith::Rem, outer, Expr::size_u32(size));
                    self.emit("c", Ty::U32, c)
                }
            })
            .collect()
    }

    /// The row-major index of `coords` in `shape` (dimensions of one left
    /// out, as `coords` leaves them).
    pub(super) fn ravel(shape: &[Sz], coords: Vec<Expr>) -> Expr {
        let strides = layouts::contiguous_strides(shape);
        let terms = coords
            .into_iter()
            .zip(&strides)
            .zip(shape)
            .filter(|(_, size)| size.literal() > 1)
            .map(|((c, s), _)| {
                if s.literal() == 1 {
                    c
                } else {
                    Expr::arith(Arith::Mul, c, Expr::size_u32(s))
                }
            })
            .collect();
        Expr::sum(terms)
    }

    /// For base element `idx`, whether the strided view (`view_shape`,
    /// `layout`) contains it and at which row-major view index. The view's
    /// dims are peeled off in order of decreasing stride, which inverts
    /// every non-overlapping view of a row-major base (slices with steps,
    /// selects, permutations, diagonals).
    fn scatter_source(&mut self, view_shape: &[Sz], layout: &SzLayout, idx: &Expr) -> (Expr, Expr) {
        if self
            .guards
            .equals(&elements(view_shape), 0, "an empty window")
        {
            return (Expr::Bool(false), Expr::U32(0));
        }
        let view_strides = layouts::contiguous_strides(view_shape);
        let one = "a dimension of one, left out of index arithmetic";
        let mut dims: Vec<usize> = (0..view_shape.len())
            .filter(|&d| !self.guards.at_most(&view_shape[d], 1, one))
            .collect();
        let strides = &layout.strides;
        dims.sort_by(|&a, &b| strides[b].literal().cmp(&strides[a].literal()));
        // The order is a decision on the strides: each dim's stride is
        // at least the next one's, and larger where a stable sort put a
        // later dim first.
        for pair in dims.windows(2) {
            let (x, y) = (pair[0], pair[1]);
            let order = "a window's dims in order of their strides";
            match x < y {
                true => self.guards.at_most_size(&strides[y], &strides[x], order),
                false => self.guards.below_size(&strides[y], &strides[x], order),
            };
        }
        let off = Expr::size_u32(&layout.offset);
        let mut conds = vec![Expr::arith(Arith::Ge, idx.clone(), off.clone())];
        let mut rest = self.emit("r", Ty::U32, Expr::arith(Arith::Sub, idx.clone(), off));
        let mut terms = Vec::new();
        for d in dims {
            let s = Expr::size_u32(&strides[d]);
            let c = self.emit(
                "c",
                Ty::U32,
                Expr::arith(Arith::Div, rest.clone(), s.clone()),
            );
            rest = self.emit("r", Ty::U32, Expr::arith(Arith::Rem, rest, s));
            let size = Expr::size_u32(&view_shape[d]);
            conds.push(Expr::arith(Arith::Lt, c.clone(), size));
            let stride = Expr::size_u32(&view_strides[d]);
            terms.push(Expr::arith(Arith::Mul, c, stride));
        }
        conds.push(Expr::arith(Arith::Eq, rest, Expr::U32(0)));
        let hit = self.emit("h", Ty::BOOL, Expr::all(conds));
        // Out-of-view elements read view element 0 (and discard it).
        let src = Expr::select(hit.clone(), Expr::sum(terms), Expr::U32(0));
        let src_idx = self.emit("j", Ty::U32, src);
        (hit, src_idx)
    }

    /// What view `n` (of `layout` over its input) finally reads, and
    /// the layout from `n`'s elements to it: the views of views this
    /// kernel computes through (not stored, reshapes passing row-major
    /// indices on) fold into one layout while one covers both
    /// (`Layout::through`). A convolution's windows, permuted and read
    /// as a matrix, then decompose each index once instead of twice
    /// (12 divisions and remainders an element instead of 24 in the MNIST
    /// CNN's conv2).
    fn view_source(&mut self, n: usize, layout: &Layout) -> (usize, SzLayout) {
        let shape = Sz::shape(n, &self.nodes[n].shape);
        let mut layout = SzLayout::of(n, layout);
        let mut source = self.nodes[n].inputs[0];
        while let Some((m, inner)) = self.computed_view(source) {
            let inner = (SzLayout::of(m, inner), Sz::shape(m, &self.nodes[m].shape));
            let Some(merged) = layout.through(&shape, (&inner.0, &inner.1), &mut self.guards)
            else {
                break;
            };
            layout = merged;
            source = self.nodes[m].inputs[0];
        }
        (source, layout)
    }

    /// The strided view node `n` reads as, with its layout, where this
    /// kernel computes through both (neither is stored): `n` itself, or
    /// what the reshapes down from it pass row-major indices on to.
    fn computed_view(&self, mut n: usize) -> Option<(usize, &Layout)> {
        loop {
            if (self.stored)(n) {
                return None;
            }
            match &self.nodes[n].kind {
                GKind::Op {
                    op: Op::Reshape, ..
                } => n = self.nodes[n].inputs[0],
                GKind::Op {
                    op: Op::AsStrided(layout),
                    ..
                } => return Some((n, layout)),
                _ => return None,
            }
        }
    }

    /// Where a matmul may read its `[.., k, n]` operand `node` in place
    /// as sums: where `node` is a view (through reshapes) whose folded
    /// layout (`view_source`) steps through what it views without carries
    /// (`Layout::steps_within`), possibly a padding of a node (a padded
    /// convolution's windows), and splits into batch dims, then dims
    /// making its `k` rows, then dims making its `n` columns. An
    /// element's position (and its padded coordinates) is then the sum of
    /// its batch's, its row's and its column's own, each decomposed
    /// alone: a kernel decomposes a column once, a row once for all its
    /// columns, and nothing per element (a convolution's windows: an add
    /// per element, and a bounds check per padded dim, where folding
    /// alone left twelve divisions and remainders).
    /// The split is recorded as guards: the dims from `cols_from` make
    /// exactly `n` elements and those after it fewer, and likewise the
    /// dims from `rows_from` make `k n`, so that wherever they hold the
    /// split is the same (a reshape whose last dim spans two of the
    /// view's at one size and one at another splits otherwise).
    pub(crate) fn split_operand(
        &mut self,
        node: usize,
        (k, n): (&Sz, &Sz),
    ) -> Option<SplitOperand> {
        let (view, layout) = self.computed_view(node)?;
        if k.literal() == 0 || n.literal() == 0 {
            return None;
        }
        let layout = layout.clone();
        let (viewed, layout) = self.view_source(view, &layout);
        let shape = self.nodes[view].shape.clone();
        let (kn, nv) = (k.literal() * n.literal(), n.literal());
        // Dims from the last: columns up to `n` elements, rows up to `k n`.
        let mut cols_from = shape.len();
        let mut count = 1;
        while count < nv {
            cols_from = cols_from.checked_sub(1)?;
            count *= shape[cols_from];
        }
        let mut rows_from = cols_from;
        while count < kn {
            rows_from = rows_from.checked_sub(1)?;
            count *= shape[rows_from];
        }
        if count != kn || shape[cols_from..].iter().product::<usize>() != nv {
            return None;
        }
        let sizes = Sz::shape(view, &shape);
        let elements = |from: usize| (sizes[from..].iter()).fold(Sz::constant(1), |p, d| p.mul(d));
        let split = "a matmul operand read in place, split into rows and columns";
        let g = &mut self.guards;
        for (from, total) in [(cols_from, n.clone()), (rows_from, k.mul(n))] {
            g.equals_size(&elements(from), &total, split);
            if from < shape.len() {
                g.below_size(&elements(from + 1), &total, split);
            }
        }
        // A padding computed through (its fill where an element falls
        // outside its input), or the viewed node itself.
        let (source, pads, fill) = match &self.nodes[viewed].kind {
            GKind::Op {
                op: Op::Pad(pads),
                param_base,
            } if !(self.stored)(viewed) => (
                self.nodes[viewed].inputs[0],
                pads.clone(),
                Some(*param_base),
            ),
            _ => {
                let rank = self.nodes[viewed].shape.len();
                (viewed, vec![(0, 0); rank], None)
            }
        };
        let viewed_shape = Sz::shape(viewed, &self.nodes[viewed].shape);
        let steps = layout.steps_within(&sizes, &viewed_shape, &mut self.guards)?;
        let rank = shape.len();
        let padded_dims = (0..pads.len()).filter(|&d| pads[d] != (0, 0)).collect();
        Some(SplitOperand {
            source,
            shape: sizes,
            steps,
            pads,
            padded_dims,
            fill,
            parts: [0..rows_from, rows_from..cols_from, cols_from..rank],
        })
    }

    /// Part `part` (0: batch, 1: rows, 2: columns) of `split` for the
    /// part's own index `idx`: its position in the source, and its
    /// coordinates in each padded dim (the first element's, less the
    /// padding before, in the batch part only; wrapping, as `u32`s).
    pub(crate) fn split_part(
        &mut self,
        split: &SplitOperand,
        part: usize,
        idx: &Expr,
    ) -> SplitPart {
        let range = split.parts[part].clone();
        let dims = &split.shape[range.clone()];
        let coords = self.coords(dims, idx);
        let source_shape = Sz::shape(split.source, &self.nodes[split.source].shape);
        let source_strides = layouts::contiguous_strides(&source_shape);
        let rank = split.pads.len();
        // Per padded dim: the part's coordinate terms.
        let mut along: Vec<Vec<Expr>> = vec![Vec::new(); rank];
        for (c, step) in coords.into_iter().zip(&split.steps.steps[range]) {
            if let Some((d, per)) = step {
                along[*d].push(self.times(c, per));
            }
        }
        // Dims of one element add nothing (an element inside has
        // coordinate 0 there, checked below): `guard_size_one` tests the
        // source's, which the kernel reads.
        let moves = |d: usize| source_shape[d].literal() > 1;
        let mut address = Vec::new();
        for d in (0..rank).filter(|&d| !along[d].is_empty() && moves(d)) {
            let c = Expr::sum(along[d].clone());
            address.push(self.times(c, &source_strides[d]));
        }
        // The first element's coordinates, less the padding before, in
        // the batch part: folded here into one literal each (WGSL rejects
        // a constant expression that wraps). Where nothing is padded
        // before, each is a size.
        let first = &split.steps.first;
        if part == 0 && split.pads.iter().all(|&(before, _)| before == 0) {
            let offset = ((0..rank).filter(|&d| moves(d))).fold(Sz::constant(0), |acc, d| {
                acc.add(&first[d].mul(&source_strides[d]))
            });
            address.push(Expr::size_u32(&offset));
            for (d, terms) in along.iter_mut().enumerate() {
                terms.push(Expr::size_u32(&first[d]));
            }
        } else if part == 0 {
            // A literal without an expression (it may wrap below zero):
            // each number it is made of is pinned by a guard, so no other
            // value of them binds this kernel.
            let pinned = "the first element's offset less the padding";
            for d in (0..rank).filter(|&d| moves(d)) {
                self.guards.value(&first[d], pinned);
                self.guards.value(&source_strides[d], pinned);
            }
            let at = |d: usize| first[d].literal() as i64 - split.pads[d].0 as i64;
            let offset: i64 = ((0..rank).filter(|&d| moves(d)))
                .map(|d| at(d) * source_strides[d].literal() as i64)
                .sum();
            address.push(Expr::U32(offset.rem_euclid(1 << 32) as u64));
            for (d, terms) in along.iter_mut().enumerate() {
                terms.push(Expr::U32(at(d).rem_euclid(1 << 32) as u64));
            }
        }
        let address = self.emit("sa", Ty::U32, Expr::sum(address));
        let padded_coords = (split.padded_dims.iter())
            .map(|&d| {
                let c = Expr::sum(std::mem::take(&mut along[d]));
                self.emit("sc", Ty::U32, c)
            })
            .collect();
        SplitPart {
            address,
            padded: padded_coords,
        }
    }

    /// The sum of `parts` as one (a column's share and its batch's,
    /// added once before a loop over rows).
    pub(crate) fn join_parts(&mut self, parts: &[&SplitPart]) -> SplitPart {
        let address = Expr::sum(parts.iter().map(|p| p.address.clone()).collect());
        let address = self.emit("sa", Ty::U32, address);
        let dims = parts.first().map_or(0, |p| p.padded.len());
        let padded = (0..dims)
            .map(|d| {
                let c = Expr::sum(parts.iter().map(|p| p.padded[d].clone()).collect());
                self.emit("sc", Ty::U32, c)
            })
            .collect();
        SplitPart { address, padded }
    }

    /// The element of `split` at the sum of `parts` (`in_bounds`: the
    /// matmul reads inside the operand; outside, any value): its source's
    /// value where every padded coordinate falls inside the source, the
    /// padding's fill elsewhere.
    pub(crate) fn split_value(
        &mut self,
        split: &SplitOperand,
        parts: &[&SplitPart],
        in_bounds: Expr,
    ) -> Expr {
        let sum = |f: &dyn Fn(&SplitPart) -> Expr| Expr::sum(parts.iter().map(|p| f(p)).collect());
        let source_shape = self.nodes[split.source].shape.clone();
        let mut inside = vec![in_bounds];
        for (slot, &d) in split.padded_dims.iter().enumerate() {
            let c = sum(&|p| p.padded[slot].clone());
            let size = Expr::U32(source_shape[d] as u64);
            inside.push(Expr::arith(Arith::Lt, c, size));
        }
        let inside = self.emit("h", Ty::BOOL, Expr::all(inside));
        let at = Expr::select(inside.clone(), sum(&|p| p.address.clone()), Expr::U32(0));
        let at = self.emit("i", Ty::U32, at);
        let v = self.value(split.source, &at, false, false);
        match split.fill {
            Some(base) => {
                let fill = self.param(base, self.nodes[split.source].dtype);
                let ty = Ty::of(self.nodes[split.source].dtype, false);
                self.emit("v", ty, Expr::select(inside, v, fill))
            }
            None => v,
        }
    }

    /// The group of four that row-major group `idx` of `shape` reads
    /// through `layout` (`Layout::reads_in_aligned_fours`): its first
    /// element's position, divided by four.
    pub(crate) fn group_position(&mut self, shape: &[Sz], layout: &SzLayout, idx: &Expr) -> Expr {
        let first = self.first_of_group(idx);
        let at = self.index_var(shape, layout, &first);
        self.emit("g", Ty::U32, Expr::arith(Arith::Div, at, Expr::U32(4)))
    }

    /// The row-major index of the first element of group of four `idx`.
    pub(super) fn first_of_group(&mut self, idx: &Expr) -> Expr {
        let first = Expr::arith(Arith::Mul, idx.clone(), Expr::U32(4));
        self.emit("e", Ty::U32, first)
    }

    /// The buffer position of row-major element `idx` of `shape` stored
    /// with `layout` (`idx` itself when that is the identity). Each
    /// decision on the layout records its guard; those on a dimension
    /// (of one, leaving it out) are `guard_size_one`'s.
    pub(crate) fn index_var(&mut self, shape: &[Sz], layout: &SzLayout, idx: &Expr) -> Expr {
        if self.guards.equals(&elements(shape), 0, "an empty view") {
            // No element exists; the (discarded) read may go anywhere.
            return Expr::U32(0);
        }
        let offset = Expr::size_u32(&layout.offset);
        if layout.is_row_major(shape, &mut self.guards) {
            if layout.starts_at_zero(&mut self.guards) {
                return idx.clone();
            }
            return self.emit("j", Ty::U32, Expr::arith(Arith::Add, idx.clone(), offset));
        }
        let mut terms = Vec::new();
        let mut inner = Sz::constant(1);
        let total = elements(shape).literal();
        let one = "a dimension of one, left out of index arithmetic";
        for (dim, stride) in shape.iter().zip(&layout.strides).rev() {
            if !self.guards.at_most(dim, 1, one)
                && !self.guards.equals(stride, 0, "a broadcast dimension")
            {
                // `inner == 1` and `outer >= total` follow from the
                // dimensions' tests against one, made above.
                let outer = inner.mul(dim).literal();
                let (inner_e, dim_e) = (Expr::size_u32(&inner), Expr::size_u32(dim));
                let coord = if inner.literal() == 1 {
                    Expr::arith(Arith::Rem, idx.clone(), dim_e)
                } else if outer >= total {
                    Expr::arith(Arith::Div, idx.clone(), inner_e)
                } else {
                    let above = Expr::arith(Arith::Div, idx.clone(), inner_e);
                    Expr::arith(Arith::Rem, above, dim_e)
                };
                let unit = self.guards.equals(stride, 1, "a stride of one");
                terms.push(match unit {
                    true => coord,
                    false => Expr::arith(Arith::Mul, coord, Expr::size_u32(stride)),
                });
            }
            inner = inner.mul(dim);
        }
        if !layout.starts_at_zero(&mut self.guards) || terms.is_empty() {
            terms.push(offset);
        }
        self.emit("j", Ty::U32, Expr::sum(terms))
    }
}

/// A matmul operand read in place as batch, row and column sums (see
/// `Gen::split_operand`).
pub(crate) struct SplitOperand {
    /// The node read (the padding's input, where a padding is viewed).
    source: usize,
    /// The view's shape, and how it steps through the padded shape.
    shape: Vec<Sz>,
    steps: SzSteps,
    /// Per dim of the padded shape, the padding before and after
    /// ((0, 0): none, as for every dim of a view of no padding).
    pads: Vec<(usize, usize)>,
    /// The dims with padding, whose coordinates are checked.
    padded_dims: Vec<usize>,
    /// The padding's fill parameter, where a padding is viewed.
    fill: Option<usize>,
    /// The view's dims of the batch, the rows and the columns.
    parts: [std::ops::Range<usize>; 3],
}

/// One part's share of an element of a split operand (see
/// `Gen::split_part`): its position in the source, and its coordinate
/// in each padded dim.
pub(crate) struct SplitPart {
    address: Expr,
    padded: Vec<Expr>,
}
