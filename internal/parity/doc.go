// Package parity holds the tests that keep the two built-in backends
// speaking one vocabulary: the same concept under the same name in
// package openai and package foundry, and one mapping of the services'
// HTTP statuses to error codes.
package parity
