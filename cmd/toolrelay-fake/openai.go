package main

import (
	"errors"
	"net"

	"github.com/toolrelay/toolrelay/core/coretest"
)

type urlCloser interface {
	URL() string
	Close()
}

// serveOpenAI serves the fake OpenAI Agents API on ln.
func serveOpenAI(script *coretest.Script, ln net.Listener) (urlCloser, error) {
	ln.Close()
	return nil, errors.New("the openai fake is not built yet")
}
