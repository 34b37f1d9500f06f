// Package crashtest holds the tests that kill worker processes at every
// point of a call's life and check that the turn still completes with
// each function's effect happening exactly once (or the in-doubt path
// taken as the tool declares), and that several workers sharing a
// PostgreSQL journal never run a call twice. It has no code of its own.
package crashtest
