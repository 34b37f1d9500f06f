package driver

// Spent is what a run has spent of its budget: what core.Budget's Charge
// counts, and its Exceeded and Remaining measure. A loop other than core's
// Runner (the Temporal runner) keeps it to enforce a core.Budget by core's
// rule; an application does not use it (a run's spending is in its
// core.Result).
type Spent struct {
	// Usage adds up the usage of the run's steps.
	Usage Usage `json:"usage,omitzero"`
	// ToolCalls counts the calls whose results were sent.
	ToolCalls int `json:"tool_calls,omitempty"`
	// Cost is the cost of Usage at the budget's prices.
	Cost float64 `json:"cost,omitempty"`
	// Unpriced names the model of a step that had no price under a cost
	// limit (the first); Exceeded refuses to go on while it is set.
	Unpriced string `json:"unpriced,omitempty"`
}
