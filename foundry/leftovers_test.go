package foundry_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/foundry"
)

// TestSharedVersion (issue 30, item 9): processes of one definition share
// one agent version (the second finds the first's by the digest in its
// metadata instead of making its own); a process whose version another
// deleted on Close makes it again and goes on; the last Close leaves no
// version and no conversation.
func TestSharedVersion(t *testing.T) {
	for _, mode := range []foundry.Mode{foundry.Conversation, foundry.Chain} {
		t.Run(string(mode), func(t *testing.T) {
			srv := newFake(t, weatherScript(), nil)
			tools := toolbox(t, &counter{})
			first := open(t, tools, options(srv, mode, false))
			second := open(t, tools, options(srv, mode, false))
			if diff := cmp.Diff([]string{"1"}, srv.AgentVersions("test-agent")); diff != "" {
				t.Fatalf("versions after two processes opened (-want +got):\n%s", diff)
			}
			for _, b := range []*foundry.Backend{first, second} {
				if _, err := newRunner(b, tools, nil).Run(context.Background(), "weather?", nil); err != nil {
					t.Fatal(err)
				}
			}
			// The first process ends: it deletes the version, which the
			// second still uses.
			if err := first.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if got := srv.AgentVersions("test-agent"); len(got) != 0 {
				t.Fatalf("versions after the first Close: %v, want none", got)
			}
			if _, err := newRunner(second, tools, nil).Run(context.Background(), "weather?", nil); err != nil {
				t.Fatalf("a run after another process deleted the version: %v", err)
			}
			if got := srv.AgentVersions("test-agent"); len(got) != 1 {
				t.Errorf("versions after the second process made its own again: %v, want one", got)
			}
			if err := second.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if got, convs := srv.Versions(), srv.Conversations(); len(got) != 0 || len(convs) != 0 {
				t.Errorf("left after the last Close: versions %v, conversations %v; want none", got, convs)
			}
		})
	}
}

// TestCallersConversationStays: a conversation the program did not create
// (the caller's own, so not marked disposable) is not deleted by a backend
// that resumed it, while one a backend created is deleted by the backend
// of another process that resumed it.
func TestCallersConversationStays(t *testing.T) {
	srv := newFake(t, weatherScript(), nil)
	tools := toolbox(t, &counter{})
	first := open(t, tools, options(srv, foundry.Conversation, false))
	mine, err := first.Client().Conversations.New(context.Background(), conversations.ConversationNewParams{
		Items: []responses.ResponseInputItemUnionParam{responses.ResponseInputItemParamOfMessage("weather?", responses.EasyInputMessageRoleUser)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newRunner(first, tools, nil).Resume(context.Background(), mine.ID, nil); err != nil {
		t.Fatal(err)
	}
	made, err := newRunner(first, tools, nil).Run(context.Background(), "weather?", nil)
	if err != nil {
		t.Fatal(err)
	}
	first.KeepThread(made.Thread) // as a run paused for a decision would
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second := open(t, tools, options(srv, foundry.Conversation, false))
	for _, thread := range []string{mine.ID, made.Thread} {
		if _, err := newRunner(second, tools, nil).Resume(context.Background(), thread, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{mine.ID}, srv.Conversations()); diff != "" {
		t.Errorf("conversations left (-want +got):\n%s", diff)
	}
}
