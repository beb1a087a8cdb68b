//! A minimal PNG writer for the examples' image grids: 8-bit greyscale or
//! RGB, no interlacing, each row with filter 0, the pixels zlib-compressed
//! by `flate2` (already a dependency of the crate) and each chunk closed by
//! its CRC-32.

// Each example compiles this file as its own module.
#![allow(dead_code)]

use std::io::Write;
use std::path::Path;

use flate2::Compression;
use flate2::write::ZlibEncoder;

/// The CRC-32 of `bytes` (ISO-HDLC, reflected polynomial 0xEDB88320), as
/// PNG closes each chunk with.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

/// Appends one chunk: its length, type, data and CRC (of type and data).
fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

/// The PNG file of an 8-bit image, `channels` 1 (greyscale) or 3 (RGB),
/// `pixels` row-major and interleaved (`height * width * channels`
/// bytes).
///
/// # Panics
///
/// If `channels` is not 1 or 3 or `pixels` has the wrong length.
pub fn encode(width: usize, height: usize, channels: usize, pixels: &[u8]) -> Vec<u8> {
    assert!(channels == 1 || channels == 3, "png: 1 or 3 channels");
    let row = width * channels;
    assert_eq!(
        pixels.len(),
        row * height,
        "png: pixels for {width}x{height}x{channels}"
    );
    let mut raw = Vec::with_capacity((row + 1) * height);
    for line in pixels.chunks(row.max(1)).take(height) {
        raw.push(0); // filter: none
        raw.extend_from_slice(line);
    }
    let mut z = ZlibEncoder::new(Vec::new(), Compression::default());
    z.write_all(&raw).expect("compressing into memory");
    let idat = z.finish().expect("compressing into memory");

    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&(width as u32).to_be_bytes());
    ihdr.extend_from_slice(&(height as u32).to_be_bytes());
    // Bit depth 8; colour type 0 (grey) or 2 (RGB); deflate; filter set
    // 0; no interlace.
    ihdr.extend_from_slice(&[8, if channels == 1 { 0 } else { 2 }, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &idat);
    chunk(&mut out, b"IEND", &[]);
    out
}

/// Writes [`encode`]'s file to `path`.
pub fn write(
    path: &Path,
    width: usize,
    height: usize,
    channels: usize,
    pixels: &[u8],
) -> std::io::Result<()> {
    std::fs::write(path, encode(width, height, channels, pixels))
}
