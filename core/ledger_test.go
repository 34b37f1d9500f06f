package core

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLedgerRoundTrip: the calls a ledger notes leave out the thread and
// turn the call before them has (issue 48, item 1), and read back as
// they were sent, whatever their order: an empty turn after a named one,
// a thread that changes every step (a Foundry chain), the same call
// repeated; and the first call of each page names its thread and turn.
func TestLedgerRoundTrip(t *testing.T) {
	sent := []callRef{
		{Thread: "conv_1", Turn: "turn_1", ID: "call_1", Name: "lookup"},
		{Thread: "conv_1", Turn: "turn_1", ID: "call_2", Name: "lookup"},
		{Thread: "conv_1", Turn: "", ID: "call_3", Name: "refund", Kind: "mcp"},
		{Thread: "conv_1", Turn: "", ID: "call_4"},
		{Thread: "resp_2", Turn: "", ID: "call_5"},
		{Thread: "resp_3", Turn: "turn_9", ID: "call_6"},
		{Thread: "resp_3", Turn: "turn_9", ID: "call_6"},
		{Thread: "", Turn: "turn_9", ID: "call_7"},
		{Thread: "", Turn: "", ID: "call_8"},
		{Thread: "conv_1", Turn: "turn_1", ID: "call_9"},
	}
	for _, page := range []int{1, 2, 3, len(sent)} {
		var (
			l     ledger
			notes [][]byte // the pages, then the last list
		)
		for _, c := range sent {
			l.sent(c)
			if len(l.calls) == page {
				if l.calls[0].Same {
					t.Errorf("page of %d: a page's first call is marked Same: %+v", page, l.calls[0])
				}
				b, _ := json.Marshal(l.calls)
				notes, l.calls = append(notes, b), nil
			}
		}
		b, _ := json.Marshal(l.calls)
		notes = append(notes, b)
		var got []callRef
		for _, b := range notes {
			var refs []callRef
			if err := json.Unmarshal(b, &refs); err != nil {
				t.Fatal(err)
			}
			got = append(got, expand(refs)...)
		}
		if diff := cmp.Diff(sent, got); diff != "" {
			t.Errorf("pages of %d: the calls read back (-sent +read):\n%s", page, diff)
		}
	}
}
