//! Reading many small files on the cores there are: a fresh daemon's first look at a large
//! store reads thousands of tick and state files, each mostly waiting on system calls.

/// `f` of each of `items`, in order, on up to four scoped threads (one per `per_thread` items,
/// at most one per core). A chunk whose thread panicked is done again on the calling thread.
pub fn map<T: Sync, R: Send>(items: &[T], per_thread: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
        .min(items.len().div_ceil(per_thread.max(1)))
        .max(1);
    let one = |chunk: &[T]| chunk.iter().map(&f).collect::<Vec<R>>();
    if threads == 1 {
        return one(items);
    }
    let size = items.len().div_ceil(threads);
    std::thread::scope(|s| {
        let workers: Vec<_> = items
            .chunks(size)
            .map(|c| (c, s.spawn(|| one(c))))
            .collect();
        workers
            .into_iter()
            .flat_map(|(c, w)| w.join().unwrap_or_else(|_| one(c)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_come_back_in_order_whatever_the_split() {
        for n in [0usize, 1, 5, 1000, 4097] {
            let items: Vec<usize> = (0..n).collect();
            let doubled = super::map(&items, 7, |i| i * 2);
            assert_eq!(doubled, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        }
    }
}
