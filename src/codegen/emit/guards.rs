//! The guards lowering records on the way (`kernel::sizes`), beside the
//! choices' own: how many binding parts each value takes, and dimensions
//! of one, which index arithmetic leaves out.

use crate::graph::GKind;
use crate::kernel::Sz;

use super::Gen;

impl Gen<'_> {
    /// Node `n`'s element count, as a size of its dimensions.
    fn elements_of(&self, n: usize) -> Sz {
        Sz::elements(n, &self.nodes[n].shape)
    }

    /// Records the test that node `n`'s read (or `write`), `vec`: bound
    /// in groups of four, takes `parts` binding parts: one binding where
    /// its elements fit one part, else that many parts
    /// (`kernel::binding_parts`). Once per node and kind of access: a
    /// kernel reads a node many times the same way.
    pub(super) fn guard_parts(&mut self, n: usize, (write, vec): (bool, bool), parts: usize) {
        let access = 1 << (2 * usize::from(write) + usize::from(vec));
        if self.parts_tested[n] & access != 0 {
            return;
        }
        self.parts_tested[n] |= access;
        let elements = match (write, &self.nodes[n].kind) {
            (false, GKind::Input { .. }) => Sz::extent(n, self.nodes[n].extent()),
            _ => self.elements_of(n),
        };
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
}
