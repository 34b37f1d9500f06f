// Package all links every built-in backend and journal into a program, for
// programs (and examples) that select any of them by configuration alone:
//
//	import _ "github.com/toolrelay/toolrelay/all"
//
// A program that needs only some imports those packages instead, and
// links nothing else: the backends github.com/toolrelay/toolrelay/openai,
// …/foundry and …/responses; the embedded fakes …/openai/openaitest
// (fake-openai) and …/foundry/foundrytest (fake-foundry, fake-responses);
// the journals …/journal/sqlitejournal and …/journal/pgjournal.
package all

import (
	_ "github.com/toolrelay/toolrelay/foundry"
	_ "github.com/toolrelay/toolrelay/foundry/foundrytest"
	_ "github.com/toolrelay/toolrelay/journal/pgjournal"
	_ "github.com/toolrelay/toolrelay/journal/sqlitejournal"
	_ "github.com/toolrelay/toolrelay/openai"
	_ "github.com/toolrelay/toolrelay/openai/openaitest"
	_ "github.com/toolrelay/toolrelay/responses"
)
