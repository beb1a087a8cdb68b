//! Order-preserving `u32` keys of values, and their four-bit digits
//! counted in registers, for radix passes (`topk.rs`, `radix.rs`): keys
//! compare as the values do under the sort's order (`sort::comes_first`:
//! NaN greatest, all NaNs equal, -0 equal to 0), so a radix select or
//! sort over keys picks and orders as the stable sort does.

use super::emit::Gen;
use super::reduce_ir::uarith;
use crate::dtype::DType;
use crate::graph::op::RadixPass;
use crate::kernel::ir::{Arith, Builtin, Expr, Ty};

/// The four-bit digit of `key` from bit `shift` (a `u32` expression).
pub(super) fn digit_of(g: &mut Gen, key: Expr, shift: Expr) -> Expr {
    let down = Expr::arith(Arith::Shr, key, shift);
    g.emit("dg", Ty::U32, uarith(Arith::Rem, down, RadixPass::DIGITS))
}

/// A `u32` variable per digit value, declared here from `init(g, d)`.
pub(super) fn digit_counters(g: &mut Gen, init: &dyn Fn(&mut Gen, usize) -> Expr) -> Vec<Expr> {
    (0..RadixPass::DIGITS)
        .map(|d| {
            let value = init(g, d);
            g.variable_of("c", Ty::U32, value)
        })
        .collect()
}

/// Adds one to the counter of `digit`'s value, where `when` holds.
pub(super) fn count_digit(g: &mut Gen, counters: &[Expr], digit: &Expr, when: Option<&Expr>) {
    for (d, counter) in counters.iter().enumerate() {
        let is = uarith(Arith::Eq, digit.clone(), d);
        let is = match when {
            Some(when) => Expr::arith(Arith::And, when.clone(), is),
            None => is,
        };
        g.accumulate(counter, one_if(is));
    }
}

/// 1 where `cond` holds, else 0, as a `u32`.
pub(super) fn one_if(cond: Expr) -> Expr {
    Expr::FromBool {
        x: Box::new(cond),
        vec: false,
    }
}

/// The key of `v`, a value of compute dtype `dtype` (`f32`, `i32` or
/// `u32`); `flip`: the greatest value takes the least key (a descending
/// order, or a select of the least).
///
/// `f32`: the bits with the sign bit flipped (positive values) or all
/// bits flipped (negative ones), -0 read as 0, every NaN the greatest
/// key. `i32`: the bits with the sign bit flipped. `u32`: the value.
pub(super) fn order_key(g: &mut Gen, v: &Expr, dtype: DType, flip: bool) -> Expr {
    let all = Expr::U32(u64::from(u32::MAX));
    let key = match dtype {
        DType::F32 => {
            let bits = Expr::call(Builtin::Bits, vec![v.clone()]);
            let zero = Expr::arith(Arith::Eq, v.clone(), Expr::F32(0));
            let bits = g.emit("b", Ty::U32, Expr::select(zero, Expr::U32(0), bits));
            let negative = uarith(Arith::Ge, bits.clone(), 1 << 31);
            let ordered = Expr::select(
                negative,
                Expr::arith(Arith::Sub, all.clone(), bits.clone()),
                uarith(Arith::Add, bits, 1 << 31),
            );
            let nan = Expr::IsNan {
                x: Box::new(v.clone()),
                vec: false,
            };
            Expr::select(nan, all.clone(), ordered)
        }
        DType::I32 => {
            // Adding 2^31 wraps: the sign bit flipped.
            let bits = Expr::call(Builtin::Bits, vec![v.clone()]);
            uarith(Arith::Add, bits, 1 << 31)
        }
        DType::U32 => v.clone(),
        other => unreachable!("no order key for {other:?} values"),
    };
    let key = if flip {
        Expr::arith(Arith::Sub, all, key)
    } else {
        key
    };
    g.emit("key", Ty::U32, key)
}
