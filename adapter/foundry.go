package adapter

// FoundryConfig holds the settings of the foundry, responses and
// fake-foundry backends.
type FoundryConfig struct{}
