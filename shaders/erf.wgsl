
// The error function in f32 (WGSL has none). Below 0.5 in magnitude its
// Taylor series to x^13 (relative error under 1e-7 there, exact at 0 and
// for tiny x); above, 1 - erfc with erfc from Numerical Recipes' Chebyshev
// fit (fractional error under 1.2e-7). erf(NaN) is NaN, erf(+-inf) is +-1.
fn erf_f32(x: f32) -> f32 {
    let a = abs(x);
    let x2 = x * x;
    let series = x * (1.1283791671 + x2 * (-0.3761263890 + x2 * (0.1128379167 + x2 * (-0.0268661706
        + x2 * (0.0052239776 + x2 * (-0.0008548327 + x2 * 0.0001205492))))));
    let t = 1.0 / (1.0 + 0.5 * a);
    let erfc = t * exp(-a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
        + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
        + t * (-0.82215223 + t * 0.17087277)))))))));
    let tail = select(1.0 - erfc, erfc - 1.0, x < 0.0);
    let nan = (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
    return select(select(tail, series, a < 0.5), x, nan);
}

fn erf_f32x4(v: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(erf_f32(v.x), erf_f32(v.y), erf_f32(v.z), erf_f32(v.w));
}
