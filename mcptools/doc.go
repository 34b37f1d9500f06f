// Package mcptools connects toolrelay to the Model Context Protocol, both
// ways, on the official Go SDK (github.com/modelcontextprotocol/go-sdk):
// the tools of a program's MCP servers become tools of any hosted agent,
// and a toolbox is served to any MCP client.
//
// # MCP servers' tools for a hosted agent
//
// [Connect] connects to MCP servers — a command started over stdio, a
// streamable HTTP endpoint, or a server in the same process ([InMemory]) —
// lists their tools and puts them in a [core.Toolbox], beside the
// program's own. Every backend offers them as function tools, and the
// runner runs their calls as any other: arguments validated against the
// server's schema (passed on as the server gave it, with "type" and
// "properties" added when missing; strict only where it already is),
// journaled, approved ([Server.Approval], [ApproveNames]), wrapped by the
// middleware, traced (package telemetry records the server on the
// execute_tool span, toolrelay.tool.server), bounded by the timeouts.
//
//	set, err := mcptools.Connect(ctx, tools, []mcptools.Server{
//		{Name: "files", Command: "mcp-files", Args: []string{"/srv/docs"}, Prefix: "files_"},
//		{Name: "tickets", URL: "https://tickets.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer " + token}},
//	}, nil)
//	defer set.Close()
//	runner, err := adapter.Open(ctx, tools, nil)
//
// Names are normalised to what the services accept ([ToolName]). A tool
// named as a program's tool or another server's is refused at [Connect],
// naming both, unless its server has a prefix: never a silent override.
// Allow- and deny-lists pick a server's tools. A server that notifies
// tools/list_changed has its tools listed again and swapped in the
// toolbox as one change; the backends offer the new set from the next
// request (the sessions backend updates the session's tools, a Foundry
// agent made from the toolbox gets a new version, the Responses backend
// sends them), and a call of a tool that is gone gets a failed result the
// model can act on.
//
// # Results and errors
//
// An isError result is a failed result whose text the model reads. Text
// content is text (several parts a content array), images are image
// parts, an embedded resource is its text, or an image or file part of
// its bytes, a resource link is a line of text naming it, and structured
// content is the JSON output when there is no other content. Audio is
// replaced by a line saying it was left out (tool results carry none), and
// content annotations and _meta are dropped. Backends without content
// arrays (the OpenAI sessions backend) send a content array as the JSON of
// its parts, an image as its data URL in it; text alone as plain text.
//
// A protocol or transport failure is a failed result the model can act on
// ("the MCP server … refused the call's arguments", "… stopped answering
// during the call; whether the call took effect is unknown", "… is
// unavailable", "… redirected the call to another origin"), whose error
// in the run's events is an *errcode.Error (InvalidArgument, NotFound,
// Internal, Unavailable, PermissionDenied). A server whose
// connection ends (a stdio server that exits, an HTTP server whose
// response breaks off) is started again, at most [Server.MaxRestarts]
// times with a growing pause, and its tools listed again; its calls fail
// meanwhile. The call's timeout ([Server.Timeout], or the runner's) and
// the run's cancellation cancel the call on the server
// (notifications/cancelled). Over streamable HTTP a server that dies
// without breaking the connection leaves the call waiting for its
// timeout.
//
// A server's annotations (readOnlyHint, idempotentHint, destructiveHint)
// count only where [Server.TrustHints] says to: they are its claims.
//
// # A toolbox served over MCP
//
// [ToolboxServer] returns the SDK's MCP server offering a toolbox's tools,
// [ServeStdio] serves it on standard input and output, and [Handler] over
// streamable HTTP. Each call is answered as a model's call would be:
// validation, limits, middleware, journal, hooks and events
// ([ServeOptions.Runner]); a failure is an isError result with the text
// the model would read. Given no logger, it logs only what goes wrong in
// it (at Warn and above, on slog.Default()), not its calls. Over HTTP, as MCP asks against DNS rebinding, a
// request from a browser's page (one with an Origin header) is served
// only from an origin the program trusts ([ServeOptions.TrustedOrigins])
// or from the server's own on a loopback host, and refused with 403
// otherwise; clients that are not browsers send none and are served.
//
// # Configuration
//
// Importing this package lets package adapter open the MCP servers named
// in the configuration, beside the backend ([Settings]): the file's
// section "mcp",
//
//	{"backend": "fake-openai",
//	 "mcp": {"servers": {
//	   "units":   {"command": "units-server", "args": ["--metric"], "env": {"UNITS_KEY": "${UNITS_KEY}"}},
//	   "tickets": {"url": "https://tickets.example.com/mcp", "headers": {"Authorization": "Bearer ${TICKETS_TOKEN}"},
//	               "prefix": "tickets_", "allow": ["get_*"], "approve": ["close_ticket"]}}}}
//
// or TOOLRELAY_MCP_SERVERS holding the "servers" object as JSON (it
// replaces the file's). ${NAME} in env and header values is the program's
// environment variable NAME. A configuration that names MCP servers in a
// program that does not import this package fails to open, naming the
// import. The keys: command, args, env, dir, url, headers, prefix, allow,
// deny, approve, trust_hints, timeout, max_restarts (see [Server]).
//
// A stdio server's environment holds PATH, HOME, USER, LOGNAME, SHELL,
// TERM, TMPDIR and LANG of the program's and its own env, nothing else:
// the program's credentials are not passed on. Headers go to the URL's
// origin only, over https (or to a loopback host): a server that
// redirects a request to another origin gets nothing sent there, and the
// call (or Connect) fails with code PermissionDenied, as on the backends'
// clients.
//
// # Testing
//
// Package mcptest holds an MCP server whose tools answer, fail, stall,
// crash and change the tool list on request; the conformance suite runs
// its MCP scenarios with it on every backend.
package mcptools
