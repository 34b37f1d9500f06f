// Package defaults fills the options a caller left zero with their
// defaults, in one way for every package: a size, a count or a duration
// that is not positive takes its default.
package defaults

// A Number is an option a positive value sets: a size, a count, a
// duration.
type Number interface {
	~int | ~int32 | ~int64 | ~float64
}

// Positive sets *p to def unless *p is positive.
func Positive[T Number](p *T, def T) {
	if *p <= 0 {
		*p = def
	}
}
