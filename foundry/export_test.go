package foundry

import (
	"context"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/internal/respond"
)

// CanceledOutputForTest is the output sent for a call canceled by a stop.
var CanceledOutputForTest = respond.CanceledOutput

// CanceledReasonForTest is the reason of the denial sent for an MCP
// approval request canceled by a stop.
const CanceledReasonForTest = respond.CanceledReason

// OfferForTest returns what a request of b offers for format: the agent
// reference the loop's Offer gives.
func OfferForTest(b *Backend, format *driver.Format) (map[string]any, error) {
	list, v := b.tools.Snapshot()
	version, err := b.version(context.Background(), list, v, format)
	return agentRef(b.agentName, version), err
}

// DigestOfferForTest is OfferForTest without the memo of recent offers:
// the version found by the definition's digest, as before it.
func DigestOfferForTest(b *Backend, format *driver.Format) (map[string]any, error) {
	list, _ := b.tools.Snapshot()
	version, err := b.versionOf(context.Background(), list, format)
	return agentRef(b.agentName, version), err
}
