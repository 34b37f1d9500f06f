package temporal

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/toolrelay/toolrelay/errcode"
	journaldriver "github.com/toolrelay/toolrelay/journal/driver"
)

// The names of the note workflow, its update and its query. As the
// thread workflow's, they never change.
const (
	// NoteWorkflowName is the note workflow's name.
	NoteWorkflowName = "toolrelay.Note"
	// UpdateSetNote sets the note's value; an empty value clears it, and
	// ends the workflow.
	UpdateSetNote = "set-note"
	// QueryNote returns the note's value (a NoteState).
	QueryNote = "note"
)

// NoteState is what the note workflow starts with, what its query
// returns, and what it carries into the run that continues it as new.
type NoteState struct {
	// Value is the note's value; empty when none is set.
	Value string `json:"value,omitempty"`
}

// Note is the workflow keeping one note of a thread (see
// [Runner.SetNote]): its value, set by the set-note update, read by the
// note query. It continues as new when its history grows long, and ends
// once the note is cleared. [Register] registers it beside the thread
// workflow.
//
// It is workflow code: deterministic, no wall clock.
func Note(ctx workflow.Context, st NoteState) error {
	cleared := false
	err := workflow.SetUpdateHandler(ctx, UpdateSetNote, func(ctx workflow.Context, value string) error {
		st.Value, cleared = value, value == ""
		return nil
	})
	if err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, QueryNote, func() (NoteState, error) { return st, nil }); err != nil {
		return err
	}
	long := func() bool {
		info := workflow.GetInfo(ctx)
		return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > DefaultMaxHistoryEvents
	}
	if err := workflow.Await(ctx, func() bool { return cleared || long() }); err != nil {
		return err
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return err
	}
	if st.Value == "" {
		return nil
	}
	return workflow.NewContinueAsNewError(ctx, NoteWorkflowName, st)
}

var _ journaldriver.Notes = (*Runner)(nil)

// noteID returns the id of the workflow keeping note name of thread of
// backend for the workers of queue: a digest of the four, so that any
// name fits a workflow id, no two keys share one, and programs of other
// task queues in the namespace have notes of their own.
func noteID(queue, backend, thread, name string) string {
	h := sha256.New()
	for _, s := range []string{queue, backend, thread, name} {
		h.Write(binary.AppendUvarint(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	return "toolrelay-note-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// SetNote implements journal/driver.Notes in Temporal: value is kept by a
// note workflow of its own (see [Note]), which the workers of the
// runner's task queue run, so that every runner of that queue, in any
// process reaching the server, reads it, as every process sharing a
// journal reads the journal's notes. Package web keeps its chats' records
// so: its handlers over this runner, in any process, serve any chat. An
// empty value clears the note (its workflow ends). A value past the
// loop's MaxPayloadBytes is refused (InvalidArgument); SetNote returns
// once the workflow recorded the value. Like a turn, it waits for a
// worker of the queue, within ctx.
func (r *Runner) SetNote(ctx context.Context, backend, thread, name, value string) error {
	id := noteID(r.opts.TaskQueue, backend, thread, name)
	if value == "" {
		h, err := r.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: id, UpdateName: UpdateSetNote, Args: []any{""}, WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(ctx, nil)
		}
		if err = clientError("note", err); errcode.Of(err) == errcode.NotFound {
			return nil // no note, or cleared already
		}
		return err
	}
	if max := r.opts.loop().withDefaults().MaxPayloadBytes; len(value) > max {
		return &errcode.Error{Code: errcode.InvalidArgument, Op: "temporal: note",
			Err: fmt.Errorf("a note of %d bytes passes the limit of what the history keeps (%d bytes)", len(value), max)}
	}
	start := r.c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                r.opts.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowTaskTimeout:      r.opts.WorkflowTaskTimeout,
	}, NoteWorkflowName, NoteState{})
	h, err := r.c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: start,
		UpdateOptions: client.UpdateWorkflowOptions{
			WorkflowID: id, UpdateName: UpdateSetNote, Args: []any{value}, WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	return clientError("note", err)
}

// Note implements journal/driver.Notes: the value SetNote recorded under
// name for thread of backend, from any process (with a runner of the same
// task queue), and whether there is one. A worker of the queue answers,
// within ctx.
func (r *Runner) Note(ctx context.Context, backend, thread, name string) (string, bool, error) {
	v, err := r.c.QueryWorkflow(ctx, noteID(r.opts.TaskQueue, backend, thread, name), "", QueryNote)
	if err != nil {
		if err = clientError("note", err); errcode.Of(err) == errcode.NotFound {
			return "", false, nil
		}
		return "", false, err
	}
	var st NoteState
	if err := v.Get(&st); err != nil {
		return "", false, clientError("note", err)
	}
	return st.Value, st.Value != "", nil
}
