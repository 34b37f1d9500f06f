package replay

// Parses returns the number of cassette files parsed so far.
func Parses() int64 { return parses.Load() }

// MaxCached is the number of parsed cassettes the cache keeps.
const MaxCached = maxCached
