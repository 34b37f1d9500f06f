//go:build !race

package bench

// raceEnabled reports whether the race detector instruments the binary.
const raceEnabled = false
