//! Assembling a lowered kernel into its value (`kernel::Kernel`): what
//! it binds, named, in binding order; the helper functions its body
//! calls; and the WGSL printed from it.

use crate::dtype::DType;
use crate::kernel::generic::symbolize;
use crate::kernel::ir::{Inst, Ty};
use crate::kernel::{Binding, Declared, Entry, Helpers, Kernel, legalise};

use super::super::source::{KernelSource, Launch, SizeLiterals, TextureUse};
use super::{Gen, part_names};

impl Gen<'_> {
    /// The kernel of what was lowered, launched as `entry` with `body`
    /// its statements: the parameters, the reads and `writes` (stored
    /// four elements at a time when `vec_out`) bound in their parts,
    /// `launch`'s textures, the anomaly flags where checked.
    pub fn kernel_source(
        &self,
        (writes, vec_out): (Vec<usize>, bool),
        entry: Entry,
        body: Vec<Inst>,
        launch: Launch,
    ) -> KernelSource {
        let out_types: Vec<(usize, bool)> = writes.iter().map(|&o| (o, vec_out)).collect();
        let (mut entry, mut body) = (entry, legalise(body));
        // Index arithmetic is simplified where the kernel is printed
        // (`Kernel::simplified`), so that a later size compares the kernel
        // as lowered with the site's and, where they are one, binds it
        // without simplifying.
        let dynamic = match self.cx.sizes {
            SizeLiterals::Symbolic(changing) => {
                symbolize(&mut body, &mut entry, &|leaf| changing.contains(leaf))
            }
            #[cfg(test)]
            SizeLiterals::Kept => crate::kernel::generic::DynamicSizes::default(),
        };
        let mut bindings = self.declared(&out_types, &launch.textures);
        if !dynamic.is_empty() {
            bindings.push(Declared {
                binding: Binding::Sizes {
                    vec4s: dynamic.values.len().div_ceil(4),
                },
                name: "dyn_sizes".to_string(),
                element: None,
            });
        }
        let kernel = Kernel {
            bindings,
            helpers: self.helpers(&out_types),
            entry,
            body,
        };
        // The IR listing only for dumps, as printed.
        let ir = if self.cx.origins.is_some() {
            kernel.simplified().to_string()
        } else {
            String::new()
        };
        KernelSource {
            wgsl: "".into(),
            ir,
            reads: self.reads(),
            writes,
            groups: launch.groups,
            strategy: launch.strategy,
            scratch: Vec::new(),
            packs: Vec::new(),
            copy: None,
            packed: None,
            dynamic,
            candidates: self.candidates.clone(),
            guards: self.guards.recorded(),
            kernel: std::sync::Arc::new(kernel),
        }
    }

    /// What the kernel binds, in binding order, named: the parameters
    /// (when read), each read in its parts, each of `outputs` (as
    /// `(node, vec4)`) in its parts, `textures`, the anomaly flags.
    fn declared(&self, outputs: &[(usize, bool)], textures: &[TextureUse]) -> Vec<Declared> {
        let mut declared = Vec::new();
        if self.max_param.is_some() {
            declared.push(Declared {
                binding: Binding::Params {
                    uniform_bytes: self.uniform_params_bytes(),
                },
                name: "params".to_string(),
                element: None,
            });
        }
        let reads = self.reads.iter().enumerate().map(|(k, &(n, vec))| {
            let parts = self.parts_of(n, vec);
            (format!("in{k}"), n, vec, parts, false)
        });
        let writes = outputs.iter().enumerate().map(|(k, &(n, vec))| {
            let parts = self.write_parts_of(n, vec);
            (format!("out{k}"), n, vec, parts, true)
        });
        for (name, node, vec, parts, write) in reads.chain(writes).collect::<Vec<_>>() {
            for (part, name) in part_names(&name, parts).into_iter().enumerate() {
                declared.push(Declared {
                    binding: if write {
                        Binding::Write { node, part }
                    } else {
                        Binding::Read { node, part }
                    },
                    name,
                    element: Some(Ty::of(self.nodes[node].dtype, vec)),
                });
            }
        }
        for t in textures {
            declared.push(Declared {
                binding: Binding::Texture {
                    slot: t.slot,
                    write: t.write,
                },
                name: t.name.to_string(),
                element: None,
            });
        }
        if self.uses_checks() {
            declared.push(Declared {
                binding: Binding::Checks,
                name: "checks".to_string(),
                element: None,
            });
        }
        declared
    }

    /// The helper functions the lowered body calls, and whether it binds
    /// `f16` buffers (reads, or `outputs` as `(node, vec4)`).
    fn helpers(&self, outputs: &[(usize, bool)]) -> Helpers {
        let mut dtypes = self
            .reads
            .iter()
            .chain(outputs)
            .map(|&(n, _)| self.nodes[n].dtype);
        let bf16 = dtypes.clone().any(|d| d == DType::BF16);
        Helpers {
            rng: self.uses_rng,
            pow: self.uses_pow,
            erf: self.uses_erf,
            tanh: self.uses_tanh,
            // Rounding, and bf16's word halves (f16 loads and stores convert).
            halves: self.uses_half || bf16,
            // Cooperative matrices load `f16` tiles from workgroup memory.
            f16: self.uses_coop || dtypes.any(|d| d == DType::F16),
            cooperative_matrix: self.uses_coop,
        }
    }
}
