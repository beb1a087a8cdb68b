//! The guards lowering records on the way (`kernel::sizes`), beside the
//! choices' own: how many binding parts each value takes, and dimensions
//! of one, which index arithmetic leaves out.

use crate::graph::GKind;
use crate::kernel::Sz;

use super::Gen;

impl Gen<'_> {
    /// Node `n`'s element count, as a size of its dimensions.
    pub(super) fn elements_of(&self, n: usize) -> Sz {
        let shape = &self.nodes[n].shape;
        Sz::dims_product(n, shape, 0..shape.len())
    }

    /// Records the test that node `n`'s `elements` (`vec`: bound in
    /// groups of four) take `parts` binding parts: one binding where they
    /// fit one part, else that many parts (`kernel::binding_parts`).
    pub(super) fn guard_parts(&mut self, n: usize, (elements, vec): (Sz, bool), parts: usize) {
        let units = match vec {
            true => elements.div_ceil(&Sz::constant(4)).times(4),
            false => elements,
        };
        let bytes = units.times(self.nodes[n].dtype.size_in_bytes());
        let part = self.part_bytes();
        if parts == 1 {
            self.guards.at_most(&bytes, part, "one binding");
        } else {
            let counted = bytes.div_ceil(&Sz::constant(part));
            self.guards.equals(&counted, parts, "binding parts");
        }
    }

    /// Sizes 0 and 1 stay specialised, as PyTorch's do: index arithmetic
    /// leaves dimensions of one out (`coords`, `split_index`, a view's
    /// strides), so each dimension of a node the kernel reads or computes
    /// is tested against one, once a node.
    pub(super) fn guard_size_one(&mut self, n: usize) {
        if std::mem::replace(&mut self.size_one_tested[n], true) {
            return;
        }
        for (d, &len) in self.nodes[n].shape.iter().enumerate() {
            let one = "a dimension of one, left out of index arithmetic";
            self.guards.at_most(&Sz::dim(n, d, len), 1, one);
        }
    }

    /// What a read of node `n` spans of its buffer: an input its layout's
    /// reach, a stored value its elements.
    pub(super) fn spanned(&self, n: usize) -> Sz {
        match self.nodes[n].kind {
            GKind::Input { .. } => Sz::extent(n, self.nodes[n].extent()),
            GKind::Op { .. } => self.elements_of(n),
        }
    }
}
