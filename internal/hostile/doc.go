// Package hostile holds tests of both backends against a service that
// misbehaves on the wire: a stream that sends only keep-alives, or only
// fields that make no event, a body dripped a byte at a time, an event
// or a response body far past the size limits, a request that is never
// answered. A proxy in front of each fake does the misbehaving; the
// backends must end each case with a clear coded error, within their
// limits of time and memory, and a resume must finish the turn once the
// service behaves again.
package hostile
