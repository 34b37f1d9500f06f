package realtest

import (
	"testing"

	"go.temporal.io/server/temporaltest"
)

func TestServerStarts(t *testing.T) {
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	_ = ts.GetDefaultClient()
}
