//! Short texts that recur across ticks (who is on the hook, the authority, `chosen`, a
//! platform, a trigger path, the sha a binding was verified at), held once for the whole
//! daemon and named by a number.
//!
//! A store of 100,000 ticks spells the same few dozen such texts hundreds of thousands of
//! times; a [`crate::engine::packed::PackedTick`] keeps the number instead. The table only grows, so
//! it is bounded: at most [`CAPACITY`] texts of at most [`MAX_LEN`] bytes each (2 MiB at
//! worst). A text that does not fit, or arrives when the table is full, gets no number and is
//! kept in the tick as it is. Reading a number is one atomic load; only numbering takes a lock.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// How many texts the table holds at most (numbers fit in 15 bits).
pub const CAPACITY: usize = 1 << 15;
/// The longest text given a number.
pub const MAX_LEN: usize = 64;

static TEXTS: [OnceLock<Box<str>>; CAPACITY] = [const { OnceLock::new() }; CAPACITY];
static NUMBERS: Mutex<Option<HashMap<&'static str, u32>>> = Mutex::new(None);

/// How many numbers each thread remembers before it asks the table again (a thread packing a
/// large store asks about the same few dozen texts hundreds of thousands of times).
const LOCAL: usize = 4096;

thread_local! {
    static KNOWN: std::cell::RefCell<rustc_hash::FxHashMap<Box<str>, u32>> =
        std::cell::RefCell::new(rustc_hash::FxHashMap::default());
}

/// The number of `s`, numbering it if it is new; `None` when it is too long or the table is
/// full. A number never changes once given, so each thread keeps the ones it was told.
pub fn number(s: &str) -> Option<u32> {
    if s.len() > MAX_LEN {
        return None;
    }
    if let Some(n) = KNOWN.with(|k| k.try_borrow().ok().and_then(|k| k.get(s).copied())) {
        return Some(n);
    }
    let n = number_locked(s)?;
    KNOWN.with(|k| {
        if let Ok(mut k) = k.try_borrow_mut() {
            if k.len() >= LOCAL {
                k.clear();
            }
            k.insert(s.into(), n);
        }
    });
    Some(n)
}

fn number_locked(s: &str) -> Option<u32> {
    let mut numbers = NUMBERS.lock().ok()?;
    let numbers = numbers.get_or_insert_with(HashMap::new);
    if let Some(&n) = numbers.get(s) {
        return Some(n);
    }
    let n = numbers.len();
    let slot = TEXTS.get(n)?;
    // Slots are only ever set here, in order, under the lock: this one is empty.
    let _ = slot.set(s.into());
    let kept: &'static str = slot.get()?;
    let n = u32::try_from(n).ok()?;
    numbers.insert(kept, n);
    Some(n)
}

/// The text numbered `n` (empty for a number never given).
pub fn text(n: u32) -> &'static str {
    TEXTS
        .get(n as usize)
        .and_then(OnceLock::get)
        .map_or("", |t| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_keeps_its_number_and_long_texts_get_none() {
        let a = number("user-ruled").expect("numbered");
        assert_eq!(number("user-ruled"), Some(a));
        assert_eq!(text(a), "user-ruled");
        let b = number("Wang Yu").expect("numbered");
        assert_ne!(a, b);
        assert_eq!(text(b), "Wang Yu");
        assert_eq!(number(&"x".repeat(MAX_LEN + 1)), None);
        let e = number("").expect("the empty text too");
        assert_eq!(text(e), "");
        assert_eq!(text(u32::MAX), "");
    }
}
