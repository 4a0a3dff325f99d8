//! Medians and percentiles of nanosecond samples.

#[derive(Debug, Clone, Copy, Default)]
pub struct Dist {
    pub median: i64,
    pub p99: i64,
}

/// Nearest-rank percentile of sorted samples (`p` in 0..=1).
pub fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let n = sorted.len();
    let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
    sorted[rank - 1]
}

pub fn dist(mut samples: Vec<i64>) -> Dist {
    samples.sort_unstable();
    Dist { median: percentile(&samples, 0.5), p99: percentile(&samples, 0.99) }
}
