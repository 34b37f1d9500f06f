package realtest

import (
	"os"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
)

// dialEnv dials the server a child process was told of.
func dialEnv() (client.Client, error) {
	return client.Dial(client.Options{HostPort: os.Getenv(hostPortEnv), Namespace: os.Getenv(namespaceEnv), Logger: tlog.NewStructuredLogger(quiet)})
}
