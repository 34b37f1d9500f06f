//go:build race

package telemetry_test

// raceEnabled reports whether the race detector instruments the binary:
// sync.Pool drops some of what it is given under it.
const raceEnabled = true
