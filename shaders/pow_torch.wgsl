fn pow_torch(a: f32, b: f32) -> f32 {
    if (b == 0.0) { return 1.0; }
    // Drivers disagree on pow(0, b < 0); IEEE (and PyTorch) say +inf.
    if (a == 0.0) { return select(0.0, bitcast<f32>(0x7f800000u), b < 0.0); }
    let p = pow(abs(a), b);
    if (a >= 0.0) { return p; }
    if (floor(b) != b) { return bitcast<f32>(0x7fc00000u); }
    let odd = abs(b) < 16777216.0 && (u32(abs(b)) & 1u) == 1u;
    return select(p, -p, odd);
}
