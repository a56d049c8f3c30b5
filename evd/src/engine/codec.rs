//! The byte layout of evd's own images of what it keeps hot (the tick cache, the last check),
//! written so that a fresh daemon can take them back instead of rebuilding: little-endian fixed
//! numbers, length-prefixed texts and byte runs, and a checksum of the whole.
//!
//! Pure: it builds and reads byte buffers, never a file. A [`Reader`] never panics on what it is
//! given: a short, torn or foreign buffer reads as `None`, and its caller drops the image.

use std::hash::Hasher;

/// Builds an image.
#[derive(Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Writer {
        Writer::default()
    }

    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }

    /// A byte run: its length, then the bytes.
    pub fn bytes(&mut self, v: &[u8]) {
        self.u32(u32::try_from(v.len()).unwrap_or(u32::MAX));
        self.buf
            .extend_from_slice(v.get(..u32::MAX as usize).unwrap_or(v));
    }

    pub fn str(&mut self, v: &str) {
        self.bytes(v.as_bytes());
    }

    /// An optional text: a presence byte, then the text.
    pub fn opt_str(&mut self, v: Option<&str>) {
        self.bool(v.is_some());
        if let Some(v) = v {
            self.str(v);
        }
    }

    /// What was written, without a checksum: a part of a larger image.
    pub fn into_body(self) -> Vec<u8> {
        self.buf
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The image: what was written, then its checksum ([`checksum`]).
    pub fn finish(mut self) -> Vec<u8> {
        let sum = checksum(&self.buf);
        self.buf.extend_from_slice(&sum.to_le_bytes());
        self.buf
    }
}

/// Reads an image back. Every read is checked: past the end, or a text that is not UTF-8,
/// reads as `None`.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// A reader over `image` when its checksum holds (the body without it); `None` for a torn
    /// or altered image.
    pub fn checked(image: &'a [u8]) -> Option<Reader<'a>> {
        let body_len = image.len().checked_sub(8)?;
        let (body, sum) = image.split_at(body_len);
        let sum = u64::from_le_bytes(sum.try_into().ok()?);
        (checksum(body) == sum).then_some(Reader { buf: body, at: 0 })
    }

    /// A reader over a part of an image whose checksum was checked already.
    pub fn part(bytes: &'a [u8]) -> Reader<'a> {
        Reader { buf: bytes, at: 0 }
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.buf.get(self.at..end)?;
        self.at = end;
        Some(s)
    }

    pub fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    pub fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }

    pub fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    pub fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    pub fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    pub fn bool(&mut self) -> Option<bool> {
        match self.u8()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }

    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    pub fn str(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }

    pub fn opt_str(&mut self) -> Option<Option<&'a str>> {
        if self.bool()? {
            Some(Some(self.str()?))
        } else {
            Some(None)
        }
    }

    /// A count of items each at least `min_bytes` long: `None` when the rest of the image could
    /// not hold that many (a corrupt count never makes a reader allocate for it).
    pub fn count(&mut self, min_bytes: usize) -> Option<usize> {
        let n = self.u32()? as usize;
        (n.checked_mul(min_bytes.max(1))? <= self.buf.len() - self.at).then_some(n)
    }

    /// Whether everything was read.
    pub fn at_end(&self) -> bool {
        self.at == self.buf.len()
    }

    /// How far into its bytes this reader is (to go on from there with [`Reader::part`]).
    pub fn offset(&self) -> usize {
        self.at
    }
}

/// The checksum an image ends with ([`Writer::finish`]): what names that very image.
pub fn image_sum(image: &[u8]) -> Option<u64> {
    let at = image.len().checked_sub(8)?;
    Some(u64::from_le_bytes(image.get(at..)?.try_into().ok()?))
}

/// A fast checksum of `bytes` (not cryptographic: it tells a torn or damaged image from a whole
/// one; what an image may be trusted for is decided by the stamps it carries).
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        h.write_u64(u64::from_le_bytes(c.try_into().unwrap_or([0; 8])));
    }
    for &b in chunks.remainder() {
        h.write_u8(b);
    }
    h.write_usize(bytes.len());
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_reads_back_and_any_damage_reads_as_none() {
        let mut w = Writer::new();
        w.u8(7);
        w.u32(70_000);
        w.u64(u64::MAX - 1);
        w.i64(-5);
        w.bool(true);
        w.str("grün");
        w.opt_str(None);
        w.opt_str(Some(""));
        w.bytes(&[1, 2, 3]);
        let image = w.finish();
        let mut r = Reader::checked(&image).expect("whole");
        assert_eq!(r.u8(), Some(7));
        assert_eq!(r.u32(), Some(70_000));
        assert_eq!(r.u64(), Some(u64::MAX - 1));
        assert_eq!(r.i64(), Some(-5));
        assert_eq!(r.bool(), Some(true));
        assert_eq!(r.str(), Some("grün"));
        assert_eq!(r.opt_str(), Some(None));
        assert_eq!(r.opt_str(), Some(Some("")));
        assert_eq!(r.bytes(), Some(&[1u8, 2, 3][..]));
        assert!(r.at_end());
        assert_eq!(r.u8(), None, "past the end");
        for cut in [0, 1, 8, image.len() - 1] {
            assert!(Reader::checked(&image[..cut]).is_none(), "torn at {cut}");
        }
        let mut flipped = image.clone();
        flipped[3] ^= 1;
        assert!(Reader::checked(&flipped).is_none(), "altered");
    }

    #[test]
    fn a_count_larger_than_the_rest_could_hold_is_refused() {
        let mut w = Writer::new();
        w.u32(u32::MAX);
        let image = w.finish();
        let mut r = Reader::checked(&image).expect("whole");
        assert_eq!(r.count(1), None);
    }
}
