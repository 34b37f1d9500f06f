package main

import (
	"net"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/openai/openaitest"
)

// serveOpenAI serves the fake OpenAI Agents API on ln; its base URL ends
// in /v1, like the service's.
func serveOpenAI(script *coretest.Script, ln net.Listener, faults []*faultSpec) *openaitest.Server {
	return openaitest.NewServer(script, &openaitest.Options{Listener: ln, Fault: openaiFaults(faults), DuplicateEvents: duplicates(faults)})
}
