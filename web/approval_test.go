package web

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestForeignApproval checks that answers naming an approval that is not
// one of the chat's (another chat's call, or an id made up) are refused
// (400) with nothing decided, not even the chat's own approval answered
// in the same request, and the chat not resumed.
func TestForeignApproval(t *testing.T) {
	s := newTestServer(t, refundScript, nil, nil)
	for _, chat := range []string{"c1", "c2"} {
		if sse := readAll(t, s.post(t, "ann", userMessage(chat, "refund 7"))); !strings.Contains(sse, `"tool-approval-request"`) {
			t.Fatalf("chat %s: no approval asked:\n%s", chat, sse)
		}
		s.h.turns.Wait()
	}
	own, other := approvalIDs(t, s, "c1"), approvalIDs(t, s, "c2")
	if len(own) != 1 || len(other) != 1 || own[0] == other[0] {
		t.Fatalf("approvals of c1 %v, of c2 %v: want one each, not the same", own, other)
	}
	received := len(s.b.Received())
	for _, tc := range []struct{ name, id string }{
		{"another chat's", other[0]},
		{"made up", "call_made_up"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := s.post(t, "ann", answersMessage("c1", "msg-1", []approvalAnswer{{ID: own[0], Approved: true}, {ID: tc.id, Approved: true}}))
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("status %d (%s), want 400", resp.StatusCode, body)
			}
			s.h.turns.Wait()
			for _, chat := range []string{"c1", "c2"} {
				list, err := s.r.Approvals(t.Context(), mustThread(t, s, chat))
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range list {
					if a.Decision != nil {
						t.Errorf("chat %s: call %s decided: %+v", chat, a.Key.Call, a.Decision)
					}
				}
			}
			if n := len(s.b.Received()); n != received {
				t.Errorf("the service received %d more requests: the chat was resumed", n-received)
			}
			if rec, err := s.h.store.load(t.Context(), "c1"); err != nil || rec.State != statePaused {
				t.Errorf("c1's record %+v, %v: want it still paused", rec, err)
			}
		})
	}
	// The chat's own answer alone goes on.
	sse := readAll(t, s.post(t, "ann", answersMessage("c1", "msg-1", []approvalAnswer{{ID: own[0], Approved: true}})))
	if got, want := texts(sse), "Done: refunded 150 on order 7."; got != want {
		t.Errorf("answer %q, want %q\n%s", got, want, sse)
	}
}

// approvalIDs returns the ids of the approvals of chat's thread.
func approvalIDs(t *testing.T, s *testServer, chat string) []string {
	t.Helper()
	list, err := s.r.Approvals(t.Context(), mustThread(t, s, chat))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range list {
		ids = append(ids, a.Key.Call)
	}
	return ids
}
