package openaitest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Webhooks configure the signed webhooks of session events a [Server]
// sends (see Options.Webhooks), as the service sends them to a project's
// webhook endpoint: agent.session.created, agent.session.in_progress,
// agent.session.action_required (one for each agent.session.requires_action
// event, naming the type of the first required action) and
// agent.session.idle. Each is a JSON event {"id", "object": "event",
// "created_at", "type", "data"} POSTed with the Standard Webhooks headers
// webhook-id (the event's id), webhook-timestamp and webhook-signature,
// signed afresh for every attempt (see [SignWebhook]), so that openai-go's
// client.Webhooks.Unwrap verifies it.
type Webhooks struct {
	// URLs receive every delivery, each of them: as when the service's
	// deliveries and their retries land on the different processes of a
	// fleet behind one endpoint.
	URLs []string
	// Secret signs the deliveries: "whsec_" followed by the standard
	// base64 of at least 24 bytes (the key), as the service shows an
	// endpoint's secret, or any other string, used as it is (as openai-go
	// does).
	Secret string
	// Client sends the deliveries; nil means a client of the server's own
	// whose requests time out after 10 s.
	Client *http.Client
	// Duplicates sends each delivery this many more times, to each URL.
	Duplicates int
	// Shuffle sends the deliveries waiting to be sent in a random order
	// (drawn from Seed), four at a time: an event may arrive before one
	// emitted earlier. Without it they are sent one at a time, in order.
	Shuffle bool
	// Seed seeds the order of Shuffle.
	Seed uint64
	// MaxAttempts bounds the attempts at a delivery that is not answered
	// with a 2xx status (a 429 or 503 of a busy receiver, say); zero means
	// 10. The pause between attempts doubles from 5 ms, to 1 s at most.
	MaxAttempts int
}

// A WebhookDelivery is one attempt at sending a webhook, as recorded.
type WebhookDelivery struct {
	// EventID and Type are the event's; Session names its session.
	EventID, Type, Session string
	// URL is where it was sent.
	URL string
	// Attempt numbers the attempts at this delivery from 1.
	Attempt int
	// Status is the answer's status, or 0 if none came.
	Status int
}

// SignWebhook returns the headers that sign a webhook's body for an
// endpoint whose secret is secret (see [Webhooks].Secret): webhook-id (id),
// webhook-timestamp (t, in Unix seconds) and webhook-signature
// ("v1," and the standard base64 of the HMAC-SHA256 of "<id>.<timestamp>.<body>"
// under the secret's key), and a JSON Content-Type. It returns an error
// for a "whsec_" secret that is not valid base64 of at least 24 bytes.
// Tests use it to send what the service would not: a stale timestamp, a
// body the signature does not cover.
func SignWebhook(secret, id string, t time.Time, body []byte) (http.Header, error) {
	key := []byte(secret)
	if enc, ok := strings.CutPrefix(secret, "whsec_"); ok {
		var err error
		if key, err = base64.StdEncoding.Strict().DecodeString(enc); err != nil {
			return nil, fmt.Errorf("openaitest: the webhook secret is not valid base64 after whsec_: %w", err)
		}
		if len(key) < 24 {
			return nil, errors.New("openaitest: the webhook secret's key is shorter than 24 bytes")
		}
	}
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	return http.Header{
		"Content-Type":      {"application/json"},
		"Webhook-Id":        {id},
		"Webhook-Timestamp": {ts},
		"Webhook-Signature": {"v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))},
	}, nil
}

// webhookTypes maps the session events that have a webhook to its type.
var webhookTypes = map[string]string{
	"agent.session.created":         "agent.session.created",
	"agent.session.in_progress":     "agent.session.in_progress",
	"agent.session.requires_action": "agent.session.action_required",
	"agent.session.idle":            "agent.session.idle",
	"agent.session.failed":          "agent.session.failed",
}

// webhookEvent is a webhook's body.
type webhookEvent struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	CreatedAt int64  `json:"created_at"`
	Type      string `json:"type"`
	Data      any    `json:"data"`
}

type webhookSessionData struct {
	ID              string `json:"id"`
	EnvironmentType string `json:"environment_type"`
	EnvironmentID   string `json:"environment_id,omitempty"`
	Connect         *struct {
		RemoteURL string `json:"remote_url"`
	} `json:"connect,omitempty"`
}

type webhookActionData struct {
	ID             string `json:"id"`
	RequiredAction struct {
		Type string `json:"type"`
	} `json:"required_action"`
}

// webhook queues the webhook of session event typ (a key of
// webhookTypes), if the server sends webhooks; body is the session as the
// event shows it. The caller holds s.mu.
func (s *Server) webhook(sess *session, typ string, body *sessionJSON) {
	if s.hooks == nil {
		return
	}
	typ, ok := webhookTypes[typ]
	if !ok {
		return
	}
	ev := webhookEvent{ID: s.newID("whevt"), Object: "event", CreatedAt: time.Now().Unix(), Type: typ}
	if typ == "agent.session.action_required" {
		d := webhookActionData{ID: sess.id}
		if body != nil && len(body.RequiredActions) > 0 {
			d.RequiredAction.Type = body.RequiredActions[0].Type
		}
		ev.Data = d
	} else {
		d := webhookSessionData{ID: sess.id, EnvironmentType: sess.env.Type, EnvironmentID: sess.env.ID}
		if typ == "agent.session.created" && sess.env.RemoteURL != "" {
			d.Connect = &struct {
				RemoteURL string `json:"remote_url"`
			}{sess.env.RemoteURL}
		}
		ev.Data = d
	}
	s.hooks.enqueue(ev.ID, typ, sess.id, mustJSON(ev))
}

// WebhookDeliveries returns the attempts at sending webhooks made so far,
// in the order they were answered (or failed).
func (s *Server) WebhookDeliveries() []WebhookDelivery {
	if s.hooks == nil {
		return nil
	}
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	return slices.Clone(s.hooks.log)
}

// FlushWebhooks waits until every webhook queued so far was delivered (or
// its attempts ran out), or ctx ends, whose error it then returns.
func (s *Server) FlushWebhooks(ctx context.Context) error {
	if s.hooks == nil {
		return nil
	}
	s.hooks.mu.Lock()
	drained := s.hooks.drained
	s.hooks.mu.Unlock()
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// hookSender sends a server's webhooks from a goroutine of its own, never
// under the server's lock.
type hookSender struct {
	cfg    Webhooks
	client *http.Client
	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	queue   []*hookMsg
	rng     *rand.Rand
	pending int           // queued or being sent
	drained chan struct{} // closed while pending is 0
	wake    chan struct{}
	log     []WebhookDelivery
	closed  bool // nothing more is queued
}

type hookMsg struct {
	id, typ, session, url string
	body                  []byte
}

func newHookSender(cfg Webhooks) *hookSender {
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 10
	}
	h := &hookSender{cfg: cfg, client: cfg.Client, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		drained: make(chan struct{}), wake: make(chan struct{}, 1)}
	close(h.drained)
	if h.client == nil {
		h.client = &http.Client{Timeout: 10 * time.Second}
	}
	h.ctx, h.stop = context.WithCancel(context.Background())
	h.wg.Add(1)
	go h.run()
	return h
}

// enqueue queues one delivery of the event to each URL, and its
// duplicates.
func (h *hookSender) enqueue(id, typ, session string, body []byte) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	for _, u := range h.cfg.URLs {
		for range 1 + max(h.cfg.Duplicates, 0) {
			h.queue = append(h.queue, &hookMsg{id: id, typ: typ, session: session, url: u, body: body})
			if h.pending == 0 {
				h.drained = make(chan struct{})
			}
			h.pending++
		}
	}
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

func (h *hookSender) run() {
	defer h.wg.Done()
	inflight := make(chan struct{}, 4)
	for {
		select {
		case <-h.ctx.Done():
			h.mu.Lock()
			n := len(h.queue)
			h.queue, h.closed = nil, true
			h.mu.Unlock()
			h.done(n)
			return
		case <-h.wake:
		}
		h.mu.Lock()
		batch := h.queue
		h.queue = nil
		if h.cfg.Shuffle {
			h.rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
		}
		h.mu.Unlock()
		for i, m := range batch {
			if !h.cfg.Shuffle {
				h.send(m)
				continue
			}
			select {
			case inflight <- struct{}{}:
			case <-h.ctx.Done():
				h.done(len(batch) - i)
				return
			}
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				h.send(m)
				<-inflight
			}()
		}
	}
}

// send delivers m, attempt after attempt until one is answered 2xx, the
// attempts run out, or the server closes.
func (h *hookSender) send(m *hookMsg) {
	defer h.done(1)
	pause := 5 * time.Millisecond
	for attempt := 1; attempt <= h.cfg.MaxAttempts; attempt++ {
		status := h.post(m)
		h.mu.Lock()
		h.log = append(h.log, WebhookDelivery{EventID: m.id, Type: m.typ, Session: m.session, URL: m.url, Attempt: attempt, Status: status})
		h.mu.Unlock()
		if status >= 200 && status < 300 {
			return
		}
		t := time.NewTimer(pause)
		select {
		case <-h.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
	}
}

// post makes one attempt and returns the answer's status, or 0.
func (h *hookSender) post(m *hookMsg) int {
	hdr, err := SignWebhook(h.cfg.Secret, m.id, time.Now(), m.body)
	if err != nil {
		return 0
	}
	req, err := http.NewRequestWithContext(h.ctx, http.MethodPost, m.url, bytes.NewReader(m.body))
	if err != nil {
		return 0
	}
	req.Header = hdr
	resp, err := h.client.Do(req)
	if err != nil {
		return 0
	}
	io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
	return resp.StatusCode
}

// done counts n deliveries as over.
func (h *hookSender) done(n int) {
	if n == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pending -= n
	if h.pending == 0 {
		close(h.drained)
	}
}

// close stops sending: deliveries in flight are abandoned.
func (h *hookSender) close() {
	h.stop()
	h.wg.Wait()
}
