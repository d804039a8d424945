//! Medians and quantiles over the repeats of a measurement.
//!
//! The benchmark runs every variant in short slices, interleaved and repeated, and reports the
//! median: on a shared machine a single sequential run says little, and the median of paired
//! ratios (each variant against its floor within the same round) cancels slow drifts.

/// The `q`-quantile (`0.0..=1.0`) of `values` by linear interpolation, ignoring NaN; `None`
/// when no value is left.
///
/// ```
/// use shedlock_bench::stats::quantile;
/// assert_eq!(quantile(&[4.0, 1.0, 3.0, 2.0], 0.5), Some(2.5));
/// assert_eq!(quantile(&[4.0, 1.0, 3.0, 2.0], 1.0), Some(4.0));
/// assert_eq!(quantile(&[], 0.5), None);
/// ```
#[must_use]
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let q = q.clamp(0.0, 1.0);
    #[allow(clippy::cast_precision_loss)] // a handful of samples
    let position = q * (sorted.len() - 1) as f64;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // 0 <= position < len
    let below = position.floor() as usize;
    let above = (below + 1).min(sorted.len() - 1);
    let weight = position - position.floor();
    Some(sorted[below] + (sorted[above] - sorted[below]) * weight)
}

/// The median of `values` (see [`quantile`]).
///
/// ```
/// assert_eq!(shedlock_bench::stats::median(&[3.0, 1.0, 2.0]), Some(2.0));
/// ```
#[must_use]
pub fn median(values: &[f64]) -> Option<f64> {
    quantile(values, 0.5)
}

/// The median of the paired ratios `numerator[i] / denominator[i]` (pairs from the same round),
/// skipping pairs with a zero or missing denominator.
///
/// ```
/// use shedlock_bench::stats::median_ratio;
/// // Round 2 was slow for both; the paired ratio is not fooled by it.
/// assert_eq!(median_ratio(&[110.0, 220.0, 121.0], &[100.0, 200.0, 110.0]), Some(1.1));
/// ```
#[must_use]
pub fn median_ratio(numerator: &[f64], denominator: &[f64]) -> Option<f64> {
    let ratios: Vec<f64> = numerator
        .iter()
        .zip(denominator)
        .filter(|&(_, d)| *d != 0.0)
        .map(|(n, d)| n / d)
        .collect();
    median(&ratios)
}

/// The order in which `n` variants take their sample number `k` when samples alternate: the
/// variants rotated by `k`, so over `n` samples each takes every place once (with two: A B,
/// B A, A B, …): a cost that depends on the place (a connection warmer after the previous
/// call, a timer due) falls on every variant alike.
///
/// ```
/// use shedlock_bench::stats::rotation;
/// assert_eq!(rotation(0, 3), [0, 1, 2]);
/// assert_eq!(rotation(4, 3), [1, 2, 0]);
/// assert_eq!(rotation(1, 2), [1, 0]);
/// ```
#[must_use]
pub fn rotation(k: usize, n: usize) -> Vec<usize> {
    (0..n).map(|j| (k + j) % n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_and_ignore_nan() {
        let values = [10.0, f64::NAN, 30.0, 20.0, 40.0];
        assert_eq!(quantile(&values, 0.0), Some(10.0));
        assert_eq!(quantile(&values, 0.25), Some(17.5));
        assert_eq!(median(&values), Some(25.0));
        assert_eq!(quantile(&values, 2.0), Some(40.0), "q is clamped");
        assert_eq!(median(&[f64::NAN]), None);
        assert_eq!(median(&[7.0]), Some(7.0));
    }

    #[test]
    fn paired_ratios_skip_zero_denominators_and_odd_lengths() {
        assert_eq!(median_ratio(&[2.0, 9.0, 3.0], &[1.0, 0.0, 1.0]), Some(2.5));
        assert_eq!(median_ratio(&[2.0, 4.0, 6.0], &[1.0, 2.0]), Some(2.0));
        assert_eq!(median_ratio(&[1.0], &[0.0]), None);
    }

    #[test]
    fn rotations_put_every_variant_first_equally_often() {
        let n = 4;
        let mut first = vec![0; n];
        for k in 0..(n * 10) {
            let order = rotation(k, n);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(
                sorted,
                (0..n).collect::<Vec<_>>(),
                "each variant once per sample"
            );
            first[order[0]] += 1;
        }
        assert!(first.iter().all(|&c| c == 10), "{first:?}");
        assert_eq!(rotation(0, 0), Vec::<usize>::new());
        assert_eq!(rotation(7, 1), [0]);
        let two: Vec<Vec<usize>> = (0..3).map(|k| rotation(k, 2)).collect();
        assert_eq!(two, [vec![0, 1], vec![1, 0], vec![0, 1]], "two alternate");
    }
}
