//go:build !race

package telemetry_test

// raceEnabled reports whether the race detector instruments the binary.
const raceEnabled = false
