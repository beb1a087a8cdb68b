
// tanh in f32, accurate near zero. WGSL's tanh is lowered through exp by
// Mesa's drivers (lavapipe among them), as (e^x - e^-x) / (e^x + e^-x),
// which cancels for small x: 1e-3 relative error at x = 1e-5, 2x at 1e-8.
// Below 0.625 in magnitude: x + x^3 P(x^2), P fitted for relative error
// (1.3 ulp at most in f32); above, 1 - 2 / (e^(2|x|) + 1); either with
// x's sign bit (so -0 stays -0). One exp where WGSL's spends two. tanh(NaN) is NaN, tanh(+-inf) is +-1,
// tanh(-0) is -0.
fn tanh_f32(x: f32) -> f32 {
    let a = abs(x);
    let a2 = a * a;
    let near = a + a * a2 * (-0.33333281 + a2 * (0.13331442 + a2 * (-0.053739715
        + a2 * (0.020639088 + a2 * -0.0057049883))));
    let far = 1.0 - 2.0 / (exp(2.0 * min(a, 15.0)) + 1.0);
    let magnitude = select(far, near, a < 0.625);
    let signed = bitcast<f32>(bitcast<u32>(magnitude) | (bitcast<u32>(x) & 0x80000000u));
    let nan = (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
    return select(signed, x, nan);
}

// The same on four lanes, written out in vector operations: calling
// tanh_f32 lane by lane (as erf_f32x4 does) made W1 6-14 % slower on
// lavapipe (6.48-6.81 against 6.89-7.64 ms, alternated).
fn tanh_f32x4(x: vec4<f32>) -> vec4<f32> {
    let a = abs(x);
    let a2 = a * a;
    let near = a + a * a2 * (-0.33333281 + a2 * (0.13331442 + a2 * (-0.053739715
        + a2 * (0.020639088 + a2 * -0.0057049883))));
    let far = 1.0 - 2.0 / (exp(2.0 * min(a, vec4<f32>(15.0))) + 1.0);
    let magnitude = select(far, near, a < vec4<f32>(0.625));
    let sign = bitcast<vec4<u32>>(x) & vec4<u32>(0x80000000u);
    let signed = bitcast<vec4<f32>>(bitcast<vec4<u32>>(magnitude) | sign);
    let nan = (bitcast<vec4<u32>>(x) & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u);
    return select(signed, x, nan);
}
