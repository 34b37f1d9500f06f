// Package replay records a backend's HTTP traffic once, against the real
// service or a fake, into a cassette file, and replays it later with no
// service at all: a test of an agent runs in CI without credentials and
// without a network.
//
// A program does not change to use it: package adapter reads the setting
// "replay" (environment variable TOOLRELAY_REPLAY) and wraps the transport
// of whichever backend it opens, the Entra ID token requests of the
// Foundry backend included:
//
//	record:FILE   send every request to the service and write what was
//	              sent and answered to FILE when the runner closes
//	replay:FILE   answer every request from FILE; nothing is sent
//	auto:FILE     replay when FILE exists, else record
//
// FILE is a go-vcr cassette (gopkg.in/dnaeon/go-vcr.v4's format), a YAML
// file whose name ends in ".yaml".
//
// A replaying Cassette is also an http.Handler ([Cassette.ServeHTTP]):
// cmd/toolrelay-fake -replay FILE serves a cassette as a standalone fake,
// for clients in any language.
//
// # Safe to commit
//
// Nothing secret is written: the values of the headers that carry
// credentials (Authorization, Api-Key, Cookie, Set-Cookie and every header
// whose name looks secret), of the query parameters whose name looks
// secret (a SAS signature's sig, a key, a token) and of such form fields,
// of the JSON fields whose name says credential (api_key, access_token,
// client_secret, refresh_token, password …: a JSON body also carries the
// model's data, such as a tool's arguments {"key": "a"}, which is kept),
// and every secret-shaped value wherever
// it is (a bearer token, a JWT, an "sk-" API key) are replaced by
// "xxxxx" before the file is written (see [Redact]). Ids and timestamps
// are kept, so the replayed run sees what the recorded one saw.
//
// # Matching, and failing closed
//
// A replayed request is compared with the recorded ones in a canonical
// form: the method, the URL's path, its query (sorted) and its body (JSON
// decoded, or the text as it is), after the same redaction as the
// recording. The host is not compared (a fake's port changes from run to
// run), nor are the headers (they carry credentials, SDK versions and
// retry counts). Volatile fields are matched by rule, whatever their
// values: a query parameter or JSON field named idempotency_key (any case,
// - or _), timestamp, or ending in _at (created_at, expires_at …), and
// the id a stateless thread makes up for itself (a JSON field
// toolrelay_thread whose value starts with "stateless_").
//
// Requests of one thread replay in recorded order: a request is answered
// by the earliest unplayed recorded request equal to it, and only when no
// earlier unplayed request has the same method and path. Every other
// request fails, with code FailedPrecondition, naming the nearest recorded
// request and showing the difference (go-cmp, -recorded +sent); nothing is
// sent to the network.
//
// # What is replayed
//
// A response is replayed with its status, headers and body as recorded; a
// streamed body (server-sent events, a long poll) is recorded as the
// client read it and replayed from the start at once; a stream the
// service broke is replayed with the bytes it carried, then the same
// break; a request that failed in transport fails again; a request the
// program cancelled waits for its context to end again.
//
// # Checking a fake against a recording
//
// Package replaycheck's Check sends a cassette's requests, in order, to a
// fake ([ReadFile] reads them) and returns
// where its answers differ from the recorded ones (status, Content-Type,
// bodies compared as JSON, a stream event by event), the volatile fields
// ignored by the rules above, each difference named by its interaction
// and JSON path and shown with go-cmp. The ids the fake mints are mapped
// to the recorded ones, so that a request naming a recorded session,
// response or conversation is sent with the fake's. cmd/toolrelay-fake
// -check FILE is its command: a cassette recorded against the real
// service checks a fake against the service's traffic. (It is a package
// of its own because it reads streams with openai-go's decoder, which
// this package, linked by package adapter, must not link.)
//
// # Webhook deliveries are not recorded
//
// A cassette holds what a program sends and is answered; a webhook
// delivery (openai.WebhookHandler) is sent to the program, by the
// service, and is not recorded. Replaying one would not test what
// matters: each delivery is signed with the endpoint's secret over its
// timestamp (a cassette may hold neither the secret nor a signature that
// verifies long after), a recorded delivery is older than the handler's
// tolerance (openai.DefaultWebhookTolerance, 5 minutes), and its event id
// is one the handler takes once; a replay would have to re-sign it with
// a secret the test makes up, that is, make a new delivery. What a
// delivery makes the program do is recorded: the resume it starts
// (core.Runner.Resume, tried again within WebhookOptions.RetryFor, else
// handed over) sends its requests through the backend's transport like
// any other. A test of the webhook path makes its deliveries with the
// fake (openaitest.Options.Webhooks signs them afresh for each attempt),
// and replays the requests the resume sends, if it replays at all.
//
// # Why go-vcr's format, not its code
//
// Cassettes are go-vcr's (gopkg.in/dnaeon/go-vcr.v4, format version 2):
// go-vcr's cassette.Load reads what this package writes, and this package
// replays what go-vcr's recorder writes. Its code is not linked: its
// package cassette links package testing and net/http/httptest (its
// server-side replay), which no program may link (internal/depcheck); and
// its recorder reads the whole response body before it returns the
// response, so a stream that carries events only after the client's next
// request (the OpenAI sessions' events stream, subscribed before the
// input is posted) never ends while recording, and its matcher sees no
// position, so it cannot keep a thread's order nor say which recorded
// request a miss was nearest to.
//
// # Limits
//
// A cassette larger than Options.MaxCassetteBytes is refused on load, and
// a recorded body (sent or received) larger than Options.MaxBodyBytes
// fails the recording, with code ResourceExhausted.
//
// A cassette's file is parsed once: the parsed cassette is kept, keyed by
// the file's path, modification time and size (a rewritten file is parsed
// again), for the last 32 files opened, so that a test that opens the
// same cassette many times (a replayed run per subtest) does not parse it
// each time. Each Open replays from the start all the same.
package replay
