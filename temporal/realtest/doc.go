// Package realtest proves the Temporal loop (module toolrelay/temporal) on
// a real Temporal server that its tests start in their own process
// (go.temporal.io/server/temporaltest): the conformance suite through the
// Temporal runner on every backend's fake, workers killed while they run,
// approvals and streams across processes, and the benchmark against core's
// own runner. It is a module of its own, so that neither the main module
// nor the temporal package's module carries the server's weight; its tests
// run without -race (the server is not ours).
package realtest
