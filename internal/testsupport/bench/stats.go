package bench

import "time"

// Percentile is the p-th percentile (0 to 100) of sorted, ascending: the value
// at index (n-1)·p/100, so that 50 is the lower median and 100 the largest.
// Zero for no values.
func Percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[(len(sorted)-1)*p/100]
}

// Ms is d in milliseconds, to the microsecond, for a figure or a metric.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Us is d in microseconds, to the nanosecond.
func Us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
