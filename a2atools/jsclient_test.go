package a2atools_test

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"testing"

	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/internal/nodetest"
)

// TestMain serves the agents of the official client's test (clients/a2a)
// when TOOLRELAY_A2A_SERVE is "http", on a loopback port it prints as
// URL=…, instead of testing.
func TestMain(m *testing.M) {
	if os.Getenv("TOOLRELAY_A2A_SERVE") != "http" {
		os.Exit(m.Run())
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("URL=http://%s\n", l.Addr())
	log.Fatal(http.Serve(l, servedAgents()))
}

// servedAgents serves, each at its own path, the agents the official
// client drives: /lookup answers (a call of lookup, then the answer; a
// second message on its context is echoed), /wait waits until canceled,
// /refund asks for approval of a refund.
func servedAgents() http.Handler {
	waitTurn := &coretest.Script{Turns: []coretest.Turn{{Steps: []coretest.Step{
		{Calls: []coretest.Call{{Name: "wait"}}},
		{Text: "never said"},
	}}}}
	mux := http.NewServeMux()
	for name, script := range map[string]*coretest.Script{"lookup": lookupScript, "wait": waitTurn, "refund": refundScript} {
		_, h, err := agentHandler(script, "")
		if err != nil {
			log.Fatal(err)
		}
		mux.Handle("/"+name+"/", http.StripPrefix("/"+name, h))
	}
	return mux
}

// TestOfficialJSClient runs clients/a2a: the official A2A JavaScript SDK
// (@a2a-js/sdk, through its v0.3 compatibility layer) sending, streaming,
// canceling and answering an approval on agents served by NewHandler, the
// server being this test binary (see TestMain). It needs Node.js and the
// packages `npm ci` installs in clients/a2a (.ci/run does it); without
// them it is skipped.
func TestOfficialJSClient(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	nodetest.Run(t, "../clients/a2a", "@a2a-js/sdk", "the official A2A JavaScript client", "TOOLRELAY_A2A_SERVER="+exe)
}
