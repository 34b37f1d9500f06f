// Package coretest provides what tests of tool loops need, independent of
// any service: a [Script] of what a fake model does (call these functions
// with these arguments, several at once if asked; then answer with text that
// may quote their outputs), the [Model] that plays it for one thread, and
// [Backend], an in-memory driver.Backend that plays a script with no
// network. The fake servers of the other backends (openaitest for OpenAI
// sessions, foundrytest for Foundry and the plain Responses API) play the
// same scripts, and the conformance suite is written in them.
//
// Scripts are plain data and load from JSON ([LoadScript]), so a fake
// server started from the command line can play them too.
//
// The fake backends of package adapter (fake-openai, fake-foundry,
// fake-responses) play the script their [FakeSettings] name:
//
//	Setting                  Environment variable   File key
//	script file (JSON)       TOOLRELAY_SCRIPT       fake.script
//
// or a *Script set in code: adapter.Options{BackendSettings: []any{coretest.FakeSettings{Script: s}}}.
package coretest
