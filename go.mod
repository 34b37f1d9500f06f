module github.com/toolrelay/toolrelay

go 1.26

require (
	github.com/google/go-cmp v0.7.0
	github.com/google/jsonschema-go v0.4.3
)
