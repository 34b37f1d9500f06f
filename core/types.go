package core

import "github.com/toolrelay/toolrelay/core/driver"

// The types a tool handler and a run's result share with backends. They
// are defined in package core/driver, which backends implement.
type (
	// A Call is one function call the model asked for (see [CallFromContext]).
	Call = driver.Call
	// Output is what a call returns to the model: text, a content array,
	// or nothing.
	Output = driver.Output
	// Content is a content array: a handler that returns one has it sent
	// as is.
	Content = driver.Content
	// A Part is one item of a content array.
	Part = driver.Part
	// PartType names the kind of a [Part].
	PartType = driver.PartType
	// Usage counts tokens.
	Usage = driver.Usage
	// Outcome says how a call's result came about.
	Outcome = driver.Outcome
	// CallKind says what a [Call] asks for: a function call, or the
	// service's own approval request.
	CallKind = driver.CallKind
)

// The kinds of call.
const (
	FunctionCall    = driver.FunctionCall
	ServiceApproval = driver.ServiceApproval
)

// The kinds of [Part].
const (
	PartText  = driver.PartText
	PartImage = driver.PartImage
	PartFile  = driver.PartFile
)

// The outcomes of a call. Every outcome but OK gives a failed result.
const (
	OK               = driver.OK
	UnknownTool      = driver.UnknownTool
	InvalidArguments = driver.InvalidArguments
	ToolError        = driver.ToolError
	Panicked         = driver.Panicked
	TimedOut         = driver.TimedOut
	Interrupted      = driver.Interrupted
	InDoubt          = driver.InDoubt
	Conflict         = driver.Conflict
	TooLarge         = driver.TooLarge
	Denied           = driver.Denied
)

// TextPart returns a text part.
func TextPart(text string) Part { return driver.TextPart(text) }

// ImagePart returns an image part for an image URL (or data: URL).
func ImagePart(url string) Part { return driver.ImagePart(url) }

// FilePart returns a file part for a file the service holds.
func FilePart(fileID string) Part { return driver.FilePart(fileID) }

// ImageData returns an image part holding the image itself, of media type
// mediaType (such as "image/png").
func ImageData(mediaType string, data []byte) Part { return driver.ImageData(mediaType, data) }

// FileData returns a file part holding the file itself.
func FileData(filename string, data []byte) Part { return driver.FileData(filename, data) }

// FileURL returns a file part for a file at a URL.
func FileURL(url string) Part { return driver.FileURL(url) }
