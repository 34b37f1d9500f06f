package mcptools

// Broken exports broken to the tests: whether an error of a call says the
// connection failed, which drops the session.
var Broken = broken
