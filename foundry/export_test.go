package foundry

import "github.com/toolrelay/toolrelay/internal/respond"

// CanceledOutputForTest is the output sent for a call canceled by a stop.
var CanceledOutputForTest = respond.CanceledOutput
