package core

// ArgumentsDigest exposes argumentsDigest to the external tests, which
// compute the digest a journal keeps of a call's arguments.
var ArgumentsDigest = argumentsDigest
