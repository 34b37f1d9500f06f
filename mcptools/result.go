package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolrelay/toolrelay/core"
	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/origin"
)

// output maps what a tool call returned to what the handler of its
// toolbox tool returns: text as a string (several as a content array), images
// and binary resources as image and file parts, structured content as
// JSON when there is no other content; an isError result as a
// *core.ModelError holding its text, which the model reads. What the
// backends cannot carry is replaced by a text part saying what was left
// out (audio), or dropped (annotations, _meta).
func output(res *mcp.CallToolResult) (any, error) {
	parts := contentParts(res.Content)
	if res.IsError {
		msg := textOf(parts)
		if msg == "" {
			msg = "the tool reported an error"
		}
		return nil, &core.ModelError{Message: msg}
	}
	switch {
	case len(parts) == 0 && res.StructuredContent != nil:
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, fmt.Errorf("structured content: %w", err)
		}
		return json.RawMessage(b), nil
	case len(parts) == 0:
		return "", nil
	case len(parts) == 1 && parts[0].Type == core.PartText:
		return parts[0].Text, nil
	}
	return core.Content(parts), nil
}

// contentParts maps MCP content to parts.
func contentParts(content []mcp.Content) []core.Part {
	parts := make([]core.Part, 0, len(content))
	for _, c := range content {
		switch c := c.(type) {
		case *mcp.TextContent:
			if c.Text != "" {
				parts = append(parts, core.TextPart(c.Text))
			}
		case *mcp.ImageContent:
			parts = append(parts, core.ImageData(c.MIMEType, c.Data))
		case *mcp.AudioContent:
			parts = append(parts, core.TextPart(fmt.Sprintf("[audio (%s, %d bytes) left out: tool results carry no audio]", c.MIMEType, len(c.Data))))
		case *mcp.ResourceLink:
			parts = append(parts, core.TextPart(linkText(c)))
		case *mcp.EmbeddedResource:
			if p, ok := resourcePart(c.Resource); ok {
				parts = append(parts, p)
			}
		default:
			parts = append(parts, core.TextPart(fmt.Sprintf("[content of type %T left out]", c)))
		}
	}
	return parts
}

func linkText(l *mcp.ResourceLink) string {
	var b strings.Builder
	fmt.Fprintf(&b, "resource %s", l.URI)
	if l.Name != "" {
		fmt.Fprintf(&b, " (%s", l.Name)
		if l.MIMEType != "" {
			fmt.Fprintf(&b, ", %s", l.MIMEType)
		}
		b.WriteString(")")
	}
	if l.Description != "" {
		b.WriteString(": " + l.Description)
	}
	return b.String()
}

// resourcePart maps an embedded resource: its text as a text part, an
// image blob as an image part, any other blob as a file part named after
// the last element of its URI.
func resourcePart(r *mcp.ResourceContents) (core.Part, bool) {
	switch {
	case r == nil:
		return core.Part{}, false
	case r.Blob == nil:
		return core.TextPart(r.Text), r.Text != ""
	case strings.HasPrefix(r.MIMEType, "image/"):
		return core.ImageData(r.MIMEType, r.Blob), true
	}
	name := path.Base(r.URI)
	if name == "." || name == "/" || name == "" {
		name = "resource"
	}
	return core.FileData(name, r.Blob), true
}

func textOf(parts []core.Part) string {
	var texts []string
	for _, p := range parts {
		if p.Type == core.PartText {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// Codes of errors the SDK makes itself when the connection fails, of
// the JSON-RPC implementation-defined range.
const (
	codeClientClosing = -32003
	codeServerClosing = -32004
	codeRejected      = -32005
)

// broken reports whether err says the connection to the server failed
// (rather than the server answering with an error).
func broken(err error) bool {
	if refused(err) {
		return false
	}
	if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing) {
		return true
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		switch we.Code {
		case codeClientClosing, codeServerClosing, codeRejected:
			return true
		}
		return false
	}
	return true
}

// refused reports whether err is a request the client refused to send:
// redirected by the server to another origin (an *origin.RedirectError),
// or made to another origin than the server's, where its headers must not
// go. The connection is not broken by it.
func refused(err error) bool {
	var re *origin.RedirectError
	return errors.As(err, &re) || errors.Is(err, errOtherOrigin)
}

// callError returns the handler's error for a call that failed below the
// tool (a protocol or transport error): a *core.ModelError telling the
// model what it can act on, wrapping an *errcode.Error for the run's
// events. ctx's own end is returned as it is, for the runner to report
// as a timeout or an interruption.
func callError(ctx context.Context, server, tool string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	op := fmt.Sprintf("mcptools: %s: call %s", server, tool)
	var we *jsonrpc.Error
	switch {
	case errors.Is(err, errDown):
		return &core.ModelError{Message: fmt.Sprintf("the MCP server %q is unavailable (it stopped); the call was not made", server), Err: &errcode.Error{Code: errcode.Unavailable, Op: op, Err: err}}
	case refused(err):
		return &core.ModelError{Message: fmt.Sprintf("the MCP server %q redirected the call to another origin, where it was not sent; the call was not made", server), Err: &errcode.Error{Code: errcode.PermissionDenied, Op: op, Err: err}}
	case broken(err):
		// The connection ended under the call: below the switch.
	case errors.As(err, &we):
		code, msg := errcode.Internal, fmt.Sprintf("the MCP server %q failed to answer the call", server)
		switch we.Code {
		case jsonrpc.CodeInvalidParams:
			code, msg = errcode.InvalidArgument, fmt.Sprintf("the MCP server %q refused the call's arguments", server)
		case jsonrpc.CodeMethodNotFound:
			code, msg = errcode.NotFound, fmt.Sprintf("the MCP server %q no longer offers this tool", server)
		}
		return &core.ModelError{Message: msg, Err: &errcode.Error{Code: code, Op: op, Err: err}}
	}
	return &core.ModelError{
		Message: fmt.Sprintf("the MCP server %q stopped answering during the call; whether the call took effect is unknown", server),
		Err:     &errcode.Error{Code: errcode.Unavailable, Op: op, Err: err},
	}
}
