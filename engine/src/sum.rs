//! Sums of a summary window's values: compensated, and aware of overflow.
//!
//! A plain `f64` sum of finite values loses small terms next to large ones and turns
//! into infinity past `f64::MAX` (about 1.8e308), which a summary would then report as
//! a sum and a mean of infinity. [`WideSum`] keeps a Neumaier-compensated sum, and
//! beside it the same sum scaled down by 2^64, which cannot overflow for fewer than
//! 2^63 finite values. The sum is judged by its final value, not by the partial sums
//! on the way: while no partial sum left the `f64` range it is the plain compensated
//! sum; once one did, it is the scaled sum scaled back, which is finite (and not
//! flagged) whenever the final sum fits, as `MAX + MAX - MAX` does. Only then are terms
//! below about 2^-1010 (1e-304) rounded: scaled by 2^-64 they fall among the subnormal
//! numbers. The mean comes out finite and exact to rounding either way.

/// The scale of the overflow-proof sum: values are multiplied by `2^-SCALE_EXP`.
const SCALE_EXP: i32 = 64;

/// A running sum of `f64` values (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct WideSum {
    /// Neumaier sum and its compensation, at the values' own scale.
    sum: f64,
    compensation: f64,
    /// The same at `2^-SCALE_EXP`, used once a plain partial sum has overflowed.
    scaled: f64,
    scaled_compensation: f64,
    /// Whether a plain partial sum of finite values left the `f64` range (the final sum
    /// may still fit).
    partial_overflowed: bool,
    /// Whether a value was not finite (the sum is then what IEEE arithmetic says).
    non_finite: bool,
}

/// Adds `v` to a Neumaier sum `(s, c)`.
fn neumaier(s: &mut f64, c: &mut f64, v: f64) {
    let t = *s + v;
    if s.abs() >= v.abs() {
        *c += (*s - t) + v;
    } else {
        *c += (v - t) + *s;
    }
    *s = t;
}

impl WideSum {
    /// Adds one value.
    pub(crate) fn add(&mut self, v: f64) {
        if !v.is_finite() {
            self.non_finite = true;
        }
        neumaier(
            &mut self.scaled,
            &mut self.scaled_compensation,
            v * (-SCALE_EXP as f64).exp2(),
        );
        if !self.partial_overflowed {
            neumaier(&mut self.sum, &mut self.compensation, v);
            if !self.non_finite && !(self.sum + self.compensation).is_finite() {
                self.partial_overflowed = true;
            }
        }
    }

    /// The scaled sum at the values' own scale: finite exactly when the sum fits.
    fn unscaled(&self) -> f64 {
        (self.scaled + self.scaled_compensation) * f64::from(SCALE_EXP).exp2()
    }

    /// The sum: finite whenever every value was finite and the final sum fits an `f64`
    /// (whatever the partial sums did); ±∞ when it does not fit (then
    /// [`WideSum::overflowed`] says so).
    pub(crate) fn sum(&self) -> f64 {
        if self.non_finite {
            return self.sum;
        }
        if self.partial_overflowed {
            return self.unscaled();
        }
        self.sum + self.compensation
    }

    /// Whether the final sum of finite values is beyond the `f64` range.
    pub(crate) fn overflowed(&self) -> bool {
        !self.non_finite && self.partial_overflowed && !self.unscaled().is_finite()
    }

    /// The mean of `count` values, kept within `[min, max]`: finite whenever every
    /// value was, even when their sum overflowed.
    pub(crate) fn mean(&self, count: u64, min: f64, max: f64) -> f64 {
        if count == 0 {
            return 0.0;
        }
        let n = count as f64;
        let mean = if self.overflowed() {
            ((self.scaled + self.scaled_compensation) / n) * f64::from(SCALE_EXP).exp2()
        } else {
            self.sum() / n
        };
        if self.non_finite {
            mean
        } else {
            mean.clamp(min, max)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum_of(values: &[f64]) -> WideSum {
        let mut s = WideSum::default();
        for &v in values {
            s.add(v);
        }
        s
    }

    #[test]
    fn small_terms_next_to_large_ones_are_not_lost() {
        // By hand: 1e16 + 1 - 1e16 = 1; a plain f64 sum gives 0.
        let s = sum_of(&[1e16, 1.0, -1e16]);
        assert_eq!(s.sum(), 1.0);
        let plain: f64 = [1e16, 1.0, -1e16].iter().sum();
        assert_eq!(plain, 0.0);
    }

    #[test]
    fn a_sum_past_f64_max_is_flagged_and_its_mean_stays_finite() {
        // Guards the summaries that printed a sum and a mean of infinity (null in JSON)
        // for finite values near f64::MAX.
        let s = sum_of(&[f64::MAX, f64::MAX]);
        assert!(s.overflowed());
        assert_eq!(s.sum(), f64::INFINITY);
        assert_eq!(s.mean(2, f64::MAX, f64::MAX), f64::MAX);

        let s = sum_of(&[-f64::MAX, -f64::MAX, -f64::MAX]);
        assert!(s.overflowed());
        assert_eq!(s.sum(), f64::NEG_INFINITY);
        assert_eq!(s.mean(3, -f64::MAX, -f64::MAX), -f64::MAX);

        // 10 × 1e308 overflows; the mean is 1e308 (to rounding).
        let s = sum_of(&[1e308; 10]);
        assert!(s.overflowed());
        let mean = s.mean(10, 1e308, 1e308);
        assert!(mean.is_finite());
        assert!((mean - 1e308).abs() <= 1e308 * 1e-15, "{mean}");
    }

    #[test]
    fn a_sum_that_fits_after_a_partial_sum_overflowed_is_exact_and_not_flagged() {
        // Guards a past bug: once a partial sum left the f64 range the flag stayed set,
        // and the window reported `"sum": null, "sum_overflow": true` for a sum that
        // fits. By hand: MAX + MAX - MAX = MAX; its mean is MAX / 3.
        let s = sum_of(&[f64::MAX, f64::MAX, -f64::MAX]);
        assert!(!s.overflowed());
        assert_eq!(s.sum(), f64::MAX);
        let mean = s.mean(3, -f64::MAX, f64::MAX);
        assert!((mean - f64::MAX / 3.0).abs() <= f64::MAX * 1e-15, "{mean}");

        // 1.7e308 + 1.7e308 - 1.7e308 = 1.7e308 (the partial sum 3.4e308 overflows).
        let s = sum_of(&[1.7e308, 1.7e308, -1.7e308]);
        assert!(!s.overflowed());
        assert_eq!(s.sum(), 1.7e308);

        // ±1.7e308 twice each, in an order whose partial sums overflow both ways: 0.
        let s = sum_of(&[1.7e308, 1.7e308, -1.7e308, -1.7e308, -1.7e308, 1.7e308]);
        assert!(!s.overflowed());
        assert_eq!(s.sum(), 0.0);
        assert_eq!(s.mean(6, -1.7e308, 1.7e308), 0.0);

        // Back out of the range after coming back into it: flagged again.
        let s = sum_of(&[1.7e308, 1.7e308, -1.7e308, 1.7e308]);
        assert!(s.overflowed());
        assert_eq!(s.sum(), f64::INFINITY);
    }

    #[test]
    fn sums_that_fit_are_not_flagged() {
        let s = sum_of(&[1.5, 2.5, -1.0]);
        assert!(!s.overflowed());
        assert_eq!(s.sum(), 3.0);
        assert_eq!(s.mean(3, -1.0, 2.5), 1.0);
        let s = sum_of(&[f64::MAX, -f64::MAX, f64::MAX]);
        assert!(!s.overflowed());
        assert_eq!(s.sum(), f64::MAX);
    }

    #[test]
    fn non_finite_values_give_what_ieee_arithmetic_gives() {
        let s = sum_of(&[1.0, f64::INFINITY]);
        assert!(!s.overflowed());
        assert_eq!(s.sum(), f64::INFINITY);
        assert!(sum_of(&[f64::NAN, 1.0]).sum().is_nan());
    }
}
