// Package respond is the tool loop over the Responses API that the foundry
// and responses backends share: a thread is a conversation (Conversation
// mode) or the latest response of a chain (Chain mode); each step is a
// response whose function_call items are the calls, and the results go
// back as function_call_output items of the next response. The backends
// build a [Backend] with [New] and give it a client, and for Foundry the
// agent reference every request carries.
package respond

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/core/driver"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/owned"
)

// Mode says how the responses of a thread are linked.
type Mode string

// The three ways the responses of a thread are linked.
const (
	// Conversation keeps a thread in a conversation: the first user
	// message creates it, and every response is made in it. The thread is
	// the conversation id.
	Conversation Mode = "conversation"
	// Chain links each response to the one before with
	// previous_response_id. The thread is the latest response id.
	Chain Mode = "previous_response_id"
	// Stateless keeps nothing on the service (store: false): every
	// request resends the thread's whole history, which the backend holds
	// in memory (reasoning items with their encrypted content). The
	// thread is an id of the backend's own; it lives as long as the
	// backend, so it cannot be resumed in another process.
	Stateless Mode = "stateless"
)

// CheckMode returns m, or def for "", refusing a mode not among allowed.
func CheckMode(name string, m, def Mode, allowed ...Mode) (Mode, error) {
	if m == "" {
		return def, nil
	}
	if m == "chain" {
		m = Chain
	}
	if slices.Contains(allowed, m) {
		return m, nil
	}
	return "", errcode.Errorf(errcode.InvalidArgument, "%s: unknown mode %q: want one of %q", name, m, allowed)
}

// Delivery says how a backend receives a response.
type Delivery string

// The deliveries of the Responses API.
const (
	// Blocking sends each request and reads the whole response as one
	// JSON body (the default).
	Blocking Delivery = "blocking"
	// Streaming receives each response as server-sent events.
	Streaming Delivery = "streaming"
)

// CheckDelivery reports whether t streams, refusing an unknown one.
func CheckDelivery(name string, t Delivery) (bool, error) {
	switch t {
	case "", Blocking:
		return false, nil
	case Streaming:
		return true, nil
	}
	return false, errcode.Errorf(errcode.InvalidArgument, "%s: unknown delivery (transport) %q: want %q or %q", name, t, Blocking, Streaming)
}

// FunctionTool is a tool as the Responses API and the agents API define
// one: a function tool; a namespace tool (Name, Description, and its
// function tools in Tools: openai-go v3.105 responses.NamespaceToolParam);
// or the tool_search tool (Type only) that loads the deferred ones.
type FunctionTool struct {
	Type         string          `json:"type"`
	Name         string          `json:"name,omitempty"`
	Description  string          `json:"description,omitempty"`
	Parameters   json.RawMessage `json:"parameters,omitempty"`
	Strict       bool            `json:"strict,omitempty"`
	DeferLoading bool            `json:"defer_loading,omitempty"`
	Tools        []FunctionTool  `json:"tools,omitempty"`
}

// FunctionTools returns the toolbox's tools as function tools, deferred
// ones with defer_loading, followed by a tool_search tool (executed by the
// service) when there is any. The tools of a namespace (named "ns.name":
// see core.NewTool) are the function tools of one namespace tool ns, in
// the place of the first of them.
func FunctionTools(tools *core.Toolbox) []FunctionTool { return FunctionToolsOf(tools.Tools()) }

// FunctionToolsOf is FunctionTools of a list of tools.
func FunctionToolsOf(tools []*core.Tool) []FunctionTool {
	var out []FunctionTool
	namespaces := map[string]int{} // where each namespace tool is in out
	deferred := false
	for _, t := range tools {
		f := FunctionTool{Type: "function", Name: t.Name(), Description: t.Description(), Parameters: t.Parameters(), Strict: t.Strict(), DeferLoading: t.DeferLoading()}
		deferred = deferred || t.DeferLoading()
		ns, name := SplitName(t.Name())
		if ns == "" {
			out = append(out, f)
			continue
		}
		i, ok := namespaces[ns]
		if !ok {
			i, namespaces[ns] = len(out), len(out)
			// The service wants a description of the namespace; the
			// functions' own say what they do.
			out = append(out, FunctionTool{Type: "namespace", Name: ns, Description: "The " + ns + " functions."})
		}
		f.Name = name
		out[i].Tools = append(out[i].Tools, f)
	}
	if deferred {
		out = append(out, FunctionTool{Type: "tool_search"})
	}
	return out
}

// SplitName returns the namespace and the function a tool's name names:
// "crm" and "lookup" for "crm.lookup", "" and the name for a name without
// a namespace.
func SplitName(name string) (namespace, function string) {
	if ns, f, ok := strings.Cut(name, "."); ok {
		return ns, f
	}
	return "", name
}

// qualifiedName returns the name of the tool a call of function in
// namespace names (see SplitName).
func qualifiedName(namespace, function string) string {
	if namespace == "" {
		return function
	}
	return namespace + "." + function
}

// Config configures a [Backend].
type Config struct {
	// Name is the backend's name ("foundry", "responses").
	Name   string
	Client openai.Client
	Mode   Mode
	Stream bool
	// Keep leaves the conversations the backend created on the service.
	Keep   bool
	Logger *slog.Logger
	// AgentRef is the agent reference every request carries; nil sends
	// Model, Instructions and Tools instead.
	AgentRef            map[string]any
	Model, Instructions string
	Tools               []responses.ToolUnionParam
	// Offer, if set, is called before each request, and returns what
	// the request offers the model: the tools (when it carries them) or
	// the agent reference, as they are now (a backend whose toolbox
	// changed mid-run offers the new set from the next request).
	Offer func(ctx context.Context, format *driver.Format) (tools []responses.ToolUnionParam, agentRef map[string]any, err error)
	// AgentFormats says that the agent reference Offer returns for a
	// run's format names an agent (version) whose definition carries that
	// format (a request that names an agent cannot carry one): runs may
	// then ask for a format.
	AgentFormats bool
	// OnClose, if set, runs at Close after the conversations were deleted
	// (unless Keep), when no thread is kept for a decision; its error
	// joins theirs.
	OnClose func(ctx context.Context) error
	// AgentGone, if set, is called when a request naming agentRef was
	// refused as NotFound; it reports whether the agent (version) is gone,
	// in which case the request is sent once more with what Offer then
	// returns.
	AgentGone func(ctx context.Context, agentRef map[string]any) bool
}

// Backend is the loop: a [driver.Backend] and [driver.Canceler].
type Backend struct {
	name         string
	client       openai.Client
	mode         Mode
	stream       bool
	keep         bool
	logger       *slog.Logger
	agentRef     map[string]any
	model        string
	instructions string
	tools        []responses.ToolUnionParam
	offer        func(ctx context.Context, format *driver.Format) ([]responses.ToolUnionParam, map[string]any, error)
	agentFormats bool
	onClose      func(ctx context.Context) error
	agentGone    func(ctx context.Context, agentRef map[string]any) bool

	mu            sync.Mutex
	conversations []string                    // conversations Close deletes: created here, or taken over (adopt)
	kept          map[string]bool             // threads Close leaves (KeepThread) until their turn is over
	canceled      map[string][]canceledCall   // chain mode: calls canceled, by response id
	histories     map[string]*statelessThread // stateless mode: the threads' histories
	tick          int64                       // stateless mode: uses, for eviction
	closed        bool
}

// New returns the loop c configures.
func New(c Config) *Backend {
	l := c.Logger
	if l == nil {
		l = slog.Default()
	}
	return &Backend{
		name: c.Name, client: c.Client, mode: c.Mode, stream: c.Stream, keep: c.Keep, logger: l,
		agentRef: c.AgentRef, model: c.Model, instructions: c.Instructions, tools: c.Tools, offer: c.Offer, agentFormats: c.AgentFormats, onClose: c.OnClose, agentGone: c.AgentGone,
	}
}

// Name implements [driver.Backend].
func (b *Backend) Name() string { return b.name }

// Capabilities implements [driver.CapabilityReporter]: inputs may carry
// images and files, outputs may be content arrays, a run may set a
// response format unless the requests name an agent that cannot carry it
// (Config.AgentFormats); deferred tools are
// loaded by the service's tool search; functions may be grouped in
// namespaces; there is no failure flag.
func (b *Backend) Capabilities() driver.Capabilities {
	return driver.Capabilities{ContentArrays: true, InputImages: true, InputFiles: true, ResponseFormat: b.agentRef == nil || b.agentFormats, Streams: b.stream, ServiceApprovals: true,
		LocalThreads: b.mode == Stateless, DeferredLoading: true, LostAnswersRerun: b.mode == Stateless || b.mode == Chain, Namespaces: true}
}

// Mode returns how the backend links the responses of a thread.
func (b *Backend) Mode() Mode { return b.mode }

// Client returns the openai-go client of the responses and conversations
// requests.
func (b *Backend) Client() *openai.Client { return &b.client }

// KeepThread implements [driver.Keeper]: Close leaves thread (a
// conversation, or a chain's response) on the service, and skips
// Config.OnClose, which would delete what it uses.
func (b *Backend) KeepThread(thread string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kept == nil {
		b.kept = map[string]bool{}
	}
	b.kept[thread] = true
}

// settle passes a step on, noting first that a step with no call waiting
// ended its thread's turn: a thread kept for a decision no longer needs
// keeping, and Close deletes it as any other it created or took over.
func (b *Backend) settle(step *driver.Step, err error) (*driver.Step, error) {
	if err == nil && step != nil && len(step.Calls) == 0 {
		b.mu.Lock()
		delete(b.kept, step.Thread)
		b.mu.Unlock()
	}
	return step, err
}

// moveKept moves the keeping of a chain's thread to its next response.
func (b *Backend) moveKept(from, to string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kept[from] {
		delete(b.kept, from)
		b.kept[to] = true
	}
}

// adopt takes over, on a resume, a conversation that a backend of another
// process created and marked disposable in its metadata: this backend
// carries its run on, so its Close deletes it once the run is over.
func (b *Backend) adopt(ctx context.Context, conv string) {
	if b.keep {
		return
	}
	b.mu.Lock()
	known := slices.Contains(b.conversations, conv)
	b.mu.Unlock()
	if known {
		return
	}
	c, err := b.client.Conversations.Get(ctx, conv)
	var metadata map[string]string
	if err == nil {
		err = json.Unmarshal([]byte(c.JSON.Metadata.Raw()), &metadata)
	}
	if err != nil || !owned.IsDisposable(metadata) {
		return // not one to delete (a failed read is found again by the resume)
	}
	b.mu.Lock()
	if !slices.Contains(b.conversations, conv) {
		b.conversations = append(b.conversations, conv)
	}
	b.mu.Unlock()
}

// Close deletes, unless the backend keeps them, the conversations it
// created or took over whose turn is over, then, when no thread is kept
// for a decision, runs Config.OnClose. It returns their errors, joined.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	convs := slices.DeleteFunc(b.conversations, func(id string) bool { return b.kept[id] })
	kept := len(b.kept)
	b.conversations = nil
	b.mu.Unlock()
	if b.keep {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, id := range convs {
		if _, err := b.client.Conversations.Delete(ctx, id); err != nil && ErrorCode(err) != errcode.NotFound {
			errs = append(errs, fmt.Errorf("%s: delete conversation %s: %w", b.name, id, err))
		}
	}
	if kept > 0 {
		// What the kept threads need (a Foundry agent version) stays.
		b.logger.Info(b.name+": the agent stays: threads paused for a decision use it", "threads", kept)
	} else if b.onClose != nil {
		if err := b.onClose(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
