package adapter

// OpenAIConfig holds the settings of the openai and fake-openai backends.
type OpenAIConfig struct{}
