// Package a2atools connects toolrelay to the Agent2Agent protocol (A2A,
// 0.3), both ways, on the official Go SDK (github.com/a2aproject/a2a-go).
package a2atools
