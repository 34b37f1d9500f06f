package temporal

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// TestNote: the note workflow keeps the value its last set-note update
// gave, which its query returns, and ends once the note is cleared.
func TestNote(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(quiet))
	te := s.NewTestWorkflowEnvironment()
	te.SetTestTimeout(30 * time.Second)
	te.RegisterWorkflowWithOptions(Note, workflow.RegisterOptions{Name: NoteWorkflowName})
	var (
		got  []string
		errs []error
	)
	set := func(at time.Duration, value string) {
		te.RegisterDelayedCallback(func() {
			te.UpdateWorkflow(UpdateSetNote, "", &testsuite.TestUpdateCallback{
				OnReject:   func(err error) { errs = append(errs, err) },
				OnAccept:   func() {},
				OnComplete: func(_ any, err error) { errs = append(errs, err) },
			}, value)
		}, at)
	}
	read := func(at time.Duration) {
		te.RegisterDelayedCallback(func() {
			v, err := te.QueryWorkflow(QueryNote)
			if err != nil {
				t.Errorf("query: %v", err)
				return
			}
			var st NoteState
			if err := v.Get(&st); err != nil {
				t.Errorf("query's value: %v", err)
			}
			got = append(got, st.Value)
		}, at)
	}
	read(time.Second)
	set(2*time.Second, "first")
	read(3 * time.Second)
	set(4*time.Second, "second")
	read(5 * time.Second)
	set(6*time.Second, "")
	te.ExecuteWorkflow(NoteWorkflowName, NoteState{})
	if !te.IsWorkflowCompleted() {
		t.Fatal("the note workflow did not end once cleared")
	}
	if err := te.GetWorkflowError(); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	if diff := cmp.Diff([]string{"", "first", "second"}, got); diff != "" {
		t.Errorf("the note's values (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]error{nil, nil, nil}, errs, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
		t.Errorf("the updates' errors (-want +got):\n%s", diff)
	}
}

// TestNoteID: each note of each task queue has a workflow of its own,
// whatever its names hold.
func TestNoteID(t *testing.T) {
	keys := [][4]string{
		{"q", "web", "web-chat/c", "web"}, {"q", "web", "web-chat/c", "other"}, {"q", "web", "web-chat/d", "web"},
		{"q", "openai", "web-chat/c", "web"}, {"other", "web", "web-chat/c", "web"},
		{"q", "a", "bc", "d"}, {"q", "ab", "c", "d"}, {"q", "a", "b", "cd"}, {"qa", "", "b", "cd"},
	}
	seen := map[string][4]string{}
	for _, k := range keys {
		id := noteID(k[0], k[1], k[2], k[3])
		if other, ok := seen[id]; ok {
			t.Errorf("notes %q and %q share the workflow %s", other, k, id)
		}
		seen[id] = k
		if again := noteID(k[0], k[1], k[2], k[3]); again != id {
			t.Errorf("note %q: workflow %s, then %s", k, id, again)
		}
	}
}
