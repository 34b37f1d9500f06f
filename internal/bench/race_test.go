//go:build race

package bench

// raceEnabled reports whether the race detector instruments the binary:
// it slows the clients unevenly, so cost guards do not run under it.
const raceEnabled = true
