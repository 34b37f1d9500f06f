// Package all links every built-in backend and journal into a program:
// the three backends, both embedded fakes (with their HTTP test servers)
// and both journal drivers (SQLite and PostgreSQL's pgx), some 80 MB. It
// is for tests and tools that must take any of them by configuration
// (cmd/toolrelay-journal reads any journal):
//
//	import _ "github.com/toolrelay/toolrelay/all"
//
// A program imports what it uses instead, and links nothing else (the
// examples do): the backends github.com/toolrelay/toolrelay/openai,
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
