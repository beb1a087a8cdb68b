// PyTorch's (C99's) pow for f32, case by case: drivers disagree on pow()
// outside x > 0, and NaN is tested on the bits (a compiler may assume
// comparisons never see NaN).
fn pow_torch(a: f32, b: f32) -> f32 {
    let inf = bitcast<f32>(0x7f800000u);
    let nan = bitcast<f32>(0x7fc00000u);
    let a_nan = (bitcast<u32>(a) & 0x7fffffffu) > 0x7f800000u;
    let b_nan = (bitcast<u32>(b) & 0x7fffffffu) > 0x7f800000u;
    // x^0 = 1 and 1^y = 1, NaN included.
    if (!b_nan && b == 0.0) { return 1.0; }
    if (!a_nan && a == 1.0) { return 1.0; }
    if (a_nan || b_nan) { return nan; }
    let ab = abs(b);
    let odd = floor(b) == b && ab < 16777216.0 && (u32(ab) & 1u) == 1u;
    if (ab == inf) {
        let aa = abs(a);
        if (aa == 1.0) { return 1.0; }
        return select(inf, 0.0, (aa < 1.0) == (b > 0.0));
    }
    let negative = (bitcast<u32>(a) & 0x80000000u) != 0u;
    if (a == 0.0) {
        // +-0 to a negative power is +inf, -inf for -0 to an odd one;
        // to a positive power +0, or -0 for -0 to an odd one.
        let mag = select(0.0, inf, b < 0.0);
        return select(mag, -mag, odd && negative);
    }
    if (abs(a) == inf) {
        let mag = select(0.0, inf, b > 0.0);
        return select(mag, -mag, odd && negative);
    }
    let p = pow(abs(a), b);
    if (!negative) { return p; }
    if (floor(b) != b) { return nan; }
    return select(p, -p, odd);
}
