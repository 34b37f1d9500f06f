package respond

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/apierr"
)

// ThreadMetadata is the metadata key that carries a stateless request's
// thread.
const ThreadMetadata = "toolrelay_thread"

// MaxStatelessThreads bounds the threads a stateless backend holds: past
// it, starting a thread forgets the one used longest ago.
const MaxStatelessThreads = 1024

// A statelessThread is a thread of Stateless mode: every item sent and received, in order,
// and the last step, for Resume.
type statelessThread struct {
	items []responses.ResponseInputItemUnionParam
	last  *driver.Step
	used  int64 // a counter, for eviction
}

// startStateless sends the user's message on thread (a new one when ""),
// with the thread's whole history.
func (b *Backend) startStateless(ctx context.Context, thread string, msg responses.ResponseInputItemUnionParam, format *driver.Format) (*driver.Step, error) {
	if thread == "" {
		thread = "stateless_" + rand.Text()
		b.mu.Lock()
		b.newHistory(thread)
		b.mu.Unlock()
	}
	return b.respondStateless(ctx, thread, []responses.ResponseInputItemUnionParam{msg}, format)
}

// newHistory makes thread's history, forgetting the oldest one past the
// bound. The caller holds b.mu.
func (b *Backend) newHistory(thread string) {
	if b.histories == nil {
		b.histories = map[string]*statelessThread{}
	}
	if len(b.histories) >= MaxStatelessThreads {
		var oldest string
		for id, h := range b.histories {
			if oldest == "" || h.used < b.histories[oldest].used {
				oldest = id
			}
		}
		delete(b.histories, oldest)
	}
	b.tick++
	b.histories[thread] = &statelessThread{used: b.tick}
}

// history returns thread's history, or a NotFound error.
func (b *Backend) statelessThread(thread string) (*statelessThread, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.histories[thread]
	if h == nil {
		return nil, errcode.Errorf(errcode.NotFound, "%s: stateless thread %q is not held by this backend: a stateless thread lives in the process that started it (nothing of it is stored on the service)", b.name, thread)
	}
	b.tick++
	h.used = b.tick
	return h, nil
}

// respondStateless sends the thread's history followed by input, and
// keeps input and the response's output items in the history.
func (b *Backend) respondStateless(ctx context.Context, thread string, input []responses.ResponseInputItemUnionParam, format *driver.Format) (*driver.Step, error) {
	h, err := b.statelessThread(thread)
	if err != nil {
		return nil, err
	}
	all := append(h.items[:len(h.items):len(h.items)], input...)
	step, r, err := b.respondWith(ctx, thread, all, format)
	if err != nil {
		return nil, err
	}
	items := make([]responses.ResponseInputItemUnionParam, len(r.items))
	for i, raw := range r.items {
		if err := json.Unmarshal(raw, &items[i]); err != nil {
			return nil, fmt.Errorf("%s: an output item cannot be sent back: %w", b.name, err)
		}
	}
	b.mu.Lock()
	h.items, h.last = append(all, items...), step
	b.mu.Unlock()
	return step, nil
}

// resumeStateless returns thread's last step.
func (b *Backend) resumeStateless(thread string) (*driver.Step, error) {
	h, err := b.statelessThread(thread)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if h.last == nil {
		return nil, errcode.Errorf(errcode.NotFound, "%s: stateless thread %q has no response yet", b.name, thread)
	}
	return h.last, nil
}

// cancelStateless answers the pending calls of thread's last step as
// stopped (see canceledItem), in its history, so that the next request is
// well formed.
func (b *Backend) cancelStateless(thread string) error {
	h, err := b.statelessThread(thread)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if h.last != nil {
		for _, c := range h.last.Calls {
			h.items = append(h.items, canceledItem(c.ID, c.Name, c.Kind == driver.ServiceApproval))
		}
		h.last = &driver.Step{Thread: thread, Text: CanceledOutput}
	}
	return nil
}

// newReplyItems creates a response, as newReply does, and keeps its output
// items as the service sent them.
func (b *Backend) newReplyItems(ctx context.Context, p *responses.ResponseNewParams) (*reply, error) {
	var raw json.RawMessage
	if _, err := b.client.Responses.New(ctx, *p, option.WithResponseBodyInto(&raw)); err != nil {
		return nil, apierr.WithRefusal(err)
	}
	rep := new(reply)
	var items struct {
		Output []json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(raw, rep); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	rep.items = items.Output
	return rep, nil
}
