package core

// ArgumentsDigest exposes argumentsDigest to the external tests, which
// compute the digest a journal keeps of a call's arguments.
var ArgumentsDigest = argumentsDigest

// CheckResults exposes checkResults, the last check before results are
// submitted: one result per call, in call order.
var CheckResults = checkResults

// totalsPage is how many calls a page of a turn's totals holds.
const TotalsPage = totalsPage
