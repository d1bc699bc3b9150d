//! Small order statistics over durations: the median of repetitions and the
//! percentiles of call latencies. No clock is read here.

use std::time::Duration;

/// The median of `xs` (the lower middle for an even count); zero when empty.
pub fn median(xs: &[Duration]) -> Duration {
    let mut v = xs.to_vec();
    v.sort_unstable();
    v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or_default()
}

/// The `p`-th percentile (0–100) by the nearest-rank method; zero when empty.
pub fn percentile(xs: &[Duration], p: f64) -> Duration {
    let mut v = xs.to_vec();
    v.sort_unstable();
    if v.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// `a / b`, or zero when `b` is zero.
pub fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&x| Duration::from_micros(x)).collect()
    }

    #[test]
    fn median_takes_the_lower_middle() {
        assert_eq!(median(&d(&[5, 1, 3])), Duration::from_micros(3));
        assert_eq!(median(&d(&[4, 1, 3, 2])), Duration::from_micros(2));
        assert_eq!(median(&[]), Duration::ZERO);
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let xs = d(&(1..=100).collect::<Vec<_>>());
        assert_eq!(percentile(&xs, 50.0), Duration::from_micros(50));
        assert_eq!(percentile(&xs, 99.0), Duration::from_micros(99));
        assert_eq!(percentile(&xs, 100.0), Duration::from_micros(100));
        assert_eq!(percentile(&d(&[7]), 99.0), Duration::from_micros(7));
        assert_eq!(percentile(&d(&[1, 1000]), 99.0), Duration::from_micros(1000));
    }
}
